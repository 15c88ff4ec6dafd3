"""Exact placement and the relaxation's lower bound of one graph on one cluster: ``pe.solve_exact`` and
``pe.lower_bound(..., method="cp_sat")``.

Both solve a model of placement and schedule with CP-SAT (:mod:`.cp_sat`) from a start placement whose schedule in
that model sets the horizon and is the solver's first solution: the relaxed model of ops (:mod:`.relaxation`), whose
proven bound no successful simulated placement beats, or, for ``solve_exact(..., model="blocks")``, the block model
(:mod:`.blocks`), small enough to prove optimal on small graphs but neither a bound nor the simulator. Neither runs
the simulator: the solver's placements are the caller's to evaluate (the ``cp_sat`` method does, within its budget).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from ..cluster import Cluster
from ..cluster.checks import bad_argument, check_number
from ..costs import OpCosts
from ..opgraph import OpGraph
from ..placement import allowed_devices, check_placement, single_device
from .blocks import block_model, block_schedule, blocks
from .cp_sat import ExactResult
from .isolated import solve_isolated
from .relaxation import TICKS_PER_HORIZON, model_schedule, relax

__all__ = ["MODELS", "solve_exact", "relaxation_bound"]

Model = Literal["relaxed", "blocks"]
MODELS = ("relaxed", "blocks")  # solve_exact's models: the relaxation of the simulator's ops, the block model


def _seconds(graph: OpGraph, cluster: Cluster, costs: OpCosts | np.ndarray) -> np.ndarray:
    seconds = np.asarray(costs.seconds if isinstance(costs, OpCosts) else costs, np.float64)
    if seconds.shape != (graph.n_ops, cluster.n_devices) or not np.all(np.isfinite(seconds)) or (seconds < 0).any():
        raise bad_argument("costs", costs, f"OpCosts or finite seconds >= 0 of shape (n_ops, n_devices) = "
                                           f"({graph.n_ops}, {cluster.n_devices})")
    return seconds


def _fits(graph: OpGraph, cluster: Cluster, placement: np.ndarray) -> bool:
    """Whether the persistent bytes of ``placement`` fit every device (the model's memory rule)."""
    held = np.bincount(placement, weights=graph.group_persistent_bytes, minlength=cluster.n_devices)
    return bool(np.all(held <= cluster.memory_bytes))


def _start(graph: OpGraph, cluster: Cluster, start: Any, schedule: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """The start placement (``start``, else the single device whose model schedule is shortest and whose
    persistent bytes fit, else the shortest), its model schedule's starts and makespan (``schedule(placement)``)."""
    if start is not None:
        placement = np.asarray(check_placement(graph, cluster, start), np.int64)
        return (placement, *schedule(placement))
    best = None
    for d in range(cluster.n_devices):
        placement = single_device(graph, cluster, d)
        starts, makespan = schedule(placement)
        key = (not _fits(graph, cluster, placement), makespan)
        if best is None or key < best[0]:
            best = (key, placement, starts, makespan)
    assert best is not None
    return best[1], best[2], best[3]


def solve_exact(graph: OpGraph, cluster: Cluster, costs: OpCosts | np.ndarray, *, time_limit_s: float = 60.0,
                start: Any = None, workers: int = 1, model: Model = "relaxed", slices: int = 1,
                log: bool = False) -> ExactResult:
    """CP-SAT on a model of ``graph`` on ``cluster`` with ``costs`` (the simulator's op seconds) for at most
    ``time_limit_s`` seconds on ``workers`` threads, from ``start`` (a placement; default: the best single device).

    ``model="relaxed"``: the relaxed model of ops (:mod:`.relaxation`); the result's ``bound_s`` is a lower bound
    on every successful simulated placement's step time. ``model="blocks"``: the block model (:mod:`.blocks`), each
    group's ops at one level and in one of ``slices`` parts of the critical path run as one block; its ``bound_s``
    bounds that model only."""
    time_limit_s = check_number(time_limit_s, "time_limit_s", 0, low_open=True, error=bad_argument,
                                rule="solver seconds > 0")
    workers = check_number(workers, "workers", 1, integer=True, error=bad_argument, rule="solver threads >= 1")
    if not isinstance(model, str) or model not in MODELS:
        raise bad_argument("model", model, f"one of {', '.join(map(repr, MODELS))}")
    seconds = _seconds(graph, cluster, costs)
    if graph.n_ops == 0:
        return ExactResult(placement=np.zeros(graph.n_groups, np.int64), makespan_s=0.0, bound_s=0.0,
                           status="OPTIMAL", solver_s=0.0, model=model)
    if model == "blocks":
        found = blocks(graph, cluster, seconds, slices)
        placement, starts, makespan = _start(graph, cluster, start,
                                             lambda p: block_schedule(graph, cluster, found, p))
    else:
        placement, starts, makespan = _start(graph, cluster, start,
                                             lambda p: model_schedule(graph, cluster, seconds, p))
    if makespan <= 0:  # every op takes no time
        return ExactResult(placement=placement, makespan_s=0.0, bound_s=0.0, status="OPTIMAL", solver_s=0.0,
                           model=model)
    solved = block_model(graph, cluster, found, makespan) if model == "blocks" else relax(graph, cluster, seconds,
                                                                                          makespan)
    fits = _fits(graph, cluster, placement)
    horizon = TICKS_PER_HORIZON + 1 if fits else None  # a start that does not fit bounds nothing
    result = solve_isolated(solved, cluster, time_limit_s=time_limit_s, horizon_ticks=horizon, hint=placement,
                            hint_starts=starts if fits else None, workers=workers, log=log)
    return dataclasses.replace(result, model=model)


def relaxation_bound(graph: OpGraph, cluster: Cluster, costs: OpCosts | np.ndarray, *, time_limit_s: float = 60.0,
                     workers: int = 1) -> tuple[float, ExactResult]:
    """(the relaxation's proven bound in seconds, the solver's result): no successful simulated placement of
    ``graph`` on ``cluster`` with ``costs`` is faster than the bound (inf: none fits the persistent bytes)."""
    if not allowed_devices(graph, cluster).any(axis=1).all():
        return float("inf"), ExactResult(placement=None, makespan_s=float("nan"), bound_s=float("inf"),
                                         status="INFEASIBLE", solver_s=0.0)
    result = solve_exact(graph, cluster, costs, time_limit_s=time_limit_s, workers=workers)
    return result.bound_s, result
