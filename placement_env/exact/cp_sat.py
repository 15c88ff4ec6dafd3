"""The relaxed model (:mod:`.relaxation`) as an OR-Tools CP-SAT problem, solved for a placement and a bound.

Variables: per group and allowed device a literal (the group is there), per op a start and an end; per op and
allowed device an optional interval of the op's duration there, present with its group's literal; the makespan.
Constraints: one device per group; no overlap on one-lane devices, at most ``lanes`` of demand at once on the others,
and every device's work within its throughput over the makespan; each edge's consumer starting after its producer
ends, plus the edge's lag for the device pair its groups are on; the persistent bytes within each device's memory.
Objective: the makespan. The relabellings of alike devices are broken at group 0 (it goes to the first device of its
orbit), which removes only solutions that a relabelling of the devices gives back.

``solve_relaxed`` returns the solver's best placement and makespan, and its proven bound: no placement of the
relaxed model is faster, so no successful simulated placement is either (in seconds, rounded down to the tick).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..cluster.symmetry import canonical_placement, device_symmetries
from .bounds import heads_and_tails
from .relaxation import SHARE_SCALE, RelaxedModel

__all__ = ["ExactResult", "solve_relaxed"]

PAIRWISE_LAGS_MAX = 400_000  # conditional lags per (edge, device pair) past which one lag per edge is kept (the least)
WINDOW_THRESHOLDS = 8  # head and tail thresholds (quantiles) of the windows added as linear constraints
LARGE_MODEL_OPS = 2_000  # models of more ops are solved without presolve


@dataclass(frozen=True)
class ExactResult:
    """What CP-SAT gave on a relaxed model: ``placement`` (device per group; None if it found none),
    ``makespan_s`` (the model's step time of it, never above the simulator's), ``bound_s`` (no placement of the
    model, hence no successful simulated one, is faster), ``status`` (CP-SAT's: OPTIMAL, FEASIBLE, INFEASIBLE
    or UNKNOWN), ``solver_s`` (wall seconds in the solver), ``solutions`` (each improving placement found,
    in order) and ``model`` (which model was solved: ``"relaxed"``, whose bound holds for the simulator, or
    ``"blocks"``, whose bound holds for the block model only)."""

    placement: np.ndarray | None
    makespan_s: float
    bound_s: float
    status: str
    solver_s: float
    solutions: tuple[np.ndarray, ...] = ()
    model: str = "relaxed"

    @property
    def optimal(self) -> bool:
        """Whether the solver proved its placement optimal for the relaxed model."""
        return self.status == "OPTIMAL"


def _cp_model() -> Any:
    try:
        from ortools.sat.python import cp_model
    except ImportError as error:  # pragma: no cover - ortools is a dependency
        raise ImportError("the exact solver needs OR-Tools (pip install ortools; setup.sh installs it)") from error
    return cp_model


def model_symmetries(cluster: Cluster, model: RelaxedModel) -> np.ndarray:
    """[k, n_devices]: the cluster's relabellings of alike devices (``device_symmetries``) under which every array
    of ``model`` is unchanged too (durations, lags, memory, lanes, demands), the identity first."""
    keep = []
    for perm in device_symmetries(cluster):
        if (np.array_equal(model.duration[:, perm], model.duration) and np.array_equal(model.work[:, perm], model.work)
                and np.array_equal(model.allowed[:, perm], model.allowed)
                and np.array_equal(model.demand[:, perm], model.demand)
                and np.array_equal(model.lag[:, perm][:, :, perm], model.lag)
                and all(np.array_equal(a[perm], a) for a in (model.capacity, model.lanes, model.throughput))):
            keep.append(perm)
    return np.array(keep, np.int64)


def solve_relaxed(model: RelaxedModel, symmetries: np.ndarray, *, time_limit_s: float,
                  horizon_ticks: int | None = None, hint: np.ndarray | None = None,
                  hint_starts: np.ndarray | None = None, workers: int = 1, log: bool = False) -> ExactResult:
    """Solve ``model`` with CP-SAT in this process for at most ``time_limit_s`` wall seconds on ``workers``
    threads; ``symmetries``: the device relabellings that leave it unchanged (:func:`model_symmetries`);
    ``hint``: a placement to start from (with ``hint_starts``, its ops' start times in seconds, e.g. its model
    schedule); ``horizon_ticks``: a makespan no optimum exceeds (default: every op and lag in a row).

    Not in a process that has imported TensorFlow (its native libraries and OR-Tools' clash: CP-SAT crashes
    there); :func:`~placement_env.exact.isolated.solve_isolated` runs it in a fresh process."""
    cp_model = _cp_model()
    m = cp_model.CpModel()
    n, n_dev, n_groups = model.n_ops, model.n_devices, model.n_groups
    allowed = model.allowed.copy()
    if len(symmetries) > 1 and n_groups:
        # group 0 on the first device of its orbit: every placement has a relabelling that does this
        # (canonical_placement's), and the hint is relabelled to it
        allowed[0] &= symmetries.min(axis=0) == np.arange(n_dev)
        if hint is not None:
            hint = canonical_placement(hint, symmetries)
    if horizon_ticks is None:
        horizon_ticks = int(model.duration.max(axis=1).sum() + model.lag.max(axis=(1, 2)).sum()) if n else 0
    horizon = max(int(horizon_ticks), 1)

    x = {(g, d): m.NewBoolVar(f"x{g}_{d}") for g in range(n_groups) for d in np.flatnonzero(allowed[g]).tolist()}
    for g in range(n_groups):
        m.AddExactlyOne([x[g, d] for d in np.flatnonzero(allowed[g]).tolist()])
    # Heads and tails in ticks from the model's own rules (so every schedule of the model obeys them): paths of
    # shortest durations, raised by the bound of each op's group mates on its device: one at a time on a one-lane
    # device, at most `lanes` at once on the others (the model's cumulative).
    shortest = np.where(allowed[model.group], model.duration, np.iinfo(np.int64).max).min(axis=1)
    occupancy = np.where(allowed[model.group], model.duration * model.demand / model.lanes[None, :], np.inf)
    heads, tails = heads_and_tails((model.edges[:, 0], model.edges[:, 1], model.group), shortest.astype(np.float64),
                                   occupancy)
    head, tail = np.floor(heads + 1e-9).astype(np.int64), np.floor(tails + 1e-9).astype(np.int64)
    if n and (head + shortest + tail).max() > horizon:
        horizon = int((head + shortest + tail).max())  # a start hint that does not fit bounds nothing
    start = [m.NewIntVar(int(head[i]), horizon - int(tail[i] + shortest[i]), f"s{i}") for i in range(n)]
    end = [m.NewIntVar(int(head[i] + shortest[i]), horizon - int(tail[i]), f"e{i}") for i in range(n)]
    makespan = m.NewIntVar(0, horizon, "makespan")
    on_device: list[list[Any]] = [[] for _ in range(n_dev)]
    work_on: list[list[tuple[Any, int]]] = [[] for _ in range(n_dev)]
    for i in range(n):
        g = int(model.group[i])
        devices = np.flatnonzero(allowed[g]).tolist()
        m.Add(end[i] == start[i] + sum(int(model.duration[i, d]) * x[g, d] for d in devices))
        for d in devices:
            on_device[d].append(m.NewOptionalIntervalVar(start[i], int(model.duration[i, d]), end[i], x[g, d],
                                                         f"i{i}_{d}"))
            work_on[d].append((x[g, d], int(model.work[i, d])))
    for d in range(n_dev):
        if not on_device[d]:
            continue
        demands = [int(model.demand[i, d]) for i in range(n) if allowed[model.group[i], d]]
        if model.lanes[d] == 1:
            m.AddNoOverlap(on_device[d])
        elif sum(demands) > model.lanes[d]:
            m.AddCumulative(on_device[d], demands, int(model.lanes[d]))
        # the device's work within its throughput over the step (one tick of slack for the rounding of the end)
        m.Add(sum(w * SHARE_SCALE * lit for lit, w in work_on[d] if w)
              <= int(model.throughput[d]) * (makespan + 1))
        m.Add(sum(int(model.persistent[g]) * x[g, d] for g in range(n_groups) if (g, d) in x and model.persistent[g])
              <= int(model.capacity[d]))
    _window_cuts(m, model, allowed, x, makespan, head, tail)
    _precedences(m, model, allowed, x, start, end)
    has_successor = np.zeros(n, bool)
    has_successor[model.edges[:, 0]] = True
    for i in np.flatnonzero(~has_successor).tolist():
        m.Add(makespan >= end[i])
    m.Minimize(makespan)

    if hint is not None:
        for (g, d), lit in x.items():
            m.AddHint(lit, int(hint[g]) == d)
        if hint_starts is not None:
            ticks = np.floor(np.asarray(hint_starts) / model.tick_s).astype(np.int64)
            for i in range(n):
                m.AddHint(start[i], int(ticks[i]))
                m.AddHint(end[i], int(ticks[i] + model.duration[i, int(hint[model.group[i]])]))
            m.AddHint(makespan, int(max(ticks + model.duration[np.arange(n), hint[model.group]])))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.log_search_progress = bool(log)
    if n > LARGE_MODEL_OPS:  # presolve alone can take the whole limit there: search from the hint at once
        solver.parameters.cp_model_presolve = False
    found: list[np.ndarray] = []

    class Collector(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            found.append(_placement(self.Value, x, n_groups))

    began = time.perf_counter()
    status = solver.Solve(m, Collector())
    solver_s = time.perf_counter() - began
    name = solver.StatusName(status)
    if name in ("OPTIMAL", "FEASIBLE"):
        placement = _placement(solver.Value, x, n_groups)
        value = solver.ObjectiveValue() * model.tick_s
        bound = solver.BestObjectiveBound() * model.tick_s
    else:
        placement, value = None, float("nan")
        bound = float("inf") if name == "INFEASIBLE" else max(0.0, solver.BestObjectiveBound()) * model.tick_s
    return ExactResult(placement=placement, makespan_s=float(value), bound_s=float(bound), status=name,
                       solver_s=solver_s, solutions=tuple(found))


def _window_cuts(m: Any, model: RelaxedModel, allowed: np.ndarray, x: dict, makespan: Any, head: np.ndarray,
                 tail: np.ndarray) -> None:
    """Claim 2 of docs/optimality.md as linear constraints on the assignment, which the solver's linear relaxation
    sees (the intervals' no-overlap it does not): for each device and window (head threshold h, tail threshold q,
    WINDOW_THRESHOLDS of each), the ops placed there with head >= h and tail >= q run inside [h, makespan - q], at
    most ``lanes`` of demand at once. Every schedule of the model obeys them."""
    if model.n_ops == 0:
        return
    quantiles = np.linspace(0, 1, WINDOW_THRESHOLDS)
    for h in np.unique(np.quantile(head, quantiles, method="lower")).tolist():
        for q in np.unique(np.quantile(tail, quantiles, method="lower")).tolist():
            inside = (head >= h) & (tail >= q)
            if not inside.any():
                continue
            for d in range(model.n_devices):
                load = np.bincount(model.group[inside], weights=model.duration[inside, d] * model.demand[inside, d],
                                   minlength=model.n_groups)
                terms = [(int(load[g]), x[g, d]) for g in np.flatnonzero(load).tolist() if allowed[g, d]]
                if terms:
                    lanes = int(model.lanes[d])
                    m.Add(lanes * makespan >= lanes * int(h + q) + sum(w * lit for w, lit in terms))


def _placement(value: Any, x: dict, n_groups: int) -> np.ndarray:
    placement = np.zeros(n_groups, np.int64)
    for (g, d), lit in x.items():
        if value(lit):
            placement[g] = d
    return placement


def _precedences(m: Any, model: RelaxedModel, allowed: np.ndarray, x: dict, start: list, end: list) -> None:
    """Each consumer after its producer; a cross-group edge also after its lag for the pair of devices its groups
    take (per pair while the count stays under PAIRWISE_LAGS_MAX, else the least lag when the groups differ)."""
    for u, v in {(int(u), int(v)) for u, v in model.edges}:
        m.Add(start[v] >= end[u])
    if model.cross.size == 0:
        return
    src, dst = model.edges[model.cross, 0], model.edges[model.cross, 1]
    g_src, g_dst = model.group[src], model.group[dst]
    pairs = int(sum(allowed[a].sum() * allowed[b].sum() for a, b in zip(g_src.tolist(), g_dst.tolist())))
    if pairs <= PAIRWISE_LAGS_MAX:
        longest: dict[tuple[int, int, int, int], int] = {}
        for k in range(len(src)):
            u, v, gu, gv = int(src[k]), int(dst[k]), int(g_src[k]), int(g_dst[k])
            for a in np.flatnonzero(allowed[gu]).tolist():
                for b in np.flatnonzero(allowed[gv]).tolist():
                    lag = int(model.lag[k, a, b])
                    if a != b and lag > 0 and lag > longest.get((u, v, a, b), 0):
                        longest[u, v, a, b] = lag
        for (u, v, a, b), lag in longest.items():
            m.Add(start[v] >= end[u] + lag).OnlyEnforceIf([x[int(model.group[u]), a], x[int(model.group[v]), b]])
        return
    separated: dict[tuple[int, int], Any] = {}
    least = model.lag + np.where(np.eye(model.n_devices, dtype=bool), np.iinfo(np.int64).max // 4, 0)[None]
    for k in range(len(src)):
        u, v, gu, gv = int(src[k]), int(dst[k]), int(g_src[k]), int(g_dst[k])
        lag = int(least[k].min())
        if lag <= 0:
            continue
        key = (min(gu, gv), max(gu, gv))
        if key not in separated:
            sep = separated[key] = m.NewBoolVar(f"sep{key[0]}_{key[1]}")
            for d in range(model.n_devices):  # on different devices -> separated
                if allowed[gu, d] and allowed[gv, d]:
                    m.Add(x[gu, d] - x[gv, d] <= sep)
                elif allowed[gu, d]:
                    m.Add(x[gu, d] <= sep)
                elif allowed[gv, d]:
                    m.Add(x[gv, d] <= sep)
        m.Add(start[v] >= end[u] + lag).OnlyEnforceIf(separated[key])
