"""List-scheduling baselines: HEFT, and Baechi's memory-aware m-TOPO and m-ETF.

All three schedule whole co-location groups (a placement is one device per group), on a group DAG
built by :func:`group_dag` from the core's group graph (:func:`placement_env.group_graph`):

* a group's compute seconds on device d: the sum of its ops' ``costs.seconds[:, d]``;
* a group edge a -> b carries the bytes of every op output of a consumed in b, each output counted
  once per consuming group (the simulator sends an output once per destination device); an edge
  made of control edges only carries 0 bytes (it still costs the link latency);
* groups can form cycles (e.g. a layer's forward and its gradient ops share a group). Groups are
  numbered by their first op and ops are in topological order, so group index is a topological
  order of the first ops; edges from a later group to an earlier one ("back edges") are dropped:
  they neither block nor cost anything in the schedules. (SCC condensation would instead merge a
  whole forward/backward network into one unit, leaving nothing to schedule.)
* a group's memory (m-TOPO, m-ETF): its resident (persistent) bytes plus all its ops' output
  bytes, Baechi's conservative estimate (activations held for the whole step), plus a copy of
  every tensor it consumes from other groups (back edges included) unless the producer is already
  placed on the same device (see ``_MemoryLedger``). The sum is an upper bound of the
  simulator's peak, so a placement made without the fallback below never runs out of memory.

Devices: a group only ever goes to a device with kernels for all its ops (``problem.allowed``).
m-TOPO and m-ETF place on the GPUs (Baechi's setting), and spill to other devices (the CPU) only
for groups no GPU can run or no GPU has memory left for; if no allowed device has room, the group
goes to its allowed device with the most free memory (the placement may then run out of memory).
HEFT, made for heterogeneous processors, considers every allowed device and ignores memory.

Communication cost a -> b between devices i != j: ``latency[i, j] + bytes / bandwidth[i, j]``
(0 on one device); link contention is not modelled. A device runs one group at a time (a CPU's
lanes share its throughput, so one serial processor has the same throughput).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from placement_env import Problem, group_graph

__all__ = ["GroupDag", "group_dag", "heft", "m_topo", "m_etf"]


@dataclass(frozen=True)
class GroupDag:
    """The group-level DAG a list scheduler sees (forward edges only, ``src < dst``).

    ``seconds`` [n_groups, n_devices]: compute time; ``memory`` [n_groups]: resident + output bytes;
    ``allowed`` [n_groups, n_devices]; ``preds[g]`` / ``pred_bytes[g]``: predecessor groups and the
    bytes they send; ``succs[g]`` / ``succ_bytes[g]`` likewise; ``bandwidth``, ``latency``,
    ``capacity`` [n_devices]: the cluster's links and memory.
    """

    seconds: np.ndarray
    memory: np.ndarray
    allowed: np.ndarray
    preds: list[np.ndarray]
    pred_bytes: list[np.ndarray]
    succs: list[np.ndarray]
    succ_bytes: list[np.ndarray]
    sources: list[np.ndarray]  # all groups sending to g (back edges included), for memory accounting
    source_bytes: list[np.ndarray]
    bandwidth: np.ndarray
    latency: np.ndarray
    capacity: np.ndarray
    preferred: np.ndarray  # bool [n_devices]: the devices m-TOPO / m-ETF place on first (the GPUs)

    @property
    def n_groups(self) -> int:
        return self.seconds.shape[0]

    @property
    def n_devices(self) -> int:
        return self.seconds.shape[1]

    def arrival(self, g: int, finish: np.ndarray, device: np.ndarray) -> np.ndarray:
        """[n_devices]: when all of g's inputs (from scheduled predecessors) can be on each device."""
        preds = self.preds[g]
        if preds.size == 0:
            return np.zeros(self.n_devices)
        src = device[preds]
        times = finish[preds, None] + self.latency[src] + self.pred_bytes[g][:, None] / self.bandwidth[src]
        return times.max(axis=0)


