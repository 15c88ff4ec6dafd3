"""The group graph: the graph a placement method sees, one vertex per co-location group.

Every method that reads a grouped graph without running it (the env's observation, the partitioners, the list
schedulers, the GNN placer's inputs) builds on this one :class:`GroupGraph`, made by :func:`group_graph` and
kept in the derived-data cache per (graph, cluster, op costs), so its numbers mean the same everywhere:

* edges: one per ordered pair of distinct groups (a, b) such that some op of a feeds some op of b by a data or
  control edge, sorted by source then destination; both (a, b) and (b, a) appear when the groups feed each
  other. Control edges carry no bytes but order ops (across devices they cost the link latency in the
  simulator), so they are edges too (``data`` False when no tensor crosses);
* an edge's ``bytes``: every tensor (op output) of a read by ops of b, counted once however many ops of b read
  it: what the simulator moves when the two groups sit on different devices (TF sends a tensor once per
  destination device);
* ``seconds`` [n_groups, n_devices]: the sum of the group's ops' seconds on each device of the cluster (devices
  of one type have equal columns);
* ``output_bytes``: the bytes the group's ops output (all their outputs, consumed inside the group or not) and
  ``resident_bytes``: its variables' and optimizer slots' bytes; ``memory_bytes`` is their sum (Baechi's
  conservative estimate: activations held for the whole step);
* :attr:`GroupGraph.undirected`: the same edges without direction, for partitioners: a symmetric CSR adjacency
  whose entry (a, b) sums the bytes a and b send each other.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from .cluster import Cluster
from .costs import OpCosts
from .derived import DERIVED
from .errors import ArgumentError
from .opgraph import OpGraph

__all__ = ["GroupGraph", "UndirectedGroupGraph", "group_graph"]

BYTES_SCALE = 12.0  # log10 of a terabyte: GroupGraph.log_bytes reaches 1 at 1e12 bytes


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class UndirectedGroupGraph:
    """The group graph without direction, as a symmetric CSR adjacency (no self loops, neighbours sorted):
    group a's neighbours are ``indices[indptr[a]:indptr[a + 1]]``; ``bytes`` sums the bytes sent both ways
    between the two groups and ``edges`` counts the directed edges merged into the entry (1 or 2)."""

    indptr: np.ndarray  # int64 [n_groups + 1]
    indices: np.ndarray  # int64 [2 * pairs]
    bytes: np.ndarray  # int64 [2 * pairs]
    edges: np.ndarray  # int64 [2 * pairs]

    @property
    def n_groups(self) -> int:
        return len(self.indptr) - 1


@dataclass(frozen=True, eq=False)
class GroupGraph:
    """One grouped graph on one cluster with one set of op costs (see the module docstring); read-only arrays.

    ``src`` / ``dst`` / ``bytes`` / ``data`` [E]: the directed edges (int64, int64, int64, bool);
    ``seconds`` [n_groups, n_devices] float64; ``output_bytes`` / ``resident_bytes`` [n_groups] int64;
    ``device_kinds``: the kind of each device of the cluster ("CPU" or "GPU").
    """

    n_groups: int
    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    data: np.ndarray
    seconds: np.ndarray
    output_bytes: np.ndarray
    resident_bytes: np.ndarray
    device_kinds: tuple[str, ...]

    @property
    def n_edges(self) -> int:
        return int(self.src.size)

    @property
    def n_devices(self) -> int:
        return len(self.device_kinds)

    @cached_property
    def memory_bytes(self) -> np.ndarray:
        """Int64 [n_groups]: resident plus output bytes, what the group holds if its activations live all step."""
        return _readonly(self.resident_bytes + self.output_bytes)

    def log_bytes(self) -> np.ndarray:
        """Float64 [E]: each edge's bytes as log10(1 + bytes) / 12, clipped to 1 (1 at a terabyte)."""
        return np.minimum(np.log10(1.0 + self.bytes) / BYTES_SCALE, 1.0)

    def kind_seconds(self, kind: str) -> np.ndarray | None:
        """Float64 [n_groups]: each group's seconds on the cluster's first device of ``kind`` ("CPU" or "GPU"),
        or None when the cluster has none."""
        device = next((d for d, k in enumerate(self.device_kinds) if k == kind), None)
        return None if device is None else self.seconds[:, device]

    @cached_property
    def undirected(self) -> UndirectedGroupGraph:
        """The edges without direction (see :class:`UndirectedGroupGraph`), built once."""
        n = self.n_groups
        u = np.concatenate([self.src, self.dst])
        v = np.concatenate([self.dst, self.src])
        key, index = np.unique(u * n + v, return_inverse=True)
        index = index.reshape(-1)
        volume = np.bincount(index, weights=np.concatenate([self.bytes, self.bytes]), minlength=key.size)
        edges = np.bincount(index, minlength=key.size)
        rows = key // n if n else key
        return UndirectedGroupGraph(
            indptr=_readonly(np.searchsorted(rows, np.arange(n + 1)).astype(np.int64)),
            indices=_readonly((key % n if n else key).astype(np.int64)),
            bytes=_readonly(np.rint(volume).astype(np.int64)), edges=_readonly(edges.astype(np.int64)))


