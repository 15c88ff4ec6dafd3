"""Calibration of the simulator against measured step times, and measured per-op costs.

``measured_costs(graph, cluster)`` (:mod:`.profiles`) profiles a training step on the real local
workers (``RunOptions(trace_level=FULL_TRACE)``, median over traced steps) and returns an
:class:`~placement_env.costs.OpCosts` like ``analytical_costs``.

``calibrate(graph, cluster)`` measures random placements with :class:`MeasuredRuntime`
(:mod:`.samples`), then fits the simulator's free parameters so simulated step times match
measured ones (:mod:`.fit`):

* one op-cost ``scale`` and one per-op ``overhead`` per device type (devices with equal kind / peak
  FLOP/s / memory bandwidth / concurrency share them; all workers of a ``local:N`` cluster are one
  type): op seconds are ``scale * base costs + overhead`` (base: analytical without the cluster's
  ``op_overhead_s`` by default);
* one link ``latency`` and ``bandwidth`` for every link between distinct devices; on a cluster
  with a ``host_transfer`` (``local:N``) the link ``latency`` and the host transfer's
  ``per_tensor_s`` and ``bandwidth`` instead (:mod:`.fit`; :mod:`.link_rows` reads the bandwidth
  from a link microbenchmark, to keep it out of the fit).

The fit minimises the mean squared log-ratio ``log(simulated / measured)`` over the measured
placements (Nelder-Mead on log parameters, restarted from the best points of a coarse grid). The
calibrated :class:`Cluster` carries the result (:mod:`.calibrated`: device peak FLOP/s and memory
bandwidth divided by the scale relative to the analytical costs, ``op_overhead_s`` = the fitted
overhead, the fitted link on every pair), so it can be saved as JSON and reused with
``analytical_costs``. Fidelity (:mod:`.scores`: Spearman rank correlation and MAPE of simulated vs
measured) is reported before and after calibration, in sample and by K-fold cross-validation (each
fold's placements predicted by a fit on the other folds); :mod:`.report` holds the result.

``calibrate_graphs(graphs, cluster)`` does the same for several graphs on one set of workers with
one fit to all of them (:mod:`.pooled`), optionally with the host transfer's bandwidth given (from
link microbenchmark files, :func:`.link_rows.host_bandwidth_from_files`) instead of fitted;
:mod:`.datasets` turns measurements into what a fit matches.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np

from ..cluster import Cluster
from ..costs import OpCosts, analytical_costs
from ..opgraph import OpGraph
from ..placement import random_placements
from ..runtime.measured import MeasuredRuntime
from .calibrated import calibrated_cluster
from .datasets import GraphScore, measured_dataset, score_graph
from .fit import Dataset, FitResult, fit_datasets, fit_simulator, simulated_runtimes, with_link
from .link_rows import host_bandwidth_from_files
from .pooled import PooledCalibration, check_host_bandwidth, fit_pooled
from .profiles import measured_costs
from .report import Calibration, fit_and_report
from .samples import measure_placements
from .scores import fidelity

__all__ = ["Calibration", "Dataset", "FitResult", "GraphScore", "PooledCalibration", "calibrate", "calibrate_graphs",
           "calibrated_cluster", "fidelity", "fit_and_report", "fit_datasets", "fit_pooled", "fit_simulator",
           "host_bandwidth_from_files", "measured_costs", "measured_dataset", "score_graph", "simulated_runtimes",
           "with_link"]


def _check_n_placements(n_placements: Any) -> None:
    if isinstance(n_placements, bool) or not isinstance(n_placements, int) or n_placements < 4:
        raise ValueError(f"n_placements = {n_placements!r}; expected an integer >= 4 (the fit has 4 or more "
                         "free parameters and needs at least as many measurements)")


def _base_costs(graph: OpGraph, cluster: Cluster, costs: str | OpCosts, runtime: Any) -> OpCosts:
    """The op costs to calibrate: given, grappler's analytical ones, or measured with ``runtime``."""
    if isinstance(costs, OpCosts):
        base = costs
    elif costs == "analytical":
        base = analytical_costs(graph, cluster)
    elif costs == "measured":
        base = measured_costs(graph, cluster, runtime=runtime)
    else:
        raise ValueError(f"costs = {costs!r}: 'analytical', 'measured' or an OpCosts")
    if base.seconds.shape != (graph.n_ops, cluster.n_devices):
        raise ValueError(f"costs have shape {base.seconds.shape}, expected ({graph.n_ops}, {cluster.n_devices})")
    return base


