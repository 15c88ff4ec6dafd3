"""Simple placements every part of the project needs: all on one device, and random ones.

Both respect kernels: a group with an op that has no kernel for a device's kind never goes there
(it falls back to the first device that can run it, in practice the CPU).
"""
from __future__ import annotations

import numpy as np

from .cluster import Cluster
from .opgraph import OpGraph


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
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
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
