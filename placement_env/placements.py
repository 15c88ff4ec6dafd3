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


def random_placements(graph: OpGraph, cluster: Cluster, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` placements ([n, n_groups]), each group uniform over the devices that can run it."""
    allowed = allowed_devices(graph, cluster)
    counts = allowed.sum(axis=1)
    if graph.n_groups and counts.min() == 0:
        raise ValueError(f"group {int(counts.argmin())} of {graph.name!r} can run on no device of {cluster.name!r}")
    # the k-th allowed device of each group, k uniform in [0, count)
    k = np.floor(rng.random((n, graph.n_groups)) * counts).astype(np.int64)
    order = np.argsort(~allowed, axis=1, kind="stable")  # allowed devices first, in index order
    return order[np.arange(graph.n_groups), k]
