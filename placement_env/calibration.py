"""Calibration of the simulator against measured step times, and measured per-op costs.

``measured_costs(graph, cluster)`` profiles a training step on the real local workers
(``RunOptions(trace_level=FULL_TRACE)``, median over traced steps) and returns an
:class:`~placement_env.costs.OpCosts` like ``analytical_costs``.

``calibrate(graph, cluster)`` measures random placements with :class:`MeasuredRuntime`, then fits
the simulator's free parameters so simulated step times match measured ones:

* one op-cost ``scale`` and one per-op ``overhead`` per device type (devices with equal kind / peak
  FLOP/s / memory bandwidth / concurrency share them; all workers of a ``local:N`` cluster are one
  type): op seconds are ``scale * base costs + overhead`` (base: analytical without the cluster's
  ``op_overhead_s`` by default);
* one link ``latency`` and ``bandwidth`` for every link between distinct devices.

The fit minimises the mean squared log-ratio ``log(simulated / measured)`` over the measured
placements (Nelder-Mead on log parameters, restarted from the best points of a coarse grid). The
calibrated :class:`Cluster` carries the result (device peak FLOP/s and memory bandwidth divided by
the scale relative to the analytical costs, ``op_overhead_s`` = the fitted overhead, the fitted
link on every pair), so it can be saved
as JSON and reused with ``analytical_costs``. Fidelity (Spearman rank correlation and MAPE of
simulated vs measured) is reported before and after calibration, in sample and by K-fold
cross-validation (each fold's placements predicted by a fit on the other folds).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .cluster import Cluster
from .costs import OpCosts, _type_key, analytical_costs
from .opgraph import OpGraph
from .placement import random_placements, single_device

__all__ = ["Calibration", "FitResult", "calibrate", "fit_simulator", "fidelity", "measured_costs",
           "calibrated_cluster", "simulated_runtimes"]


# ---------------------------------------------------------------------------------------------
# Measured per-op costs


def measured_costs(graph: OpGraph, cluster: Cluster, *, runtime: Any = None, steps: int = 5,
                   timeout_s: float | None = None) -> OpCosts:
    """Seconds of every op on every device of ``cluster``, measured from full traces of a real step.

    For every distinct device type of the cluster (see :func:`placement_env.costs._type_key`) the
    whole graph is placed on that type's first device (every group there; a group without a kernel
    for that kind goes to the first device that has one) and profiled with ``steps`` traced steps
    after the runtime's own timed steps; each op's cost is the median over the traced steps of its
    kernel time (``op_end_rel - op_start_rel`` from ``RunMetadata.step_stats``), copied to every
    device of the type. On a ``local:N`` cluster all workers are identical single-threaded
    processes on one host, so one run with everything on worker 0 fills every column; with
    everything on one worker no ``_Send``/``_Recv`` pairs run, so op times are not inflated by
    transfers and no op waits on the network.

    Ops absent from the trace (pruned from the step, constant-folded by grappler, initialisers)
    cost 0 s and are counted in ``n_unreported`` (the maximum over device types). Trace nodes
    that are not ops of the graph (``_SOURCE``, grappler's folded constants, ``_Send``/``_Recv``)
    are ignored.
    """
    from .runtime.measured import MeasuredRuntime

    own = runtime is None
    rt = MeasuredRuntime(cluster, steps=4, warmup=2) if own else runtime
    try:
        columns: dict[tuple, np.ndarray] = {}
        unreported = 0
        for d, device in enumerate(cluster.devices):
            key = _type_key(device)
            if key in columns:
                continue
            placement = single_device(graph, cluster, d)
            m = rt.profile(graph, placement, trace_steps=steps, timeout_s=timeout_s)
            if not m.ok:
                raise RuntimeError(f"profiling {graph.name!r} on {device.name} failed ({m.failure}): {m.message}")
            columns[key] = np.asarray(m.extra["op_seconds"], dtype=np.float64)
            unreported = max(unreported, int(graph.n_ops - np.count_nonzero(m.extra["op_traced"])))
    finally:
        if own:
            rt.close()
    seconds = np.stack([columns[_type_key(d)] for d in cluster.devices], axis=1)
    return OpCosts(seconds=seconds, source=f"measured on {cluster.name}", n_unreported=unreported)


# ---------------------------------------------------------------------------------------------
# The simulator's parameters


def device_types(cluster: Cluster) -> np.ndarray:
    """Type index per device (devices equal in kind, peak, bandwidth and concurrency share one)."""
    keys: dict[tuple, int] = {}
    return np.array([keys.setdefault(_type_key(d), len(keys)) for d in cluster.devices], dtype=np.int64)


def with_link(cluster: Cluster, bandwidth: float, latency: float) -> Cluster:
    """``cluster`` with every link between distinct devices set to (bandwidth, latency)."""
    n = cluster.n_devices
    off = ~np.eye(n, dtype=bool)
    bw = np.where(off, float(bandwidth), np.inf)
    lat = np.where(off, float(latency), 0.0)
    return dataclasses.replace(cluster, bandwidth=bw, latency=lat)


def calibrated_cluster(cluster: Cluster, speed_scale: np.ndarray, bandwidth: float, latency: float,
                       op_overhead_s: np.ndarray | None = None) -> Cluster:
    """``cluster`` with device ``d`` ``speed_scale[d]`` times slower (peak FLOP/s and memory bandwidth
    divided by it, which multiplies grappler's analytical op costs by it), ``op_overhead_s[d]`` per op
    (if given) and every link set to (bandwidth, latency)."""
    devices = []
    for d, (dev, s) in enumerate(zip(cluster.devices, np.asarray(speed_scale, dtype=float))):
        changes: dict[str, Any] = {"peak_flops": float(dev.peak_flops / s), "memory_bandwidth": float(dev.memory_bandwidth / s)}
        if op_overhead_s is not None:
            if not hasattr(dev, "op_overhead_s"):
                raise RuntimeError("this version of Device has no op_overhead_s")
            changes["op_overhead_s"] = float(op_overhead_s[d])
        devices.append(dataclasses.replace(dev, **changes))
    devices = tuple(devices)
    return with_link(dataclasses.replace(cluster, devices=devices), bandwidth, latency)


def simulated_runtimes(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, placements: np.ndarray) -> np.ndarray:
    """Simulated step time per placement (nan where the simulator reports a failure)."""
    from .runtime.simulated import SimulationPlan

    results = SimulationPlan(graph, cluster, op_seconds).run_batch(np.asarray(placements, dtype=np.int64))
    return np.array([m.runtime_s if m.ok else np.nan for m in results], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Fidelity and fitting


def fidelity(simulated: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Spearman rank correlation, MAPE (mean |sim - meas| / meas) and RMS log-ratio, over finite pairs."""
    from scipy.stats import spearmanr

    sim, meas = np.asarray(simulated, float), np.asarray(measured, float)
    keep = np.isfinite(sim) & np.isfinite(meas) & (meas > 0) & (sim > 0)
    sim, meas = sim[keep], meas[keep]
    out = {"n": int(keep.sum()), "spearman": float("nan"), "mape": float("nan"), "rms_log_ratio": float("nan")}
    if sim.size:
        out["mape"] = float(np.mean(np.abs(sim - meas) / meas))
        out["rms_log_ratio"] = float(np.sqrt(np.mean(np.log(sim / meas) ** 2)))
    if sim.size >= 3 and np.ptp(sim) > 0 and np.ptp(meas) > 0:
        out["spearman"] = float(spearmanr(sim, meas).statistic)
    return out


@dataclass(frozen=True)
class FitResult:
    """Fitted simulator parameters: op-cost scale and per-op overhead per device, one link (bandwidth, latency).

    Op ``i`` on device ``d`` takes ``scale[d] * base[i, d] + overhead[d]`` seconds.
    """

    scale: np.ndarray  # per device, multiplies the base op costs
    overhead: np.ndarray  # per device, seconds added to every op
    bandwidth: float  # bytes/s
    latency: float  # s
    loss: float  # mean squared log-ratio at the optimum
    evaluations: int


_LOSS_NAN = 1e6  # a simulator failure (e.g. "oom") or non-positive time counts as a huge error


def _loss(sim: np.ndarray, meas: np.ndarray) -> float:
    if not np.all(np.isfinite(sim)) or np.any(sim <= 0):
        return _LOSS_NAN
    return float(np.mean(np.log(sim / meas) ** 2))


def fit_simulator(graph: OpGraph, cluster: Cluster, base_seconds: np.ndarray, placements: np.ndarray,
                  measured: np.ndarray, *, fit_scale: bool = True, fit_overhead: bool = True,
                  fit_links: bool = True, overhead0: float = 2e-6,
                  start: tuple[np.ndarray, float, float] | None = None, max_evaluations: int = 300,
                  grid_points: int = 48, restarts: int = 3) -> FitResult:
    """Fit the op-cost scale and per-op overhead per device type and one link (bandwidth, latency).

    ``base_seconds`` [n_ops, n_devices]: op costs at scale 1 without overhead (``overhead0``: the
    overhead to start from, or to keep when ``fit_overhead=False``). Minimises the mean squared
    ``log(simulated / measured)`` over ``placements`` with Nelder-Mead on the log parameters,
    restarted from the ``restarts`` best of ``grid_points`` random grid points (each parameter
    x 0.1 .. 100 around ``start``; default: the cluster's current link and scale 1).
    """
    from scipy.optimize import minimize

    placements = np.asarray(placements, dtype=np.int64)
    measured = np.asarray(measured, dtype=np.float64)
    if placements.shape[0] != measured.shape[0] or placements.shape[0] == 0:
        raise ValueError("need one measured runtime per placement, and at least one")
    base = np.asarray(base_seconds, dtype=np.float64)
    types = device_types(cluster)
    n_types = int(types.max()) + 1
    off = ~np.eye(cluster.n_devices, dtype=bool)
    if start is None:
        bw0 = float(np.median(cluster.bandwidth[off])) if off.any() else 1e9
        lat0 = float(np.median(cluster.latency[off])) if off.any() else 1e-4
        scale0 = np.ones(n_types)
    else:
        scale0 = np.asarray(start[0], float)[np.unique(types, return_index=True)[1]]
        bw0, lat0 = float(start[1]), float(start[2])
    lat0 = max(lat0, 1e-7)

    over0 = np.full(n_types, max(float(overhead0), 1e-8))

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
        k = 0
        scale, over = scale0.copy(), over0.copy()
        # bounded to physically sensible ranges: weakly identified parameters must not run off
        if fit_scale:
            scale = np.exp(np.clip(x[k:k + n_types], math.log(1e-3), math.log(1e4)))
            k += n_types
        if fit_overhead:
            over = np.exp(np.clip(x[k:k + n_types], math.log(1e-9), math.log(1e-2)))
            k += n_types
        bw, lat = bw0, lat0
        if fit_links:
            bw = math.exp(min(max(x[k], math.log(1e5)), math.log(1e12)))
            lat = math.exp(min(max(x[k + 1], math.log(1e-8)), math.log(1.0)))
        return scale, over, bw, lat

    evaluations = 0

    def loss_at(x: np.ndarray) -> float:
        nonlocal evaluations
        evaluations += 1
        scale, over, bw, lat = unpack(x)
        seconds = base * scale[types][None, :] + over[types][None, :]
        sim = simulated_runtimes(graph, with_link(cluster, bw, lat), seconds, placements)
        return _loss(sim, measured)

    x0 = []
    if fit_scale:
        x0 += list(np.log(scale0))
    if fit_overhead:
        x0 += list(np.log(over0))
    if fit_links:
        x0 += [math.log(bw0), math.log(lat0)]
    x0 = np.array(x0, dtype=float)
    if x0.size == 0:
        loss = loss_at(x0)
        return FitResult(scale0[types], over0[types], bw0, lat0, loss, evaluations)
    # coarse grid (each parameter x 1/10 .. 100 around the start), then Nelder-Mead from the best
    # few grid points: the simulated time is piecewise smooth in the parameters (event order changes)
    rng = np.random.default_rng(0)
    factors = np.log([0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0])
    grid = [x0] + [x0 + rng.choice(factors, size=x0.size) for _ in range(grid_points - 1)]
    values = np.array([loss_at(x) for x in grid])
    best_x, best_loss = grid[int(np.argmin(values))], float(values.min())
    for k in np.argsort(values)[:restarts]:
        simplex = np.vstack([grid[k]] + [grid[k] + 0.5 * np.eye(x0.size)[i] for i in range(x0.size)])
        result = minimize(loss_at, grid[k], method="Nelder-Mead",
                          options={"maxfev": max_evaluations, "xatol": 1e-3, "fatol": 1e-7,
                                   "initial_simplex": simplex})
        if result.fun < best_loss:
            best_x, best_loss = result.x, float(result.fun)
    # Nelder-Mead stalls on this rugged loss: restart it from the best point with a fresh simplex
    for _ in range(2):
        simplex = np.vstack([best_x] + [best_x + 0.2 * np.eye(x0.size)[i] for i in range(x0.size)])
        result = minimize(loss_at, best_x, method="Nelder-Mead",
                          options={"maxfev": max_evaluations, "xatol": 1e-3, "fatol": 1e-7, "initial_simplex": simplex})
        if not result.fun < best_loss - 1e-9:
            break
        best_x, best_loss = result.x, float(result.fun)
    scale, over, bw, lat = unpack(best_x)
    return FitResult(scale[types], over[types], float(bw), float(lat), best_loss, evaluations)


# ---------------------------------------------------------------------------------------------
# Calibration


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
        def row(name: str, f: dict[str, float]) -> str:
            return f"  {name:<22} spearman {f['spearman']:6.3f}   MAPE {100 * f['mape']:7.1f} %   (n={f['n']})"

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
            row("before calibration", self.before),
            row("after (in-sample)", self.after),
        ]
        if self.folds:
            lines.append(row(f"after ({self.folds}-fold held-out)", self.heldout))
        return "\n".join(line for line in lines if line)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: calibrated cluster, fitted parameters, data and fidelity."""
        def floats(a: np.ndarray) -> list:
            return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float)]

        return {
            "graph": self.graph_name,
            "cluster": self.cluster.to_dict(),
            "original_cluster": self.original.to_dict(),
            "fit": {"scale": floats(self.fit.scale), "overhead_s": floats(self.fit.overhead), "bandwidth": self.fit.bandwidth, "latency": self.fit.latency,
                    "loss": self.fit.loss, "evaluations": self.fit.evaluations},
            "costs_source": self.base_costs.source,
            "costs_n_unreported": self.base_costs.n_unreported,
            "placements": np.asarray(self.placements).tolist(),
            "measured_s": floats(self.measured_s),
            "simulated_before_s": floats(self.simulated_before_s),
            "simulated_after_s": floats(self.simulated_after_s),
            "heldout_s": floats(self.heldout_s),
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
    fitting (the overhead is a parameter of its own) and the fitted one put in.
    """
    placements = np.asarray(placements, dtype=np.int64)
    measured = np.asarray(measured, dtype=np.float64)
    analytical = base.source.startswith("grappler-analytical")
    overhead_in = np.asarray(getattr(cluster, "op_overhead_s", np.zeros(cluster.n_devices)), dtype=np.float64)
    raw = np.asarray(base.seconds) - (overhead_in[None, :] if analytical else 0.0)
    raw = np.maximum(raw, 0.0)
    overhead0 = float(np.median(overhead_in)) if overhead_in.size and np.median(overhead_in) > 0 else 2e-6
    before = simulated_runtimes(graph, cluster, np.asarray(base.seconds), placements)
    kw = dict(fit_scale=fit_scale, fit_overhead=fit_overhead, fit_links=fit_links, overhead0=overhead0)
    fit = fit_simulator(graph, cluster, raw, placements, measured, **kw)
    after_costs = raw * fit.scale[None, :] + fit.overhead[None, :]
    linked = with_link(cluster, fit.bandwidth, fit.latency)
    after = simulated_runtimes(graph, linked, after_costs, placements)
    n = len(measured)
    heldout = np.full(n, np.nan)
    folds = min(int(folds), n) if folds and n >= 4 else 0
    if folds >= 2:
        order = np.random.default_rng(seed).permutation(n)
        for part in np.array_split(order, folds):
            train = np.setdiff1d(order, part)
            f = fit_simulator(graph, cluster, raw, placements[train], measured[train], **kw)
            heldout[part] = simulated_runtimes(graph, with_link(cluster, f.bandwidth, f.latency),
                                               raw * f.scale[None, :] + f.overhead[None, :], placements[part])
    else:
        folds = 0
    # speeds relative to analytical costs: the scale that maps analytical costs onto the fitted costs
    if analytical:
        speed_scale = fit.scale
    else:
        grappler = analytical_costs(graph, cluster).seconds - overhead_in[None, :]
        speed_scale = np.array([(raw[:, d] * fit.scale[d]).sum() / max(grappler[:, d].sum(), 1e-300)
                                for d in range(cluster.n_devices)])
    has_overhead = hasattr(cluster.devices[0], "op_overhead_s")
    calibrated = calibrated_cluster(cluster, speed_scale, fit.bandwidth, fit.latency,
                                    fit.overhead if has_overhead else None)
    return Calibration(
        graph_name=graph.name, cluster=calibrated, original=cluster,
        costs=OpCosts(after_costs, source=f"{base.source}, calibrated x{np.array2string(fit.scale, precision=3)}",
                      n_unreported=base.n_unreported),
        base_costs=base, fit=fit, placements=placements, measured_s=measured, simulated_before_s=before,
        simulated_after_s=after, heldout_s=heldout, failures=dict(failures or {}),
        n_attempted=n if n_attempted is None else n_attempted, folds=folds, protocol=dict(protocol or {}),
        wall_s=wall_s)


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
    (0: none).
    """
    from tqdm.auto import tqdm

    from .runtime.measured import MeasuredRuntime

    begin = time.perf_counter()
    if placements is None:
        placements = random_placements(graph, cluster, n_placements, seed, spread=spread)
    placements = np.asarray(placements, dtype=np.int64)
    own = runtime is None
    rt = MeasuredRuntime(cluster, steps=steps, warmup=warmup, timeout_s=timeout_s) if own else runtime
    try:
        if isinstance(costs, OpCosts):
            base = costs
        elif costs == "analytical":
            base = analytical_costs(graph, cluster)
        elif costs == "measured":
            base = measured_costs(graph, cluster, runtime=rt)
        else:
            raise ValueError(f"costs = {costs!r}: 'analytical', 'measured' or an OpCosts")
        if base.seconds.shape != (graph.n_ops, cluster.n_devices):
            raise ValueError(f"costs have shape {base.seconds.shape}, expected ({graph.n_ops}, {cluster.n_devices})")
        measured = np.full(len(placements), np.nan)
        failures: dict[str, int] = {}
        bar = tqdm(placements, desc=f"calibrating {cluster.name} on {graph.name}", unit="placement",
                   disable=not progress)
        for k, placement in enumerate(bar):
            try:
                m = rt.measure(graph, placement)
            except Exception as error:  # noqa: BLE001 - one bad measurement must not end the run
                failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
                continue
            if callback is not None:
                callback(k, m)
            if m.ok and np.isfinite(m.runtime_s) and m.runtime_s > 0:
                measured[k] = m.runtime_s
                bar.set_postfix_str(f"{1e3 * m.runtime_s:.2f} ms")
            else:
                kind = m.failure or "error"
                failures[kind] = failures.get(kind, 0) + 1
        protocol = {"steps": getattr(rt, "steps", steps), "warmup": getattr(rt, "warmup", warmup),
                    "spread": spread, "seed": seed}
    finally:
        if own:
            rt.close()
    good = np.isfinite(measured)
    if good.sum() < 2:
        raise RuntimeError(f"only {int(good.sum())} of {len(placements)} placements could be measured "
                           f"(failures: {failures}); cannot calibrate")
    result = fit_and_report(graph, cluster, base, placements[good], measured[good], folds=folds, seed=seed,
                            failures=failures, n_attempted=len(placements), protocol=protocol)
    return dataclasses.replace(result, wall_s=time.perf_counter() - begin)