def calibrate(graph: OpGraph, cluster: Cluster, *, n_placements: int = 30, seed: int = 0, runtime: Any = None,
              progress: bool = True, costs: str | OpCosts = "analytical", spread: str = "dirichlet",
              folds: int = 5, steps: int = 6, warmup: int = 2, timeout_s: float = 120.0,
              placements: np.ndarray | None = None,
              callback: Callable[[int, Any], None] | None = None) -> Calibration:
    """Measure ``n_placements`` random placements on the real workers and fit the simulator to them.

    ``costs``: "analytical" (grappler, default: the calibrated cluster then reproduces the fitted
    op costs with ``analytical_costs``), "measured" (:func:`measured_costs`, one profiling run) or an
    OpCosts. ``spread``: see :func:`random_placements`. ``runtime``: a MeasuredRuntime to use
    (default: one with ``steps``/``warmup``/``timeout_s``, closed at the end). Failed measurements
    are excluded from the fit and counted in ``failures``. ``folds``: K for the held-out fidelity
    (0: none). ``callback(k, measurement)``: called after every measurement of placement ``k``.
    """
    begin = time.perf_counter()
    if placements is None:
        _check_n_placements(n_placements)
        placements = random_placements(graph, cluster, n_placements, seed, spread=spread)
    placements = np.asarray(placements, dtype=np.int64)
    own = runtime is None
    rt = MeasuredRuntime(cluster, steps=steps, warmup=warmup, timeout_s=timeout_s) if own else runtime
    try:
        base = _base_costs(graph, cluster, costs, rt)
        samples = measure_placements(graph, placements, rt, desc=f"calibrating {cluster.name} on {graph.name}",
                                     progress=progress, callback=callback)
        protocol = {"steps": getattr(rt, "steps", steps), "warmup": getattr(rt, "warmup", warmup),
                    "spread": spread, "seed": seed}
    finally:
        if own:
            rt.close()
    good = samples.ok
    if good.sum() < 2:
        raise RuntimeError(f"only {int(good.sum())} of {len(placements)} placements could be measured "
                           f"(failures: {samples.failures}); cannot calibrate")
    result = fit_and_report(graph, cluster, base, placements[good], samples.measured_s[good], folds=folds, seed=seed,
                            failures=samples.failures, n_attempted=len(placements), protocol=protocol)
    return dataclasses.replace(result, wall_s=time.perf_counter() - begin)


def calibrate_graphs(graphs: list[OpGraph], cluster: Cluster, *, n_placements: int = 30, seed: int = 0,
                     host_bandwidth: float | None = None, runtime: Any = None, progress: bool = True,
                     folds: int = 5, steps: int = 6, warmup: int = 2, timeout_s: float = 120.0) -> PooledCalibration:
    """Measure ``n_placements`` random placements (Dirichlet spread) of every graph on one set of
    workers and fit the simulator to all of them at once (:func:`fit_pooled`, op costs: grappler's).

    ``host_bandwidth``: the host transfer's bandwidth (e.g. :func:`host_bandwidth_from_files`),
    kept instead of fitted. ``runtime``, ``steps``, ``warmup``, ``timeout_s``, ``folds``: as in
    :func:`calibrate`. The arguments are checked before anything is measured.
    """
    begin = time.perf_counter()
    _check_n_placements(n_placements)
    names = [g.name for g in graphs]
    if not graphs or len(set(names)) < len(names):
        raise ValueError(f"graphs {names}: expected one or more graphs, each once")
    check_host_bandwidth(cluster, host_bandwidth)
    own = runtime is None
    rt = MeasuredRuntime(cluster, steps=steps, warmup=warmup, timeout_s=timeout_s) if own else runtime
    datasets, failures, attempted = [], {}, 0
    try:
        for graph in graphs:
            placements = random_placements(graph, cluster, n_placements, seed, spread="dirichlet")
            samples = measure_placements(graph, placements, rt, desc=f"calibrating {cluster.name} on {graph.name}",
                                         progress=progress)
            failures[graph.name], attempted = samples.failures, attempted + len(placements)
            if samples.ok.sum() < 2:
                raise RuntimeError(f"only {int(samples.ok.sum())} of {len(placements)} placements of {graph.name} "
                                   f"could be measured (failures: {samples.failures}); cannot calibrate")
            datasets.append(measured_dataset(graph, cluster, analytical_costs(graph, cluster), placements,
                                             samples.measured_s))
    finally:
        if own:
            rt.close()
    result = fit_pooled(datasets, cluster, folds=folds, seed=seed, host_bandwidth=host_bandwidth, failures=failures,
                        n_attempted=attempted)
    return dataclasses.replace(result, wall_s=time.perf_counter() - begin)
