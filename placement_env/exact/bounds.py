"""A lower bound on the simulated step time that no successful placement beats: :func:`window_bound`.

It rests on three facts of the simulator (derived in ``docs/optimality.md``), each true of every placement:

* heads and tails: op ``i`` cannot start before ``head[i]`` (the longest path to it, every op at its shortest
  allowed duration, no transfer) nor end later than ``T - tail[i]`` (the same from it), ``T`` the step time;
* a group's ops all run on one device, and a device of one lane runs one op at a time, so a device's ops with
  head >= h and tail >= q take their summed durations inside ``[h, T - q]``: ``T >= h + q + that sum`` (a device of
  several lanes does that work at no more than its throughput, :func:`~.relaxation.device_rates`). It holds for
  every window (h, q) that some op of the graph lies in, since that op alone gives ``T >= h + q``;
* the persistent bytes placed on a device fit its memory.

The window inequalities are linear in the assignment of groups to devices, so the least ``T`` over every
assignment is a mixed-integer program: assignment binaries, ``T`` continuous, one inequality per device and window
(head threshold h, tail threshold q), memory per device. It is solved with HiGHS (``scipy.optimize.milp``) by
cutting planes: start from each group's own densest window on each device (:func:`densest_window`), solve, add
each device's densest window of the solution where it is broken, until none is or time runs out. The solver's proven dual bound holds whenever it
stops. The answer is the largest of that, the critical path and :func:`~placement_env.costs.work_bound`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, sparse

from ..cluster import Cluster
from ..cluster.symmetry import device_symmetries
from ..costs import OpCosts, critical_path, work_bound
from ..opgraph import OpGraph
from ..placement import allowed_devices
from .relaxation import device_rates

__all__ = ["Bound", "densest_window", "heads_and_tails", "window_bound"]



@dataclass(frozen=True)
class Bound:
    """A lower bound on every successful simulated placement's step time: ``value_s`` (the largest of ``parts``,
    each a bound by itself: ``critical_path``, ``work``, ``windows``), what the solver proved of the window
    program (``status``: ``optimal`` when it solved it, ``time_limit`` when its dual bound is what stands), the
    solver's rounds and wall seconds."""

    value_s: float
    parts: dict[str, float] = field(default_factory=dict)
    status: str = ""
    rounds: int = 0
    solver_s: float = 0.0


def heads_and_tails(graph: OpGraph | tuple[np.ndarray, np.ndarray, np.ndarray], shortest: np.ndarray,
                    processing: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per op (in seconds), a time before which no placement starts it (its head) and one within which none ends it
    before the step's end (its tail): the longest path to its start and from its end, op ``j`` lasting
    ``shortest[j]`` and every edge free.

    With ``processing`` ([n_ops, n_devices], each op's time on each device its group may take, inf elsewhere) the
    path values also rise to the one-machine bound of each op's ancestors in its own group (reached through the
    group): they all run on its device and end before it starts, so it starts no earlier than
    ``min over the group's devices of max over h of (h + their processing with head >= h)``; tails likewise with
    the descendants in its group. ``graph``: an OpGraph, or its (edge sources, edge destinations, group per op)."""
    src, dst, group = ((graph.edge_src, graph.edge_dst, graph.group) if isinstance(graph, OpGraph) else graph)
    src, dst, group = (np.asarray(a, np.int64) for a in (src, dst, group))
    n = len(group)
    by_dst, by_src = np.argsort(dst, kind="stable"), np.argsort(src, kind="stable")
    head = _longest_paths(range(n), np.searchsorted(dst[by_dst], np.arange(n + 1)), src[by_dst], group, shortest,
                          processing)
    tail = _longest_paths(range(n - 1, -1, -1), np.searchsorted(src[by_src], np.arange(n + 1)), dst[by_src], group,
                          shortest, processing)
    return head, tail


def _longest_paths(order: range, ptr: np.ndarray, linked: np.ndarray, group: np.ndarray, shortest: np.ndarray,
                   processing: np.ndarray | None) -> np.ndarray:
    """Per op, visited in ``order`` (topological, or its reverse for tails), the longest path from its ``linked``
    neighbours (``linked[ptr[v]:ptr[v + 1]]``, visited before it), raised to its group mates' one-machine bound."""
    value = np.zeros(len(group))
    within = _GroupMates(group) if processing is not None else None
    for v in order:
        neighbours = linked[ptr[v]:ptr[v + 1]]
        if neighbours.size:
            value[v] = np.max(value[neighbours] + shortest[neighbours])
        if within is not None:
            mates = within.add(v, neighbours[group[neighbours] == group[v]])
            value[v] = max(value[v], _one_machine(value[mates], processing[mates]))
    return value


class _GroupMates:
    """Each op's ancestors (or, fed in reverse, descendants) reached through its own group, as bit sets."""

    def __init__(self, group: np.ndarray) -> None:
        self.group = group
        self.position = np.zeros(len(group), np.int64)  # each op's place among its group's ops
        self.members: dict[int, list[int]] = {}
        self.sets: dict[int, int] = {}

    def add(self, op: int, linked: np.ndarray) -> np.ndarray:
        """Record ``op`` with its same-group neighbours ``linked`` (already added); the ops of its set."""
        members = self.members.setdefault(int(self.group[op]), [])
        bits = 0
        for other in linked.tolist():
            bits |= self.sets[other] | (1 << int(self.position[other]))
        self.position[op] = len(members)
        members.append(op)
        self.sets[op] = bits
        if not bits:
            return np.zeros(0, np.int64)
        flags = np.unpackbits(np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), np.uint8),
                              bitorder="little")
        return np.asarray(members, np.int64)[np.flatnonzero(flags)]


