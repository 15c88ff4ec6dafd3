"""From one graph's measured placements to what a fit matches, and how well a fit predicts them.

:func:`raw_op_seconds` strips the per-op overhead from op costs (it is a parameter of its own in
the fit), :func:`measured_dataset` makes a fit :class:`~.fit.Dataset` of the placements measured
successfully, and :func:`score_graph` predicts a dataset's step times before calibration and with a
fit (:class:`GraphScore`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..costs import OpCosts
from ..opgraph import OpGraph
from .fit import Dataset, FitResult, predicted_runtimes, simulated_runtimes
from .scores import fidelity

__all__ = ["DEFAULT_OVERHEAD_S", "GraphScore", "measured_dataset", "raw_op_seconds", "score_graph", "start_overhead"]

DEFAULT_OVERHEAD_S = 2e-6  # per-op overhead to start the fit from when the cluster has none


def raw_op_seconds(cluster: Cluster, costs: OpCosts) -> np.ndarray:
    """Op costs at scale 1 without per-op overhead: grappler's analytical costs include the
    cluster's ``op_overhead_s``, which is taken out; other costs (measured kernel times) have none."""
    overhead = cluster.op_overhead_s[None, :] if costs.analytical else 0.0
    return np.maximum(np.asarray(costs.seconds) - overhead, 0.0)


def start_overhead(cluster: Cluster) -> float:
    """The per-op overhead a fit starts from: the cluster's (median over devices) if positive."""
    overhead = cluster.op_overhead_s
    return float(np.median(overhead)) if overhead.size and np.median(overhead) > 0 else DEFAULT_OVERHEAD_S


def measured_dataset(graph: OpGraph, cluster: Cluster, costs: OpCosts, placements: np.ndarray,
                     measured_s: np.ndarray) -> Dataset:
    """The placements of ``graph`` measured successfully (finite, positive step time; failed ones are
    nan) with their step times, and ``costs`` without per-op overhead (:func:`raw_op_seconds`)."""
    placements = np.asarray(placements, dtype=np.int64)
    measured_s = np.asarray(measured_s, dtype=np.float64)
    ok = np.isfinite(measured_s) & (measured_s > 0)
    return Dataset(graph, raw_op_seconds(cluster, costs), placements[ok], measured_s[ok])


@dataclass(frozen=True, eq=False)
class GraphScore:
    """One graph's measured step times and the simulator's predictions of them."""

    name: str
    measured_s: np.ndarray
    before_s: np.ndarray  # the uncalibrated cluster
    after_s: np.ndarray  # the fit
    heldout_s: np.ndarray  # each placement by a fit that did not see it (nan where not predicted)

    @property
    def before(self) -> dict[str, float]:
        return fidelity(self.before_s, self.measured_s)

    @property
    def after(self) -> dict[str, float]:
        return fidelity(self.after_s, self.measured_s)

    @property
    def heldout(self) -> dict[str, float]:
        return fidelity(self.heldout_s, self.measured_s)


def score_graph(data: Dataset, cluster: Cluster, fit: FitResult, heldout_s: np.ndarray | None = None) -> GraphScore:
    """``data``'s step times simulated on ``cluster`` with its op costs plus the cluster's per-op
    overhead (before) and with ``fit`` (after); ``heldout_s``: predictions made elsewhere, if any."""
    before = simulated_runtimes(data.graph, cluster, data.base_seconds + cluster.op_overhead_s[None, :], data.placements)
    after = predicted_runtimes(data.graph, cluster, data.base_seconds, fit, data.placements)
    heldout = np.full(len(data.measured), np.nan) if heldout_s is None else np.asarray(heldout_s, dtype=np.float64)
    return GraphScore(data.graph.name, data.measured, before, after, heldout)