def group_dag(problem: Problem) -> GroupDag:
    """Build the group DAG of ``problem`` (see the module docstring for the rules)."""
    cluster = problem.cluster
    groups = group_graph(problem.graph, cluster, problem.costs)
    n, n_dev = groups.n_groups, cluster.n_devices
    a, b, pair_bytes = groups.src, groups.dst, groups.bytes.astype(np.float64)

    def split(keys: np.ndarray, values: np.ndarray, other: np.ndarray) -> tuple[list, list]:
        order = np.argsort(keys, kind="stable")
        bounds = np.searchsorted(keys[order], np.arange(n + 1))
        return ([other[order[bounds[g]:bounds[g + 1]]] for g in range(n)],
                [values[order[bounds[g]:bounds[g + 1]]] for g in range(n)])

    fwd = a < b
    preds, pred_bytes = split(b[fwd], pair_bytes[fwd], a[fwd])
    succs, succ_bytes = split(a[fwd], pair_bytes[fwd], b[fwd])
    sources, source_bytes = split(b, pair_bytes, a)
    kinds = np.array([d.kind for d in cluster.devices])
    preferred = kinds == "GPU" if (kinds == "GPU").any() else np.ones(n_dev, dtype=bool)
    return GroupDag(seconds=np.array(groups.seconds), memory=groups.memory_bytes.astype(np.float64),
                    allowed=np.asarray(problem.allowed, dtype=bool), preds=preds, pred_bytes=pred_bytes, succs=succs,
                    succ_bytes=succ_bytes, sources=sources, source_bytes=source_bytes,
                    bandwidth=np.asarray(cluster.bandwidth, dtype=np.float64),
                    latency=np.asarray(cluster.latency, dtype=np.float64),
                    capacity=np.asarray(cluster.memory_bytes, dtype=np.float64), preferred=preferred)


class _MemoryLedger:
    """Bytes each device holds under the memory rule, as groups are placed one by one.

    Placing g on d charges d with g's resident + output bytes plus a copy of every tensor g
    consumes from other groups (back edges included), except those from groups already placed on
    d. Each copy the simulator makes is charged once or more, at the receiver, when the receiving
    group is placed, so no later placement adds to a device and ``used`` bounds the peak.
    """

    def __init__(self, dag: GroupDag):
        self.dag = dag
        self.used = np.zeros(dag.n_devices)
        self.device = np.full(dag.n_groups, -1, dtype=np.int64)

    def charge(self, g: int) -> np.ndarray:
        """[n_devices]: the bytes g would add to each device if placed there."""
        dag = self.dag
        src_dev = self.device[dag.sources[g]]
        local = np.bincount(src_dev[src_dev >= 0], dag.source_bytes[g][src_dev >= 0], minlength=dag.n_devices)
        return dag.memory[g] + dag.source_bytes[g].sum() - local

    def candidates(self, g: int, limit: np.ndarray | None = None) -> np.ndarray:
        """Bool [n_devices]: where g may go: preferred devices it fits on (within ``limit``, default
        the capacity), else any allowed device it fits on, else its allowed device with the most
        free memory."""
        dag = self.dag
        fits = dag.allowed[g] & (self.used + self.charge(g) <= (dag.capacity if limit is None else limit))
        if limit is not None or (fits & dag.preferred).any():
            return fits & dag.preferred
        if fits.any():
            return fits
        free = np.where(dag.allowed[g], dag.capacity - self.used, -np.inf)
        return np.arange(dag.n_devices) == int(np.argmax(free))

    def place(self, g: int, d: int) -> None:
        self.used[d] += self.charge(g)[d]
        self.device[g] = d


def m_topo(problem: Problem) -> np.ndarray:
    """Baechi's m-TOPO: groups in topological order fill the preferred devices (GPUs) one after
    another, each up to an even share of the graph's memory (total group memory / number of GPUs,
    capped by the device's capacity; the last GPU up to its capacity), i.e. balanced contiguous
    chunks. A group over the current device's share moves the fill on to the next GPU it fits on;
    a group without kernels there goes to the next GPU that can run it without moving the fill on;
    past the last GPU the memory rule of the module docstring applies."""
    dag = group_dag(problem)
    devices = np.flatnonzero(dag.preferred)
    share = np.minimum(dag.capacity, dag.memory.sum() / devices.size)
    share[devices[-1]] = dag.capacity[devices[-1]]
    ledger = _MemoryLedger(dag)
    current = 0
    for g in range(dag.n_groups):
        fits = ledger.candidates(g, share)[devices[current:]]
        if fits.any():
            k = current + int(np.argmax(fits))
            chosen = int(devices[k])
            if dag.allowed[g, devices[current]]:  # skipped for memory, not for kernels: move on
                current = k
        else:
            chosen = int(np.argmax(ledger.candidates(g)))
        ledger.place(g, chosen)
    return ledger.device