def _one_machine(release: np.ndarray, processing: np.ndarray) -> float:
    """``min over devices of max over h of (h + processing of the ops with release >= h)``: when the last of these
    ops ends on whichever device they share (0 for none)."""
    if release.size == 0:
        return 0.0
    order = np.argsort(-release, kind="stable")
    finish = release[order][:, None] + np.cumsum(processing[order], axis=0)
    return float(np.min(np.max(finish, axis=0)))


def densest_window(head: np.ndarray, tail: np.ndarray, seconds: np.ndarray) -> tuple[float, float, float]:
    """(the largest ``h + q + sum of seconds[i] with head[i] >= h and tail[i] >= q`` over windows some op lies in,
    its h, its q) for one set of ops: the one-machine bound of the set (it equals the preemptive schedule's, Carlier
    1982); exact, in O(n^2) array steps."""
    if head.size == 0:
        return -np.inf, 0.0, 0.0
    tails = np.unique(tail)
    level = np.searchsorted(tails, tail)  # each op's tail's place among the tails
    inside = np.zeros(len(tails))  # per tail threshold q: seconds of the ops so far with tail >= q
    count = np.zeros(len(tails), np.int64)
    order = np.argsort(-head, kind="stable")
    best = (-np.inf, 0.0, 0.0)
    for k, i in enumerate(order.tolist()):
        inside[:level[i] + 1] += seconds[i]
        count[:level[i] + 1] += 1
        if k + 1 < len(order) and head[order[k + 1]] == head[i]:
            continue  # every op of this head first
        value = np.where(count > 0, tails + inside, -np.inf)
        j = int(np.argmax(value))
        if head[i] + value[j] > best[0]:
            best = (float(head[i] + value[j]), float(head[i]), float(tails[j]))
    return best


