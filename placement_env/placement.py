"""The placement vocabulary every layer shares: what a placement is, what evaluating one returns,
which devices a group may use, and the simple placements (one device, random) everyone needs.

A placement is one device index per co-location group. Kernels are respected where placements
are made here: a group with an op that has no kernel for a device's kind never goes there (it
falls back to the first device that can run it, in practice the CPU). ``check_placement`` does
not check kinds: a CPU-only op on a GPU is a failed measurement ("no_kernel"), not bad input.

The cluster is read only through ``n_devices``, ``kinds``, ``name`` and ``devices``, so this module
sits below the cluster model in the layers.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ArgumentError, InfrastructureError, InvalidPlacementError
from .opgraph import OpGraph
from .schedule import Schedule

if TYPE_CHECKING:
    from .cluster import Cluster

# Failure kinds a Measurement may carry ("" when ok). The first four are the placement's own;
# "crash": a ParallelEvaluator worker died on every try; "infrastructure": the measured runtime's
# workers or driver failed on every try (see INFRASTRUCTURE), which says nothing about the placement.
INFRASTRUCTURE = "infrastructure"
FAILURES = ("oom", "no_kernel", "error", "timeout", "crash", INFRASTRUCTURE)


@dataclass(frozen=True, eq=False)
class Measurement:
    """One training step of a placed graph: how long, whether it ran, and why not.

    ``runtime_s`` is meaningful only when ``ok``; a failed measurement keeps what is known
    (e.g. the peak memory that overflowed). Arrays are per device of the cluster. ``schedule`` is
    the simulated step's timeline when it was asked for (``simulate(..., schedule=True)``).
    """

    runtime_s: float
    ok: bool
    failure: str = ""  # one of FAILURES when not ok
    message: str = ""  # human-readable reason
    peak_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    busy_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    bytes_moved: int = 0
    placement: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # device per group
    runtime: str = ""  # "sim", "grappler" or "measured"
    extra: dict[str, Any] = field(default_factory=dict)  # runtime-specific details (e.g. measured step times)
    schedule: Schedule | None = None

    def __post_init__(self) -> None:
        if not self.ok and self.failure not in FAILURES:
            raise ValueError(f"failure={self.failure!r}: a failed Measurement needs one of {FAILURES}")

    @property
    def infrastructure_failure(self) -> bool:
        """The machinery failed (``failure="infrastructure"``): no verdict on the placement."""
        return not self.ok and self.failure == INFRASTRUCTURE


def raise_on_infrastructure_failure(*measurements: Measurement) -> None:
    """InfrastructureError for the first measurement the machinery failed, so that no caller charges a
    placement for it (as it would a placement that failed on its own)."""
    for m in measurements:
        if m.infrastructure_failure:
            raise InfrastructureError(
                f"the measuring machinery failed, not the placement: {m.message} -- nothing was charged; "
                "try again (a resumed run retries it)", m)


def check_placement(graph: OpGraph, cluster: Cluster, placement: Any) -> np.ndarray:
    """``placement`` (one device index per group) as a read-only int64 array, or InvalidPlacementError.

    Device kinds are not checked here: a CPU-only op on a GPU is a failed measurement
    ("no_kernel"), not bad input, so an agent's unmasked action never crashes a run.
    """
    try:
        array = np.asarray(placement)
    except ValueError:  # numpy's "inhomogeneous shape": a ragged list
        raise InvalidPlacementError("placement is not one array (rows of different lengths); expected one "
                                    "device index per group") from None
    if array.dtype.kind not in "iu" and not (array.size == 0 and array.dtype.kind != "b"):
        raise InvalidPlacementError(
            f"placement has dtype {array.dtype}; expected integers (one device index per group)"
        )
    if array.ndim != 1 or array.shape[0] != graph.n_groups:
        raise InvalidPlacementError(
            f"placement has shape {array.shape}; expected ({graph.n_groups},): one device per group of {graph.name!r}"
        )
    if array.size and (array.min() < 0 or array.max() >= cluster.n_devices):
        bad = int(array[(array < 0) | (array >= cluster.n_devices)][0])
        raise InvalidPlacementError(
            f"placement uses device {bad}, but cluster {cluster.name!r} has devices 0..{cluster.n_devices - 1} "
            f"({', '.join(d.name for d in cluster.devices)})"
        )
    result = array.astype(np.int64)
    result.setflags(write=False)
    return result


def op_devices(graph: OpGraph, placement: np.ndarray) -> np.ndarray:
    """Device of every op, from a checked group placement."""
    return placement[graph.group]


def kernel_violations(graph: OpGraph, cluster: Cluster, placement: np.ndarray) -> np.ndarray:
    """Indices of groups placed on a device kind one of their ops has no kernel for."""
    return np.flatnonzero(~allowed_devices(graph, cluster)[np.arange(graph.n_groups), placement])


def allowed_devices(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Bool [n_groups, n_devices]: whether every op of a group has a kernel for the device's kind."""
    return ((graph.group_device_mask[:, None] >> cluster.kinds[None, :].astype(np.uint8)) & 1).astype(bool)


def single_device(graph: OpGraph, cluster: Cluster, device: int) -> np.ndarray:
    """Every group on ``device``, except groups it cannot run, which go to the first device that can."""
    if not 0 <= device < cluster.n_devices:
        raise ValueError(f"device = {device}; cluster {cluster.name!r} has devices 0..{cluster.n_devices - 1}")
    allowed = allowed_devices(graph, cluster)
    return np.where(allowed[:, device], device, allowed.argmax(axis=1)).astype(np.int64)


SPREADS = ("uniform", "dirichlet")


def _is_count(value: Any) -> bool:
    """An integer >= 0 (numpy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and value >= 0


def random_placements(graph: OpGraph, cluster: Cluster, n: int, rng: np.random.Generator | int = 0, *,
                      spread: str = "uniform") -> np.ndarray:
    """``n`` random placements ([n, n_groups]), every group on a device that can run it.

    ``spread="uniform"``: each group uniform over its allowed devices (placements then all cut
    about the same share of edges). ``spread="dirichlet"``: each placement first draws device
    weights from a flat Dirichlet and its groups follow them, so placements range from nearly
    all on one device to evenly split; their step times span a wide range (what calibration needs).
    """
    if spread not in SPREADS:
        raise ValueError(f"spread={spread!r}; expected one of {', '.join(map(repr, SPREADS))}")
    if not _is_count(n):
        raise ArgumentError(f"n={n!r:.200}; expected an integer >= 0 (placements to draw)")
    if not isinstance(rng, np.random.Generator):
        if not _is_count(rng):
            raise ArgumentError(f"rng={rng!r:.200}; expected a numpy.random.Generator or a seed, an integer >= 0")
        rng = np.random.default_rng(int(rng))
    allowed = allowed_devices(graph, cluster)
    if graph.n_groups and not allowed.any(axis=1).all():
        bad = int(np.flatnonzero(~allowed.any(axis=1))[0])
        raise ValueError(f"group {bad} of {graph.name!r} can run on no device of {cluster.name!r}")
    weights = rng.dirichlet(np.ones(cluster.n_devices), size=n) if spread == "dirichlet" else \
        np.ones((n, cluster.n_devices))
    p = allowed[None, :, :] * (weights[:, None, :] + 1e-12)  # [n, groups, devices]; allowed stay possible
    cumulative = np.cumsum(p, axis=2)
    u = rng.random((n, graph.n_groups, 1)) * cumulative[:, :, -1:]
    return np.minimum((cumulative <= u).sum(axis=2), cluster.n_devices - 1).astype(np.int64)
