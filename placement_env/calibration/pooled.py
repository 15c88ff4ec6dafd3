"""One calibration from several graphs' measurements: a single fit to all of them, scored per graph.

:func:`fit_pooled` fits one set of simulator parameters to every graph's measured placements at
once (:func:`~.fit.fit_datasets`; graphs whose steps are mostly per-op overhead and graphs with real
compute or transfers pin down different parameters), optionally with the host transfer's bandwidth
given (a link microbenchmark's, :mod:`.link_rows`) instead of fitted, and scores every graph before
calibration, in sample and by K-fold cross-validation: each placement is predicted by a fit on the
other folds of every graph. :class:`PooledCalibration` holds the result and the calibrated cluster.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster
from .calibrated import calibrated_cluster
from .datasets import GraphScore, score_graph, start_overhead
from .fit import Dataset, FitResult, fit_datasets, predicted_runtimes
from .scores import kfold_predictions

__all__ = ["PooledCalibration", "check_host_bandwidth", "fit_pooled"]


def check_host_bandwidth(cluster: Cluster, host_bandwidth: float | None) -> None:
    """A ValueError unless ``host_bandwidth`` is None or bytes/s > 0 for a cluster with a host transfer."""
    if host_bandwidth is None:
        return
    if cluster.host_transfer is None:
        raise ValueError(f"host_bandwidth = {host_bandwidth!r}, but cluster {cluster.name!r} has no host transfer "
                         "to give it to (local:N clusters have one)")
    if not (np.isfinite(host_bandwidth) and host_bandwidth > 0):
        raise ValueError(f"host_bandwidth = {host_bandwidth!r}: expected bytes/s > 0")


def _score(value: float, percent: bool = False) -> str:
    return "   n/a" if not np.isfinite(value) else f"{100 * value:5.1f}%" if percent else f"{value:6.3f}"


@dataclass(frozen=True, eq=False)
class PooledCalibration:
    """Result of :func:`fit_pooled`: the calibrated cluster, the fit and every graph's fidelity."""

    cluster: Cluster  # calibrated: fitted device speeds (for analytical costs), link and host transfer
    original: Cluster
    fit: FitResult
    graphs: tuple[GraphScore, ...]
    folds: int = 0
    host_bandwidth: float | None = None  # the host transfer's bandwidth when given, not fitted
    failures: dict[str, dict[str, int]] = field(default_factory=dict)  # graph -> failure kind -> count
    n_attempted: int = 0
    wall_s: float = 0.0

    def summary(self) -> str:
        """A few lines for people: the data, the fitted parameters and every graph's fidelity."""
        fit = self.fit
        n = sum(len(g.measured_s) for g in self.graphs)
        failed = "; ".join(f"{graph}: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                           for graph, kinds in sorted(self.failures.items()) if kinds)
        lines = [f"calibration of {self.original.name} on {', '.join(g.name for g in self.graphs)} (one fit): "
                 f"{n} of {self.n_attempted or n} placements measured"
                 + (f" (failed, excluded: {failed})" if failed else "") + f", {self.wall_s:.1f} s",
                 f"  op costs        analytical x scale {np.array2string(fit.scale, precision=3)}"
                 f" + {np.array2string(fit.overhead * 1e6, precision=2)} us per op"]
        if fit.host_transfer is None:
            lines.append(f"  link            {fit.bandwidth / 1e6:.1f} MB/s, {fit.latency * 1e6:.1f} us")
        else:
            given = " (from the link runs)" if self.host_bandwidth is not None else ""
            lines += [f"  link            {fit.latency * 1e6:.1f} us per transfer",
                      f"  host transfer   {fit.host_transfer.per_tensor_s * 1e6:.1f} us + bytes at "
                      f"{fit.host_transfer.bandwidth / 1e9:.3g} GB/s{given} of CPU at each end",
                      f"  remote step     {fit.host_transfer.remote_step_s * 1e6:.1f} us per step with ops off "
                      "device 0"]
        heldout = f"   after ({self.folds}-fold held-out)" if self.folds else ""
        lines.append(f"  {'graph':<22} {'n':>3}   before: Spearman / MAPE   after (in-sample){heldout}")
        for g in self.graphs:
            columns = [g.before, g.after] + ([g.heldout] if self.folds else [])
            lines.append(f"  {g.name:<22} {len(g.measured_s):>3}   " + "   ".join(
                f"{_score(f['spearman'])} / {_score(f['mape'], percent=True)}" for f in columns))
        return "\n".join(lines)


def _heldout_predictions(datasets: list[Dataset], cluster: Cluster, folds: int, seed: int,
                         fit_on: Callable[[list[Dataset]], FitResult]) -> tuple[list[np.ndarray], int]:
    """Every placement of every dataset predicted by ``fit_on`` (a list of Datasets -> FitResult) on
    the other folds; the folds split all placements together (shuffled with ``seed``)."""
    offsets = np.cumsum([0] + [len(d.measured) for d in datasets])

    def parts(index: np.ndarray) -> list[tuple[Dataset, np.ndarray, np.ndarray]]:
        """(dataset, its local indexes, their positions in ``index``) of every dataset ``index`` touches."""
        out = []
        for data, start, end in zip(datasets, offsets[:-1], offsets[1:]):
            where = np.flatnonzero((index >= start) & (index < end))
            if where.size:
                out.append((data, index[where] - start, where))
        return out

    def predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        fold_fit = fit_on([Dataset(d.graph, d.base_seconds, d.placements[i], d.measured[i]) for d, i, _ in parts(train)])
        predicted = np.full(len(test), np.nan)
        for data, local, where in parts(test):
            predicted[where] = predicted_runtimes(data.graph, cluster, data.base_seconds, fold_fit,
                                                  data.placements[local])
        return predicted

    heldout, folds = kfold_predictions(int(offsets[-1]), folds, seed, predict)
    return [heldout[start:end] for start, end in zip(offsets[:-1], offsets[1:])], folds


def fit_pooled(datasets: Sequence[Dataset], cluster: Cluster, *, folds: int = 5, seed: int = 0,
               host_bandwidth: float | None = None, failures: dict[str, dict[str, int]] | None = None,
               n_attempted: int | None = None, wall_s: float = 0.0) -> PooledCalibration:
    """One fit to every dataset's placements (each graph once, by name), scored per graph.

    The datasets' ``base_seconds`` are grappler's analytical op costs on ``cluster`` without per-op
    overhead (:func:`~.datasets.measured_dataset` of ``analytical_costs``): the calibrated cluster
    reproduces the fitted costs through ``analytical_costs``. ``host_bandwidth``: the host
    transfer's bandwidth, kept (``cluster`` must have a host transfer). ``folds``: K for the
    held-out predictions (0: none).
    """
    datasets = list(datasets)
    if not datasets:
        raise ValueError("fit_pooled needs at least one Dataset")
    names = [d.graph.name for d in datasets]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"graphs {repeated} given more than once: each graph's placements enter the fit once")
    check_host_bandwidth(cluster, host_bandwidth)
    fit_on = functools.partial(fit_datasets, cluster=cluster, overhead0=start_overhead(cluster),
                               host_bandwidth=host_bandwidth)
    fit = fit_on(datasets)
    heldout, folds = _heldout_predictions(datasets, cluster, folds, seed, fit_on)
    calibrated = calibrated_cluster(cluster, fit.scale, fit.bandwidth, fit.latency, fit.overhead, fit.host_transfer)
    return PooledCalibration(
        cluster=calibrated, original=cluster, fit=fit,
        graphs=tuple(score_graph(d, cluster, fit, h) for d, h in zip(datasets, heldout)), folds=folds,
        host_bandwidth=host_bandwidth, failures=dict(failures or {}),
        n_attempted=sum(len(d.measured) for d in datasets) if n_attempted is None else n_attempted, wall_s=wall_s)
