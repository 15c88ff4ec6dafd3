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

The edges are those of :class:`placement_env.GroupGraph` (:func:`placement_env.group_graph`, the one group graph
every method reads): directed, one per ordered pair of distinct groups (a, b) such that some op of a feeds some op
of b by a data or control edge, both (a, b) and (b, a) when the groups feed each other, control-only edges with no
bytes; a tensor counts once per destination group, however many ops of that group read it (what the simulator
moves when the two groups sit on different devices). ``neighbour_bytes`` counts the same way.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..cluster.checks import bad_argument, check_number
from ..errors import ArgumentError
from ..groupgraph import GroupGraph
from ..opgraph import OpGraph

# The most edge rows (``pad_edges``) beyond a graph's own edge count: each row is 24 bytes of observation.
MAX_EDGE_SLOTS = 1 << 20


def check_edge_slots(graph: OpGraph, groups: GroupGraph, edge_slots: int) -> None:
    """Raise ArgumentError when ``edge_slots`` is not an integer or ``graph``'s group graph ``groups`` has more
    edges."""
    check_number(edge_slots, "edge_slots", 0, integer=True, error=bad_argument)
    if groups.n_edges > edge_slots:
        raise ArgumentError(f"graph {graph.name!r} has {groups.n_edges} group-graph edges, more than the env's "
                            f"{edge_slots} edge slots; make the env with pad_edges >= {groups.n_edges}")


def edge_observation_fields(slots: int, edge_slots: int) -> dict[str, spaces.Box]:
    """The edge part of the observation space (see the module docstring)."""
    return {
        "edge_index": spaces.Box(low=0, high=max(slots - 1, 0), shape=(edge_slots, 2), dtype=np.int64),
        "edge_bytes": spaces.Box(low=0.0, high=1.0, shape=(edge_slots,), dtype=np.float32),
        "edge_mask": spaces.Box(low=0.0, high=1.0, shape=(edge_slots,), dtype=np.float32),
    }


def edge_features(graph: OpGraph, groups: GroupGraph, edge_slots: int) -> dict[str, np.ndarray]:
    """The read-only edge fields of ``graph``'s group graph ``groups`` padded to ``edge_slots`` rows."""
    check_edge_slots(graph, groups, edge_slots)
    n_edges = groups.n_edges
    fields = {
        "edge_index": np.zeros((edge_slots, 2), np.int64),
        "edge_bytes": np.zeros(edge_slots, np.float32),
        "edge_mask": np.zeros(edge_slots, np.float32),
    }
    fields["edge_index"][:n_edges] = np.stack([groups.src, groups.dst], axis=1)
    fields["edge_bytes"][:n_edges] = groups.log_bytes()
    fields["edge_mask"][:n_edges] = 1.0
    for array in fields.values():
        array.setflags(write=False)
    return fields


def resolve_edge_slots(groups: GroupGraph, pad_edges: int | None) -> int:
    """The env's edge rows: ``pad_edges``, or by default the first graph's edge count (at least 1,
    so every field keeps a non-empty shape)."""
    needed = max(groups.n_edges, 1)
    if pad_edges is None:
        return needed
    most = max(needed, MAX_EDGE_SLOTS)
    return check_number(pad_edges, "pad_edges", needed, most, integer=True, error=bad_argument,
                        rule=f"an integer >= the graph's {needed} group-graph edges and <= {most:,}")
