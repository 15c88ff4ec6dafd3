"""The group graph as padded edge-list observation fields, for agents built on graph neural networks.

Opt-in with ``DevicePlacementEnv(graph_observation=True)``; the fields join the others of
:mod:`placement_env.env.features` in the ``Dict`` observation. SB3 cannot take gymnasium's ``Graph``
space, so the edges are fixed-size ``Box``es padded to ``E = pad_edges`` rows (S = group slots):

``edge_index`` (E, 2) int64    row e = (source group, destination group) of edge e, as group
                               indices 0..S-1 (0, 0 on padding rows). Sorted by source, then
                               destination.
``edge_bytes`` (E,) float32    bytes the source group sends the destination group in one step,
                               as log10(1 + bytes) / 12, clipped to 1 (the scale of
                               ``neighbour_bytes``); 0 on padding rows and on dependency-only edges.
``edge_mask`` (E,) float32     1 for a real edge, 0 for padding.

The edges are directed, one per ordered pair of distinct groups (a, b) such that some op of a feeds
some op of b by a data or control edge; both (a, b) and (b, a) appear when the groups feed each
other. Control edges carry no bytes but order ops (across devices they cost the link latency in
the simulator), so they are edges too. The bytes count every tensor (op output) once per
destination group, however many ops of that group read it: what the simulator moves when the two
groups sit on different devices (it sends a tensor once per destination device). ``neighbour_bytes``,
in contrast, sums op edges, so a tensor read by three ops of one group counts three times there.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..cluster.checks import bad_argument, check_number
from ..errors import ArgumentError
from ..opgraph import OpGraph

BYTES_SCALE = 12.0  # log10 of a terabyte: edge_bytes reaches 1 at 1e12 bytes
# The most edge rows (``pad_edges``) beyond a graph's own edge count: each row is 24 bytes of observation.
MAX_EDGE_SLOTS = 1 << 20


def group_edges(graph: OpGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The group graph of ``graph``: (source group, destination group, bytes) per edge, int64 arrays,
    sorted by source then destination (see the module docstring for what counts)."""
    group = graph.group.astype(np.int64)
    src, dst = group[graph.edge_src], group[graph.edge_dst]
    cross = src != dst
    pairs, inverse = np.unique(src[cross] * graph.n_groups + dst[cross], return_inverse=True)
    data = ~graph.is_control_edge[cross]
    output = (graph.output_ptr[graph.edge_src] + graph.edge_src_output)[cross][data]
    pair_of_data = inverse.reshape(-1)[data]
    sent = np.unique(np.stack([pair_of_data, output], axis=1), axis=0)  # each tensor once per pair
    volume = np.bincount(sent[:, 0], weights=graph.output_bytes[sent[:, 1]], minlength=pairs.size)
    return pairs // graph.n_groups, pairs % graph.n_groups, np.rint(volume).astype(np.int64)


def edge_count(graph: OpGraph) -> int:
    """The number of edges of ``graph``'s group graph (the smallest ``pad_edges`` it fits)."""
    return int(group_edges(graph)[0].size)


def check_edge_slots(graph: OpGraph, edge_slots: int) -> None:
    """Raise ArgumentError when ``edge_slots`` is not an integer or ``graph``'s group graph has more edges."""
    check_number(edge_slots, "edge_slots", 0, integer=True, error=bad_argument)
    n_edges = edge_count(graph)
    if n_edges > edge_slots:
        raise ArgumentError(f"graph {graph.name!r} has {n_edges} group-graph edges, more than the env's "
                         f"{edge_slots} edge slots; make the env with pad_edges >= {n_edges}")


def edge_observation_fields(slots: int, edge_slots: int) -> dict[str, spaces.Box]:
    """The edge part of the observation space (see the module docstring)."""
    return {
        "edge_index": spaces.Box(low=0, high=max(slots - 1, 0), shape=(edge_slots, 2), dtype=np.int64),
        "edge_bytes": spaces.Box(low=0.0, high=1.0, shape=(edge_slots,), dtype=np.float32),
        "edge_mask": spaces.Box(low=0.0, high=1.0, shape=(edge_slots,), dtype=np.float32),
    }


def edge_features(graph: OpGraph, edge_slots: int) -> dict[str, np.ndarray]:
    """The read-only edge fields of ``graph`` padded to ``edge_slots`` rows."""
    check_edge_slots(graph, edge_slots)
    src, dst, volume = group_edges(graph)
    n_edges = src.size
    fields = {
        "edge_index": np.zeros((edge_slots, 2), np.int64),
        "edge_bytes": np.zeros(edge_slots, np.float32),
        "edge_mask": np.zeros(edge_slots, np.float32),
    }
    fields["edge_index"][:n_edges] = np.stack([src, dst], axis=1)
    fields["edge_bytes"][:n_edges] = np.minimum(np.log10(1.0 + volume) / BYTES_SCALE, 1.0)
    fields["edge_mask"][:n_edges] = 1.0
    for array in fields.values():
        array.setflags(write=False)
    return fields


def resolve_edge_slots(graph: OpGraph, pad_edges: int | None) -> int:
    """The env's edge rows: ``pad_edges``, or by default the first graph's edge count (at least 1,
    so every field keeps a non-empty shape)."""
    needed = max(edge_count(graph), 1)
    if pad_edges is None:
        return needed
    most = max(needed, MAX_EDGE_SLOTS)
    return check_number(pad_edges, "pad_edges", needed, most, integer=True, error=bad_argument,
                        rule=f"an integer >= the graph's {needed} group-graph edges and <= {most:,}")
