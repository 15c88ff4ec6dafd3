"""The device relabellings that leave a cluster unchanged, and placements in a canonical labelling.

Two placements that differ only by swapping the two dies of one K80 board, or the two boards, run the same
step: the devices are alike and so is every route between them. A learner that imitates placements (its best
so far, a heuristic's) sees the same answer under arbitrary labels unless they are made canonical.

:func:`device_symmetries` lists the permutations ``perm`` (device ``d`` -> ``perm[d]``) that keep

* every device's record (all fields but its name and TF device string), and
* the interconnect as the simulator sees it: each ordered pair's route has the same links (by bandwidth and
  latency) as its image's, and any two routes share as many links as their images do (two GPUs behind one
  PCIe switch stay behind one switch).

:func:`canonical_placement` relabels a placement by the symmetry that makes it smallest in lexicographic order
(group 0's device first), so every relabelling of one placement has the same canonical form.

Candidates are the permutations within each class of alike devices, up to ``MAX_CANDIDATES`` (8! : eight alike
GPUs, checked in about 2 s, then cached per cluster); a cluster with more (e.g. ``local:9``, nine alike
workers) is treated as having no symmetry but the identity, which is always safe.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .checks import bad_argument
from .model import Cluster

__all__ = ["canonical_placement", "device_symmetries"]

MAX_CANDIDATES = 40320  # 8! relabellings: all GPUs of an 8-GPU machine alike


def _alike_classes(cluster: Cluster) -> list[list[int]]:
    """The devices grouped by their records with names left out."""
    classes: dict[Any, list[int]] = {}
    for index, device in enumerate(cluster.devices):
        record = tuple(sorted((k, v) for k, v in vars(device).items() if k not in ("name", "tf_device")))
        classes.setdefault(record, []).append(index)
    return list(classes.values())


def _candidates(cluster: Cluster) -> np.ndarray:
    """[k, n_devices]: every permutation that maps each class of alike devices onto itself (the identity alone
    if there are more than ``MAX_CANDIDATES``)."""
    classes = _alike_classes(cluster)
    if math.prod(math.factorial(len(members)) for members in classes) > MAX_CANDIDATES:
        return np.arange(cluster.n_devices)[None]
    out = []
    for images in itertools.product(*(itertools.permutations(members) for members in classes)):
        perm = np.arange(cluster.n_devices)
        for members, image in zip(classes, images):
            perm[members] = image
        out.append(perm)
    return np.array(out, np.int64)


def device_symmetries(cluster: Cluster) -> np.ndarray:
    """[k, n_devices] int64 (read-only): the relabellings that leave ``cluster`` unchanged (see the module
    docstring), the identity first."""
    if not isinstance(cluster, Cluster):
        raise bad_argument("cluster", cluster, "a Cluster (pe.load_cluster(name))")
    return _symmetries(cluster)


@functools.lru_cache(maxsize=16)
def _symmetries(cluster: Cluster) -> np.ndarray:
    routes = cluster.routes
    n = cluster.n_devices
    pairs = n * n
    link_kind = np.unique(np.stack([routes.resource_bandwidth, routes.resource_latency], axis=1), axis=0,
                          return_inverse=True)[1].reshape(-1)
    uses = np.zeros((pairs, len(routes.resource_bandwidth)), np.int64)  # [pair, link]: whether it occupies it
    kinds = np.zeros((pairs, int(link_kind.max(initial=-1)) + 1), np.int64)  # [pair, link kind]: how many
    for p in range(pairs):
        links = routes.resources[routes.pointer[p]:routes.pointer[p + 1]]
        uses[p, links] = 1
        np.add.at(kinds[p], link_kind[links], 1)
    shared = uses @ uses.T  # [pair, pair]: links two routes share
    keep = []
    for perm in _candidates(cluster):
        image = (perm[:, None] * n + perm[None, :]).reshape(-1)  # pair (i, j) -> (perm[i], perm[j])
        if np.array_equal(kinds[image], kinds) and np.array_equal(shared[np.ix_(image, image)], shared):
            keep.append(perm)
    out = np.array(keep, np.int64)
    out.setflags(write=False)
    return out


def canonical_placement(placement: Any, symmetries: np.ndarray) -> np.ndarray:
    """[n] int64: ``placement`` (one device per group) relabelled by the one of ``symmetries`` (rows as
    :func:`device_symmetries` gives) that makes it lexicographically smallest."""
    placement, symmetries = np.asarray(placement), np.asarray(symmetries)
    if symmetries.ndim != 2 or symmetries.shape[0] < 1 or symmetries.dtype.kind not in "iu":
        raise ArgumentError(f"symmetries has shape {symmetries.shape} and dtype {symmetries.dtype}; expected "
                            "[k >= 1, n_devices] integer permutations (device_symmetries(cluster))")
    n = symmetries.shape[1]
    if placement.ndim != 1 or (placement.size and (placement.dtype.kind not in "iu" or placement.min() < 0
                                                   or placement.max() >= n)):
        raise bad_argument("placement", placement, f"a 1-D integer array of devices 0..{n - 1}")
    placement, symmetries = placement.astype(np.int64), symmetries.astype(np.int64)
    relabelled = symmetries[:, placement]  # [k, n]
    return relabelled[np.lexsort(relabelled.T[::-1])[0]] if placement.size else placement