def window_bound(graph: OpGraph, cluster: Cluster, costs: OpCosts | np.ndarray, *, time_limit_s: float = 60.0
                 ) -> Bound:
    """The bound of the module docstring for ``graph`` on ``cluster`` with ``costs`` (the simulator's op seconds),
    the window program given at most ``time_limit_s`` seconds."""
    began = time.perf_counter()
    seconds = np.asarray(costs.seconds if isinstance(costs, OpCosts) else costs, np.float64)
    allowed = allowed_devices(graph, cluster)
    share, rate = device_rates(cluster)
    duration = seconds / share[None, :]
    fastest = np.where(allowed[graph.group], duration, np.inf).min(axis=1)
    parts = {"critical_path": critical_path(graph, fastest) if graph.n_ops else 0.0,
             "work": work_bound(OpCosts(seconds=seconds / rate[None, :], source="bound")) if graph.n_ops else 0.0}
    if graph.n_ops == 0 or not allowed.any(axis=1).all():
        return Bound(max(parts.values(), default=0.0), parts, "trivial", 0, time.perf_counter() - began)
    # each op's processing on each device: its duration on a one-lane device, its work over the throughput on others
    processing = np.where(np.asarray(cluster.concurrency)[None, :] > 1, seconds / rate[None, :], duration)
    head, tail = heads_and_tails(graph, fastest, np.where(allowed[graph.group], processing, np.inf))
    program = _WindowProgram(graph, cluster, allowed, head, tail, processing)
    status, rounds, value = program.solve(began + time_limit_s, floor=max(parts.values()))
    parts["windows"] = value
    return Bound(max(parts.values()), parts, status, rounds, time.perf_counter() - began)


