"""What every runtime returns for a placement, and the check every runtime applies to its input."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import InvalidPlacementError
from ..opgraph import OpGraph

# Failure kinds a Measurement may carry ("" when ok).
FAILURES = ("oom", "no_kernel", "error", "timeout", "crash")


@dataclass(frozen=True, eq=False)
class Measurement:
    """One training step of a placed graph: how long, whether it ran, and why not.

    ``runtime_s`` is meaningful only when ``ok``; a failed measurement keeps what is known
    (e.g. the peak memory that overflowed). Arrays are per device of the cluster.
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
    extra: dict[str, Any] = field(default_factory=dict)  # runtime-specific details (e.g. the schedule)

    def __post_init__(self) -> None:
        if not self.ok and self.failure not in FAILURES:
            raise ValueError(f"failure={self.failure!r}: a failed Measurement needs one of {FAILURES}")


def check_placement(graph: OpGraph, cluster: Cluster, placement: Any) -> np.ndarray:
    """``placement`` (one device index per group) as a read-only int64 array, or InvalidPlacementError.

    Device kinds are not checked here: a CPU-only op on a GPU is a failed measurement
    ("no_kernel"), not bad input, so an agent's unmasked action never crashes a run.
    """
    array = np.asarray(placement)
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
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
    kinds = cluster.kinds[placement]
    return np.flatnonzero((graph.group_device_mask >> kinds.astype(np.uint8)) & 1 == 0)