def m_etf(problem: Problem) -> np.ndarray:
    """Baechi's m-ETF (Earliest Task First): repeatedly schedule the (ready group, device) pair
    with the earliest start time, max(device free, inputs arrived over the links), among devices
    allowed by the memory rule (a GPU with room for the group, see the module docstring); ties go
    to the earlier group, then the lower device index."""
    dag = group_dag(problem)
    n, n_dev = dag.n_groups, dag.n_devices
    placement = np.full(n, -1, dtype=np.int64)
    finish = np.zeros(n)
    free_at = np.zeros(n_dev)
    ledger = _MemoryLedger(dag)
    waiting = np.array([p.size for p in dag.preds])
    ready = [g for g in range(n) if waiting[g] == 0]
    arrival = {g: np.zeros(n_dev) for g in ready}
    while ready:
        rows = np.array(ready)
        cand = np.stack([ledger.candidates(g) for g in ready])
        start = np.maximum(np.stack([arrival[g] for g in ready]), free_at)
        start = np.where(cand, start, np.inf)
        # earliest start; ties: earlier group (rows kept sorted), then lower device
        flat = int(np.argmin(start))
        i, d = divmod(flat, n_dev)
        g = int(rows[i])
        placement[g], finish[g] = d, start[i, d] + dag.seconds[g, d]
        free_at[d] = finish[g]
        ledger.place(g, d)
        ready.pop(i)
        del arrival[g]
        for s in dag.succs[g]:
            waiting[s] -= 1
            if waiting[s] == 0:
                arrival[int(s)] = dag.arrival(int(s), finish, placement)
                ready.insert(int(np.searchsorted(ready, s)), int(s))
    return placement


def heft(problem: Problem) -> np.ndarray:
    """HEFT (Topcuoglu et al.): upward rank = mean compute over allowed devices + max over
    successors of (mean communication + successor's rank), mean communication using the mean
    latency and bandwidth over device pairs; groups are taken ready-first by decreasing rank (ties:
    earlier group) and each goes to the allowed device with the earliest finish time (no insertion
    into idle gaps; ties: lower device index). No memory awareness."""
    dag = group_dag(problem)
    n, n_dev = dag.n_groups, dag.n_devices
    mean_cost = np.where(dag.allowed, dag.seconds, 0).sum(axis=1) / np.maximum(dag.allowed.sum(axis=1), 1)
    off = ~np.eye(n_dev, dtype=bool)
    if off.any():
        mean_latency, mean_inv_bw = dag.latency[off].mean(), (1.0 / dag.bandwidth[off]).mean()
    else:
        mean_latency = mean_inv_bw = 0.0
    rank = np.zeros(n)
    for g in range(n - 1, -1, -1):  # group index is topological for forward edges
        s = dag.succs[g]
        tail = (mean_latency + dag.succ_bytes[g] * mean_inv_bw + rank[s]).max() if s.size else 0.0
        rank[g] = mean_cost[g] + tail
    placement = np.full(n, -1, dtype=np.int64)
    finish = np.zeros(n)
    free_at = np.zeros(n_dev)
    waiting = np.array([p.size for p in dag.preds])
    heap = [(-rank[g], g) for g in range(n) if waiting[g] == 0]
    heapq.heapify(heap)
    while heap:
        _, g = heapq.heappop(heap)
        eft = np.maximum(dag.arrival(g, finish, placement), free_at) + dag.seconds[g]
        d = int(np.argmin(np.where(dag.allowed[g], eft, np.inf)))
        placement[g], finish[g], free_at[d] = d, eft[d], eft[d]
        for s in dag.succs[g]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(heap, (-rank[s], int(s)))
    return placement
