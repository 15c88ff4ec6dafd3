"""The fit of the simulator's free parameters to measured step times.

Op ``i`` on device ``d`` takes ``scale[d] * base[i, d] + overhead[d]`` seconds, with one ``scale``
and one per-op ``overhead`` per device type (devices with equal :func:`~placement_env.costs.op_type_key`
share them; all workers of a ``local:N`` cluster are one type), and every link between distinct
devices has one ``bandwidth`` and ``latency``. On a cluster with a ``host_transfer`` (CPU worker
processes, where moving a tensor is CPU work on both ends) the transfer parameters are instead the
link ``latency`` and the host transfer's ``per_tensor_s`` and ``bandwidth`` (and, asked for, ``remote_step_s``);
the link keeps its bandwidth, since every per-byte cost is then the workers' own copying.
:func:`fit_simulator` minimises the mean squared log-ratio ``log(simulated / measured)`` over the measured
placements: Nelder-Mead on the log parameters, restarted from the best points of a coarse random grid, because
the simulated time is only piecewise smooth in the parameters (the event order changes).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ..cluster import Cluster, HostTransfer
from ..costs import op_type_key
from ..opgraph import OpGraph
from ..runtime.simulated import SimulationPlan

__all__ = ["Dataset", "FitResult", "device_types", "fit_datasets", "fit_simulator", "fitted_cluster", "fitted_costs",
           "predicted_runtimes", "simulated_runtimes", "with_link"]

_LOSS_NAN = 1e6  # a simulator failure (e.g. "oom") or non-positive time counts as a huge error
_GRID_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)  # grid steps of each parameter around the start
# Bounds that keep weakly identified parameters physically sensible instead of running off.
_SCALE_RANGE = (1e-3, 1e4)
_OVERHEAD_RANGE_S = (1e-9, 1e-2)
_BANDWIDTH_RANGE = (1e5, 1e12)  # bytes/s
_LATENCY_RANGE_S = (1e-8, 1.0)
_HOST_TENSOR_RANGE_S = (1e-8, 1e-2)  # CPU seconds per tensor at each end: from nothing to 10 ms
_HOST_BANDWIDTH_RANGE = (1e6, 1e11)  # bytes/s one thread copies: from 1 MB/s to beyond any memcpy
_REMOTE_STEP_RANGE_S = (1e-7, 1e-1)  # a step's RPC to a worker besides the master: from nothing to 100 ms


def device_types(cluster: Cluster) -> np.ndarray:
    """Type index per device (devices equal in kind, peak, bandwidth and concurrency share one)."""
    keys: dict[tuple, int] = {}
    return np.array([keys.setdefault(op_type_key(d), len(keys)) for d in cluster.devices], dtype=np.int64)


def with_link(cluster: Cluster, bandwidth: float, latency: float) -> Cluster:
    """``cluster`` with every link between distinct devices set to (bandwidth, latency)."""
    n = cluster.n_devices
    off = ~np.eye(n, dtype=bool)
    bw = np.where(off, float(bandwidth), np.inf)
    lat = np.where(off, float(latency), 0.0)
    return dataclasses.replace(cluster, bandwidth=bw, latency=lat)


def simulated_runtimes(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, placements: np.ndarray) -> np.ndarray:
    """Simulated step time per placement (nan where the simulator reports a failure)."""
    results = SimulationPlan(graph, cluster, op_seconds).run_batch(np.asarray(placements, dtype=np.int64))
    return np.array([m.runtime_s if m.ok else np.nan for m in results], dtype=np.float64)


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
    host_transfer: HostTransfer | None = None  # fitted CPU work per transfer end, on clusters that have one


def fitted_costs(base_seconds: np.ndarray, fit: FitResult) -> np.ndarray:
    """Op seconds [n_ops, n_devices] under ``fit``: ``scale * base + overhead`` per device."""
    return base_seconds * fit.scale[None, :] + fit.overhead[None, :]


def fitted_cluster(cluster: Cluster, fit: FitResult) -> Cluster:
    """``cluster`` with the fitted link and host transfer (op costs are separate: :func:`fitted_costs`)."""
    return dataclasses.replace(with_link(cluster, fit.bandwidth, fit.latency), host_transfer=fit.host_transfer)


def predicted_runtimes(graph: OpGraph, cluster: Cluster, base_seconds: np.ndarray, fit: FitResult,
                       placements: np.ndarray) -> np.ndarray:
    """Simulated step time per placement with the fitted op costs, link and host transfer."""
    return simulated_runtimes(graph, fitted_cluster(cluster, fit), fitted_costs(base_seconds, fit), placements)


@dataclass(frozen=True)
class _Parameters:
    """The parameters to fit, per device type, and which of them are free.

    The free ones are packed, as logarithms, into the vector the optimiser moves: first the
    scales, then the overheads, then the transfer parameters: log bandwidth and log latency, or
    with a ``host`` transfer log latency, log per-tensor seconds, log host bandwidth and log
    remote-step seconds (those of them that are free).
    """

    scale: np.ndarray  # [n_types]
    overhead: np.ndarray  # [n_types] seconds
    bandwidth: float
    latency: float
    fit_scale: bool
    fit_overhead: bool
    fit_links: bool
    host: HostTransfer | None = None
    fit_host_bandwidth: bool = True
    fit_remote_step: bool = False

    def _transfer_values(self) -> list[tuple[float, tuple[float, float]]]:
        """The free transfer parameters with their bounds, in packing order."""
        if not self.fit_links:
            return []
        if self.host is None:
            return [(self.bandwidth, _BANDWIDTH_RANGE), (self.latency, _LATENCY_RANGE_S)]
        values = [(self.latency, _LATENCY_RANGE_S), (max(self.host.per_tensor_s, 1e-7), _HOST_TENSOR_RANGE_S)]
        values += [(self.host.bandwidth, _HOST_BANDWIDTH_RANGE)] * self.fit_host_bandwidth
        return values + [(max(self.host.remote_step_s, 1e-4), _REMOTE_STEP_RANGE_S)] * self.fit_remote_step

    def pack(self) -> np.ndarray:
        x0 = []
        if self.fit_scale:
            x0 += list(np.log(self.scale))
        if self.fit_overhead:
            x0 += list(np.log(self.overhead))
        x0 += [math.log(value) for value, _ in self._transfer_values()]
        return np.array(x0, dtype=float)

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float, HostTransfer | None]:
        """(scale, overhead, bandwidth, latency, host transfer) at ``x``: the free ones from it
        (clipped to their bounds), the others as given."""
        n_types = self.scale.size
        k = 0
        scale, over = self.scale.copy(), self.overhead.copy()
        if self.fit_scale:
            scale = np.exp(np.clip(x[k:k + n_types], *map(math.log, _SCALE_RANGE)))
            k += n_types
        if self.fit_overhead:
            over = np.exp(np.clip(x[k:k + n_types], *map(math.log, _OVERHEAD_RANGE_S)))
            k += n_types
        values = [math.exp(min(max(x[k + j], math.log(low)), math.log(high)))
                  for j, (_, (low, high)) in enumerate(self._transfer_values())]
        if not values:
            return scale, over, self.bandwidth, self.latency, self.host
        if self.host is None:
            return scale, over, values[0], values[1], None
        bandwidth = values[2] if self.fit_host_bandwidth else self.host.bandwidth
        remote_step = values[-1] if self.fit_remote_step else self.host.remote_step_s
        return scale, over, self.bandwidth, values[0], HostTransfer(values[1], bandwidth, remote_step)


def _starting_point(cluster: Cluster, types: np.ndarray, start: tuple[np.ndarray, float, float] | None,
                    overhead0: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(scale, overhead per type, bandwidth, latency) to start from: ``start`` if given (its scale per
    device, read at each type's first device), else scale 1 and the cluster's median link."""
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
    return scale0, over0, bw0, lat0