class _WindowProgram:
    """The window program (module docstring) over groups x devices, solved by cutting planes."""

    def __init__(self, graph: OpGraph, cluster: Cluster, allowed: np.ndarray, head: np.ndarray, tail: np.ndarray,
                 processing: np.ndarray) -> None:
        self.allowed, self.head, self.tail, self.processing = allowed, head, tail, processing
        self.group = graph.group.astype(np.int64)
        self.n_groups, self.n_dev = allowed.shape
        self.pairs = np.argwhere(allowed)  # variable k: group pairs[k, 0] on device pairs[k, 1]; T is the last
        self.n_vars = len(self.pairs) + 1
        self.persistent = graph.group_persistent_bytes.astype(np.float64)
        self.capacity = cluster.memory_bytes.astype(np.float64)
        self.rows: list[tuple[np.ndarray, np.ndarray, float]] = []  # window inequalities: (variables, energies, h + q)
        self.seen: set[tuple[int, float, float]] = set()
        # own[k]: group pairs[k, 0]'s own densest window on device pairs[k, 1]; T >= sum_k own[k] x[k] over each
        # group's variables (it is on one device), which gives the relaxation every group's bound at once
        self.own = np.zeros(len(self.pairs))
        order = np.argsort(self.group, kind="stable")
        ptr = np.searchsorted(self.group[order], np.arange(self.n_groups + 1))
        for k, (g, d) in enumerate(self.pairs.tolist()):
            ops = order[ptr[g]:ptr[g + 1]]
            self.own[k], h, q = densest_window(head[ops], tail[ops], processing[ops, d])
            self._add(d, h, q)
        self.pinned = self._symmetry_breaking(cluster)

    def _symmetry_breaking(self, cluster: Cluster) -> np.ndarray:
        """The variables fixed at 0 to break the relabellings of alike devices: the group of the largest own window
        may take only the first device of each orbit (every assignment has a relabelling that does this, with the
        same windows, memory and T, since a relabelling kept here changes none of the program's numbers)."""
        keep = [perm for perm in device_symmetries(cluster)
                if np.array_equal(self.processing[:, perm], self.processing)
                and np.array_equal(self.allowed[:, perm], self.allowed)
                and np.array_equal(self.capacity[perm], self.capacity)]
        if len(keep) <= 1:
            return np.zeros(0, np.int64)
        first = np.array(keep).min(axis=0) == np.arange(self.n_dev)  # the orbits' first devices
        heaviest = int(self.pairs[np.argmax(self.own), 0])
        return np.flatnonzero((self.pairs[:, 0] == heaviest) & ~first[self.pairs[:, 1]])

    def _add(self, d: int, h: float, q: float) -> bool:
        """Put the window (device d, head >= h, tail >= q) in the program; False if it is there already."""
        if (d, h, q) in self.seen:
            return False
        self.seen.add((d, h, q))
        inside = (self.head >= h) & (self.tail >= q)
        energy = np.bincount(self.group[inside], weights=self.processing[inside, d], minlength=self.n_groups)
        ks = np.flatnonzero((self.pairs[:, 1] == d) & (energy[self.pairs[:, 0]] > 0))
        self.rows.append((ks, energy[self.pairs[ks, 0]], h + q))
        return True

    def _matrix(self) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
        rows, cols, vals, lower, upper = [], [], [], [], []
        r = 0
        for g in range(self.n_groups):  # one device per group, and T at least the group's own window there
            ks = np.flatnonzero(self.pairs[:, 0] == g)
            rows += [r] * len(ks); cols += ks.tolist(); vals += [1.0] * len(ks); lower.append(1); upper.append(1)
            r += 1
            own = np.maximum(self.own[ks], 0.0)
            rows += [r] * (len(ks) + 1); cols += ks.tolist() + [self.n_vars - 1]; vals += own.tolist() + [-1.0]
            lower.append(-np.inf); upper.append(0.0); r += 1
        for d in range(self.n_dev):  # persistent bytes within memory
            ks = np.flatnonzero((self.pairs[:, 1] == d) & (self.persistent[self.pairs[:, 0]] > 0))
            if ks.size:
                rows += [r] * len(ks); cols += ks.tolist(); vals += self.persistent[self.pairs[ks, 0]].tolist()
                lower.append(-np.inf); upper.append(self.capacity[d]); r += 1
        for ks, energy, offset in self.rows:  # sum_g E[g] x[g, d] - T <= -(h + q)
            rows += [r] * (len(ks) + 1); cols += ks.tolist() + [self.n_vars - 1]
            vals += energy.tolist() + [-1.0]; lower.append(-np.inf); upper.append(-offset); r += 1
        matrix = sparse.csr_matrix((vals, (rows, cols)), shape=(r, self.n_vars))
        return matrix, np.array(lower, float), np.array(upper, float)

    def _cut(self, x: np.ndarray, t: float) -> int:
        """Add, per device, the densest window of the ops ``x`` puts there if it is broken; how many were added."""
        device_of_group = np.full(self.n_groups, -1)
        chosen = self.pairs[x > 0.5]
        device_of_group[chosen[:, 0]] = chosen[:, 1]
        dev = device_of_group[self.group]
        added = 0
        for d in range(self.n_dev):
            ops = np.flatnonzero(dev == d)
            value, h, q = densest_window(self.head[ops], self.tail[ops], self.processing[ops, d])
            if value > t * (1 + 1e-9) + 1e-15:
                added += self._add(d, h, q)
        return added

    def solve(self, deadline: float, floor: float = 0.0) -> tuple[str, int, float]:
        """(status, rounds, the proven least T) of the program, cutting until no window is broken or the deadline;
        ``floor``: a bound T is known to obey (the critical path's and the work bound's), given to the solver."""
        cost = np.zeros(self.n_vars)
        cost[-1] = 1.0
        integrality = np.ones(self.n_vars)
        integrality[-1] = 0
        upper = np.r_[np.ones(self.n_vars - 1), np.inf]
        upper[self.pinned] = 0.0
        bounds = optimize.Bounds(np.r_[np.zeros(self.n_vars - 1), floor], upper)
        proven, rounds = floor, 0
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                return "time_limit", rounds, proven
            matrix, lower, upper = self._matrix()
            result = optimize.milp(cost, integrality=integrality, bounds=bounds,
                                   constraints=optimize.LinearConstraint(matrix, lower, upper),
                                   options={"time_limit": left, "disp": False})
            rounds += 1
            if result.status == 2:  # infeasible: no assignment fits the persistent bytes
                return "infeasible", rounds, float("inf")
            dual = getattr(result, "mip_dual_bound", None)
            if dual is not None and np.isfinite(dual):  # HiGHS's proven bound on this round's program
                proven = max(proven, float(dual))
            if result.status != 0 or result.x is None:  # stopped by its time limit: the dual bound stands
                return "time_limit", rounds, proven
            if not self._cut(np.round(result.x[:-1]), float(result.x[-1])):
                return "optimal", rounds, proven
