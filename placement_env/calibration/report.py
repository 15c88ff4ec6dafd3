"""A calibration's result: fit on given measurements, scored before, after and held out.

:func:`fit_and_report` is the fitting half of :func:`placement_env.calibration.calibrate` and needs
no TensorFlow workers: it takes measured step times, fits the simulator
(:func:`~placement_env.calibration.fit.fit_simulator`), scores it in sample and by K-fold
cross-validation, and writes the calibrated cluster. :class:`Calibration` holds all of it, with a
printable summary and a JSON-ready dict.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..costs import OpCosts
from ..opgraph import OpGraph
from .calibrated import calibrated_cluster, speed_scale
from .datasets import raw_op_seconds, start_overhead
from .fit import FitResult, fit_simulator, fitted_costs, predicted_runtimes, simulated_runtimes
from .scores import fidelity, kfold_predictions

__all__ = ["Calibration", "fit_and_report"]

def _floats(a: np.ndarray) -> list[float | None]:
    """JSON-ready floats (None for nan and inf)."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float)]


def _fidelity_row(name: str, f: dict[str, float]) -> str:
    return f"  {name:<22} spearman {f['spearman']:6.3f}   MAPE {100 * f['mape']:7.1f} %   (n={f['n']})"


@dataclass(frozen=True, eq=False)
class Calibration:
    """Result of :func:`calibrate`: the calibrated cluster, the data and the fidelity before and after."""

    graph_name: str
    cluster: Cluster  # calibrated: fitted device speeds (for analytical costs) and links
    original: Cluster
    costs: OpCosts  # op costs after calibration (scale applied), for the calibrated cluster
    base_costs: OpCosts  # op costs before calibration
    fit: FitResult
    placements: np.ndarray  # [n, n_groups] measured successfully
    measured_s: np.ndarray  # [n]
    simulated_before_s: np.ndarray  # [n]: original cluster, base costs
    simulated_after_s: np.ndarray  # [n]: calibrated, in-sample
    heldout_s: np.ndarray  # [n]: each placement predicted by a fit without its fold (nan if not done)
    failures: dict[str, int] = field(default_factory=dict)  # failure kind -> count, excluded from the fit
    n_attempted: int = 0
    folds: int = 0
    protocol: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def before(self) -> dict[str, float]:
        return fidelity(self.simulated_before_s, self.measured_s)

    @property
    def after(self) -> dict[str, float]:
        return fidelity(self.simulated_after_s, self.measured_s)

    @property
    def heldout(self) -> dict[str, float]:
        return fidelity(self.heldout_s, self.measured_s)

    def summary(self) -> str:
        """A few lines for people: data, fitted parameters, fidelity before, after and held out."""
        fit = self.fit
        off = ~np.eye(self.cluster.n_devices, dtype=bool)
        lines = [
            f"calibration of {self.original.name} on {self.graph_name}: {len(self.measured_s)} of "
            f"{self.n_attempted} placements measured"
            + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(self.failures.items()))} failed, excluded)"
               if self.failures else "") + f", {self.wall_s:.1f} s",
            f"  measured step times     {1e3 * np.min(self.measured_s):.2f} .. {1e3 * np.max(self.measured_s):.2f} ms"
            f" (median {1e3 * np.median(self.measured_s):.2f} ms)" if len(self.measured_s) else "  no measurements",
            f"  op costs                {self.base_costs.source} x scale {np.array2string(fit.scale, precision=3)}"
            f" + {np.array2string(fit.overhead * 1e6, precision=2)} us per op",
            f"  link                    {fit.bandwidth / 1e6:.1f} MB/s, {fit.latency * 1e6:.1f} us"
            f" (was {np.median(self.original.bandwidth[off]) / 1e6:.1f} MB/s, "
            f"{np.median(self.original.latency[off]) * 1e6:.1f} us)" if off.any() else "",
            f"  host transfer           {fit.host_transfer.per_tensor_s * 1e6:.1f} us + bytes at "
            f"{fit.host_transfer.bandwidth / 1e9:.3g} GB/s of CPU at each end, "
            f"{fit.host_transfer.remote_step_s * 1e6:.1f} us per step off device 0"
            if fit.host_transfer is not None else "",
            _fidelity_row("before calibration", self.before),
            _fidelity_row("after (in-sample)", self.after),
        ]
        if self.folds:
            lines.append(_fidelity_row(f"after ({self.folds}-fold held-out)", self.heldout))
        return "\n".join(line for line in lines if line)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: calibrated cluster, fitted parameters, data and fidelity."""
        return {
            "graph": self.graph_name,
            "cluster": self.cluster.to_dict(),
            "original_cluster": self.original.to_dict(),
            "fit": {"scale": _floats(self.fit.scale), "overhead_s": _floats(self.fit.overhead),
                    "bandwidth": self.fit.bandwidth, "latency": self.fit.latency,
                    "host_transfer": None if self.fit.host_transfer is None else self.fit.host_transfer.to_dict(),
                    "loss": self.fit.loss, "evaluations": self.fit.evaluations},
            "costs_source": self.base_costs.source,
            "costs_n_unreported": self.base_costs.n_unreported,
            "placements": np.asarray(self.placements).tolist(),
            "measured_s": _floats(self.measured_s),
            "simulated_before_s": _floats(self.simulated_before_s),
            "simulated_after_s": _floats(self.simulated_after_s),
            "heldout_s": _floats(self.heldout_s),
            "fidelity": {"before": self.before, "after": self.after,
                         **({"heldout": self.heldout} if self.folds else {})},
            "failures": dict(self.failures),
            "n_attempted": self.n_attempted,
            "folds": self.folds,
            "protocol": dict(self.protocol),
            "wall_s": self.wall_s,
        }


def fit_and_report(graph: OpGraph, cluster: Cluster, base: OpCosts, placements: np.ndarray, measured: np.ndarray,
                   *, folds: int = 5, seed: int = 0, failures: dict[str, int] | None = None, n_attempted: int | None = None,
                   protocol: dict[str, Any] | None = None, wall_s: float = 0.0, fit_scale: bool = True,
                   fit_overhead: bool = True, fit_links: bool = True) -> Calibration:
    """The fitting half of :func:`calibrate`, on given measurements (no TF needed).

    Analytical ``base`` costs include the cluster's ``op_overhead_s``; it is taken out before
    fitting (the overhead is a parameter of its own) and the fitted one put in. ``folds``: K for the
    held-out predictions (shuffled with ``seed``; 0: none).
    """
    placements = np.asarray(placements, dtype=np.int64)
    measured = np.asarray(measured, dtype=np.float64)
    raw, overhead0 = raw_op_seconds(cluster, base), start_overhead(cluster)
    before = simulated_runtimes(graph, cluster, np.asarray(base.seconds), placements)
    fit_on = functools.partial(fit_simulator, graph, cluster, raw, fit_scale=fit_scale, fit_overhead=fit_overhead,
                               fit_links=fit_links, overhead0=overhead0)
    fit = fit_on(placements, measured)
    after = predicted_runtimes(graph, cluster, raw, fit, placements)

    def predict_heldout(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        return predicted_runtimes(graph, cluster, raw, fit_on(placements[train], measured[train]), placements[test])

    heldout, folds = kfold_predictions(len(measured), folds, seed, predict_heldout)
    calibrated = calibrated_cluster(cluster, speed_scale(graph, cluster, base, raw, fit), fit.bandwidth, fit.latency,
                                    fit.overhead, fit.host_transfer)
    return Calibration(
        graph_name=graph.name, cluster=calibrated, original=cluster,
        costs=OpCosts(fitted_costs(raw, fit), source=f"{base.source}, calibrated x{np.array2string(fit.scale, precision=3)}",
                      n_unreported=base.n_unreported),
        base_costs=base, fit=fit, placements=placements, measured_s=measured, simulated_before_s=before,
        simulated_after_s=after, heldout_s=heldout, failures=dict(failures or {}),
        n_attempted=len(measured) if n_attempted is None else n_attempted, folds=folds, protocol=dict(protocol or {}),
        wall_s=wall_s)