def _edges(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src group, dst group, bytes, data) of every group-graph edge of ``graph`` (see the module docstring)."""
    n = graph.n_groups
    group = graph.group.astype(np.int64)
    src, dst = group[graph.edge_src], group[graph.edge_dst]
    cross = src != dst
    pairs, inverse = np.unique(src[cross] * n + dst[cross], return_inverse=True)
    inverse = inverse.reshape(-1)
    data = ~graph.is_control_edge[cross]
    output = (graph.output_ptr[graph.edge_src] + graph.edge_src_output)[cross][data]
    pair_of_data = inverse[data]
    sent = np.unique(np.stack([pair_of_data, output], axis=1), axis=0)  # each tensor once per pair
    volume = np.bincount(sent[:, 0], weights=graph.output_bytes[sent[:, 1]], minlength=pairs.size)
    has_data = np.bincount(pair_of_data, minlength=pairs.size) > 0
    return (_readonly(pairs // n if n else pairs), _readonly(pairs % n if n else pairs),
            _readonly(np.rint(volume).astype(np.int64)), _readonly(has_data))


def _op_seconds(graph: OpGraph, cluster: Cluster, costs: Any) -> np.ndarray:
    """``costs`` (OpCosts or an array) as float64 seconds [n_ops, n_devices], or an ArgumentError."""
    seconds = np.asarray(costs.seconds if isinstance(costs, OpCosts) else costs)
    if seconds.shape != (graph.n_ops, cluster.n_devices) or not np.issubdtype(seconds.dtype, np.number) \
            or not np.all(np.isfinite(seconds) & (seconds >= 0)):
        raise ArgumentError(f"costs: {seconds.dtype} array of shape {seconds.shape}; expected OpCosts or finite "
                            f"seconds >= 0 of shape (n_ops, n_devices) = ({graph.n_ops}, {cluster.n_devices})")
    return seconds.astype(np.float64, copy=False)


def _build(graph: OpGraph, cluster: Cluster, costs: Any) -> GroupGraph:
    n = graph.n_groups
    op_seconds = _op_seconds(graph, cluster, costs)
    src, dst, volume, data = DERIVED.get("group graph edges", graph, build=lambda: _edges(graph))
    seconds = np.zeros((n, cluster.n_devices))
    np.add.at(seconds, graph.group, op_seconds)
    return GroupGraph(n_groups=n, src=src, dst=dst, bytes=volume, data=data, seconds=_readonly(seconds),
                      output_bytes=graph.group_output_bytes, resident_bytes=graph.group_persistent_bytes,
                      device_kinds=tuple(device.kind for device in cluster.devices))


def group_graph(graph: OpGraph, cluster: Cluster, costs: Any) -> GroupGraph:
    """The :class:`GroupGraph` of ``graph`` on ``cluster`` with op ``costs`` (an OpCosts, e.g. ``problem.costs``,
    or finite seconds >= 0 of shape (n_ops, n_devices)), built once per (graph, cluster, costs) object."""
    if not isinstance(graph, OpGraph):
        raise ArgumentError(f"graph is a {type(graph).__name__}; expected an OpGraph")
    if not isinstance(cluster, Cluster):
        raise ArgumentError(f"cluster is a {type(cluster).__name__}; expected a Cluster")
    if isinstance(costs, OpCosts) or (isinstance(costs, np.ndarray) and not costs.flags.writeable):
        return DERIVED.get("group graph", graph, cluster, costs, build=lambda: _build(graph, cluster, costs))
    return _build(graph, cluster, costs)  # an array that may still change, or a list: not cached