@dataclass(frozen=True, eq=False)
class Dataset:
    """Measured placements of one graph: what a fit matches. ``base_seconds`` [n_ops, n_devices]: its op
    costs at scale 1 without overhead."""

    graph: OpGraph
    base_seconds: np.ndarray
    placements: np.ndarray  # [k, n_groups]
    measured: np.ndarray  # [k] seconds

    def __post_init__(self) -> None:
        placements = np.asarray(self.placements, dtype=np.int64)
        measured = np.asarray(self.measured, dtype=np.float64)
        if placements.ndim != 2 or placements.shape[0] != measured.shape[0] or placements.shape[0] == 0:
            raise ValueError(f"{self.graph.name}: need one measured runtime per placement, and at least one: got "
                             f"{placements.shape[0] if placements.ndim else 0} placements and {measured.shape[0]} "
                             "measured runtimes")
        object.__setattr__(self, "placements", placements)
        object.__setattr__(self, "measured", measured)
        object.__setattr__(self, "base_seconds", np.asarray(self.base_seconds, dtype=np.float64))


class _Objective:
    """The loss at a packed parameter vector: mean squared ``log(simulated / measured)`` over every
    placement of every dataset, counting calls."""

    def __init__(self, datasets: list[Dataset], cluster: Cluster, types: np.ndarray, parameters: _Parameters) -> None:
        self.datasets, self.cluster, self.types, self.parameters = datasets, cluster, types, parameters
        self.evaluations = 0

    def __call__(self, x: np.ndarray) -> float:
        self.evaluations += 1
        scale, over, bw, lat, host = self.parameters.unpack(x)
        cluster = dataclasses.replace(with_link(self.cluster, bw, lat), host_transfer=host)
        errors = []
        for data in self.datasets:
            seconds = data.base_seconds * scale[self.types][None, :] + over[self.types][None, :]
            sim = simulated_runtimes(data.graph, cluster, seconds, data.placements)
            if not np.all(np.isfinite(sim)) or np.any(sim <= 0):
                return _LOSS_NAN
            errors.append(np.log(sim / data.measured) ** 2)
        return float(np.mean(np.concatenate(errors)))


def _nelder_mead(objective: _Objective, x: np.ndarray, step: float, max_evaluations: int) -> tuple[np.ndarray, float]:
    """Nelder-Mead from ``x`` with an initial simplex ``step`` along each axis: (best x, its loss)."""
    simplex = np.vstack([x] + [x + step * np.eye(x.size)[i] for i in range(x.size)])
    result = minimize(objective, x, method="Nelder-Mead",
                      options={"maxfev": max_evaluations, "xatol": 1e-3, "fatol": 1e-7, "initial_simplex": simplex})
    return result.x, result.fun


def _search(objective: _Objective, x0: np.ndarray, grid_points: int, restarts: int,
            max_evaluations: int) -> tuple[np.ndarray, float]:
    """Minimise ``objective`` from ``x0``: the best (x, loss) found.

    A coarse random grid (each parameter x 1/10 .. 100 around ``x0``, seeded), Nelder-Mead from the
    ``restarts`` best grid points, then Nelder-Mead again from the best point with a fresh, smaller
    simplex while that still improves (at most twice): it stalls on this rugged loss.
    """
    rng = np.random.default_rng(0)
    factors = np.log(_GRID_FACTORS)
    grid = [x0] + [x0 + rng.choice(factors, size=x0.size) for _ in range(grid_points - 1)]
    values = np.array([objective(x) for x in grid])
    best_x, best_loss = grid[int(np.argmin(values))], float(values.min())
    for k in np.argsort(values)[:restarts]:
        x, loss = _nelder_mead(objective, grid[k], 0.5, max_evaluations)
        if loss < best_loss:
            best_x, best_loss = x, float(loss)
    for _ in range(2):
        x, loss = _nelder_mead(objective, best_x, 0.2, max_evaluations)
        if not loss < best_loss - 1e-9:
            break
        best_x, best_loss = x, float(loss)
    return best_x, best_loss


def fit_simulator(graph: OpGraph, cluster: Cluster, base_seconds: np.ndarray, placements: np.ndarray,
                  measured: np.ndarray, *, fit_scale: bool = True, fit_overhead: bool = True,
                  fit_links: bool = True, overhead0: float = 2e-6,
                  start: tuple[np.ndarray, float, float] | None = None, max_evaluations: int = 300,
                  grid_points: int = 48, restarts: int = 3) -> FitResult:
    """Fit the op-cost scale and per-op overhead per device type and one link (bandwidth, latency;
    on a cluster with a host transfer: latency and the host transfer's two parameters).

    ``base_seconds`` [n_ops, n_devices]: op costs at scale 1 without overhead (``overhead0``: the
    overhead to start from, or to keep when ``fit_overhead=False``). Minimises the mean squared
    ``log(simulated / measured)`` over ``placements`` with Nelder-Mead on the log parameters,
    restarted from the ``restarts`` best of ``grid_points`` random grid points (each parameter
    x 0.1 .. 100 around ``start``; default: the cluster's current link and scale 1).
    """
    return fit_datasets([Dataset(graph, base_seconds, placements, measured)], cluster, fit_scale=fit_scale,
                        fit_overhead=fit_overhead, fit_links=fit_links, overhead0=overhead0, start=start,
                        max_evaluations=max_evaluations, grid_points=grid_points, restarts=restarts)


def fit_datasets(datasets: list[Dataset], cluster: Cluster, *, fit_scale: bool = True, fit_overhead: bool = True,
                 fit_links: bool = True, overhead0: float = 2e-6,
                 start: tuple[np.ndarray, float, float] | None = None, max_evaluations: int = 300,
                 grid_points: int = 48, restarts: int = 3, host_bandwidth: float | None = None,
                 fit_remote_step: bool = False) -> FitResult:
    """:func:`fit_simulator` on the measured placements of several graphs at once (one set of
    parameters for all): the loss pools every placement of every dataset. Graphs whose step times
    are mostly per-op overhead and graphs whose step times are mostly compute or transfers then pin
    down different parameters, which one graph alone cannot tell apart.

    ``host_bandwidth``: on a cluster with a host transfer, its bandwidth measured elsewhere (e.g.
    :func:`host_bandwidth_from_links`, from large tensors alone) and kept, not fitted. ``fit_remote_step``: also
    fit the host transfer's ``remote_step_s`` (what a step costs for using a worker besides device 0, the
    session's master); off, the cluster's is kept."""
    if not datasets:
        raise ValueError("fit_datasets needs at least one Dataset")
    types = device_types(cluster)
    host = cluster.host_transfer
    if host is not None and host_bandwidth is not None:
        host = dataclasses.replace(host, bandwidth=host_bandwidth)
    parameters = _Parameters(*_starting_point(cluster, types, start, overhead0), fit_scale=fit_scale,
                             fit_overhead=fit_overhead, fit_links=fit_links, host=host,
                             fit_host_bandwidth=host_bandwidth is None,
                             fit_remote_step=fit_remote_step and host is not None)
    objective = _Objective(list(datasets), cluster, types, parameters)
    x0 = parameters.pack()
    best_x, best_loss = x0, None
    if x0.size:
        best_x, best_loss = _search(objective, x0, grid_points, restarts, max_evaluations)
    else:
        best_loss = objective(x0)
    scale, over, bw, lat, host = parameters.unpack(best_x)
    return FitResult(scale[types], over[types], float(bw), float(lat), best_loss, objective.evaluations, host)
