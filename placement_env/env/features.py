"""Fixed-size, normalised float32 features of a graph's groups and a cluster's devices.

Everything the policy sees about a graph is computed once per (graph, cluster, slots) here and
padded to ``slots`` groups, so observation spaces stay the same across graphs of up to ``slots``
groups. Field by field (S = slots, D = devices, K = NEIGHBOURS, O = OUTPUTS):

``group_mask`` (S,)        1 for a real group, 0 for padding.
``op_types`` (S, C)        fraction of the group's ops in each of the C ``OP_CATEGORIES``.
``output_shapes`` (S, O*4) the O largest tensors leaving the group, up to 4 dims each, as
                           log2(1 + dim) / 16; -1 where there is no tensor or dimension.
``neighbours`` (S, 2K)     the K largest-traffic predecessor and K successor groups (groups that send it or
                           receive from it a tensor, on the edges of :class:`placement_env.GroupGraph`), as
                           (index + 1) / S; 0 where there is none.
``neighbour_bytes`` (S, 2K) bytes those neighbours send it / it sends them, log10(1 + bytes) / 12, each tensor
                           counted once per receiving group (as the group graph counts).
``compute`` (S, 2)         the group's compute time on the first CPU and first GPU of the cluster,
                           as a fraction of the whole graph's time there (0 when the kind is absent).
``memory`` (S, 2)          resident bytes (variables, slots) and bytes the group's ops output, as
                           a fraction of the largest device memory, clipped to 1.
``position`` (S,)          the group's index / S (groups are numbered in topological order).
``devices`` (D, 5)         per device: is CPU, is GPU, peak FLOP/s and memory bandwidth relative to
                           the fastest device, memory relative to the largest.

With ``edge_slots`` (the env's ``graph_observation=True``), the group graph's padded edge list
joins them: ``edge_index`` (int64), ``edge_bytes`` and ``edge_mask``, described in
:mod:`placement_env.env.group_graph`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from ..cluster import Cluster
from ..cluster.checks import bad_argument, check_number
from ..errors import ArgumentError
from ..groupgraph import group_graph
from ..opgraph import OpGraph
from .group_graph import edge_features, edge_observation_fields

NEIGHBOURS = 6  # per direction, as in the hierarchical placer (6 in + 6 out)
# The most group slots (the env's ``pad_to``) beyond a graph's own groups: the observation holds a few dozen
# floats per slot (and slots x devices in sequential and improve modes).
MAX_SLOTS = 1 << 16
OUTPUTS = 4
MAX_DIMS = 4

# Op categories by TF op type (first match wins); "other" catches the rest.
OP_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("matmul", r"^(Batch)?MatMul|^Einsum|^SparseMatMul"),
    ("conv", r"^(Depthwise)?Conv[123]D|^Conv2DBackprop|^Conv3DBackprop"),
    ("pool", r"Pool"),
    ("norm", r"Norm"),
    ("activation", r"^(Relu|Relu6|Elu|Selu|Sigmoid|Tanh|Softmax|LogSoftmax|Softplus|Gelu|LeakyRelu)"),
    ("loss", r"CrossEntropy"),
    ("reduction", r"^(Sum|Mean|Max|Min|Prod|ArgMax|ArgMin|BiasAddGrad|L2Loss|All|Any)$"),
    ("elementwise", r"^(Add|AddV2|AddN|Sub|Mul|RealDiv|Div|Neg|Square|Sqrt|Rsqrt|Exp|Log|Maximum|Minimum|Pow|"
                    r"BiasAdd|Reciprocal|SquaredDifference|Abs|Sign|FloorMod|FloorDiv|Greater|Less|Equal|"
                    r"GreaterEqual|LessEqual|NotEqual|LogicalAnd|LogicalOr|LogicalNot|Cast|Select|SelectV2)"),
    ("gather_scatter", r"Gather|Scatter|SegmentSum|OneHot|Embedding"),
    ("data_movement", r"^(Reshape|Slice|StridedSlice|StridedSliceGrad|Concat|ConcatV2|ConcatOffset|Split|SplitV|"
                      r"Pack|Unpack|Tile|Transpose|ExpandDims|Squeeze|Shape|ShapeN|Size|Rank|Fill|Pad|PadV2|"
                      r"ZerosLike|OnesLike|BroadcastTo|BroadcastGradientArgs|Reverse|ReverseV2)"),
    ("optimizer", r"^(Resource)?Apply|^AssignSub|^AssignAdd"),
    ("variable", r"Var|^Assign|^ReadVariableOp$"),
    ("random", r"^Random|^TruncatedNormal|^Multinomial"),
    ("control", r"^(NoOp|Identity|IdentityN|Const|Placeholder|PlaceholderWithDefault|StopGradient)$"),
)
CATEGORY_NAMES: tuple[str, ...] = tuple(name for name, _ in OP_CATEGORIES) + ("other",)
_PATTERNS = tuple(re.compile(pattern) for _, pattern in OP_CATEGORIES)
DEVICE_FEATURES = 5


def op_category(op_type: str) -> int:
    """Index into ``CATEGORY_NAMES`` of a TF op type."""
    return next((k for k, pattern in enumerate(_PATTERNS) if pattern.search(op_type)), len(_PATTERNS))


def observation_fields(slots: int, n_devices: int, edge_slots: int | None = None) -> dict[str, spaces.Box]:
    """The graph part of the observation space: one Box per field (see the module docstring); the
    edge fields too when ``edge_slots`` is given."""
    def box(shape: tuple[int, ...], low: float = 0.0, high: float = 1.0) -> spaces.Box:
        return spaces.Box(low=low, high=high, shape=shape, dtype=np.float32)

    fields = {
        "group_mask": box((slots,)),
        "op_types": box((slots, len(CATEGORY_NAMES))),
        "output_shapes": box((slots, OUTPUTS * MAX_DIMS), low=-1.0),
        "neighbours": box((slots, 2 * NEIGHBOURS)),
        "neighbour_bytes": box((slots, 2 * NEIGHBOURS)),
        "compute": box((slots, 2)),
        "memory": box((slots, 2)),
        "position": box((slots,)),
        "devices": box((n_devices, DEVICE_FEATURES)),
    }
    if edge_slots is not None:
        fields.update(edge_observation_fields(slots, edge_slots))
    return fields


@dataclass(frozen=True, eq=False)
class GraphFeatures:
    """The padded feature arrays of one graph on one cluster (read-only)."""

    fields: dict[str, np.ndarray]
    slots: int
    n_groups: int


def _top_neighbours(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """For every group (src side), the NEIGHBOURS dst groups with the most bytes, and those bytes (each (src, dst)
    pair at most once in the input)."""
    index = np.full((n_groups, NEIGHBOURS), -1, np.int64)
    volume = np.zeros((n_groups, NEIGHBOURS))
    if src.size == 0:
        return index, volume
    order = np.lexsort((dst, -weight, src))  # by source, then most bytes, then index
    src, dst, weight = src[order], dst[order], weight[order]
    start = np.searchsorted(src, np.arange(n_groups))
    rank = np.arange(src.size) - start[src]
    keep = rank < NEIGHBOURS
    index[src[keep], rank[keep]] = dst[keep]
    volume[src[keep], rank[keep]] = weight[keep]
    return index, volume


def _output_shapes(graph: OpGraph) -> np.ndarray:
    """[n_groups, OUTPUTS * MAX_DIMS]: encoded shapes of the largest tensors leaving each group."""
    n_groups = graph.n_groups
    result = np.full((n_groups, OUTPUTS, MAX_DIMS), -1.0)
    data = ~graph.is_control_edge
    src, dst = graph.edge_src[data], graph.edge_dst[data]
    leaving = graph.group[src] != graph.group[dst]
    outputs = np.unique(graph.output_ptr[src[leaving]] + graph.edge_src_output[data][leaving])
    if outputs.size:
        producer = np.searchsorted(graph.output_ptr, outputs, side="right") - 1
        groups = graph.group[producer]
        order = np.lexsort((outputs, -graph.output_bytes[outputs], groups))
        outputs, groups = outputs[order], groups[order]
        start = np.searchsorted(groups, np.arange(n_groups))
        rank = np.arange(groups.size) - start[groups]
        keep = rank < OUTPUTS
        dims = graph.output_dims[outputs[keep], :MAX_DIMS].astype(np.float64)
        encoded = np.where(dims >= 0, np.log2(1.0 + np.maximum(dims, 0)) / 16.0, -1.0)
        result[groups[keep], rank[keep]] = np.minimum(encoded, 1.0)
    return result.reshape(n_groups, OUTPUTS * MAX_DIMS)


def graph_features(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, slots: int,
                   edge_slots: int | None = None) -> GraphFeatures:
    """Features of ``graph``'s groups on ``cluster`` padded to ``slots`` (>= graph.n_groups), and its
    group graph's edges padded to ``edge_slots`` rows when given. ``op_seconds``: finite seconds >= 0 of
    every op on every device of the cluster, [n_ops, n_devices]."""
    n_groups = graph.n_groups
    most = max(n_groups, MAX_SLOTS)
    slots = check_number(slots, "slots", n_groups, most, integer=True, error=bad_argument,
                         rule=f"an integer >= graph {graph.name!r}'s {n_groups} groups and <= {most:,} (make the env "
                              "with a larger pad_to or a smaller max_groups)")
    op_seconds = np.asarray(op_seconds)
    if op_seconds.shape != (graph.n_ops, cluster.n_devices) or not np.issubdtype(op_seconds.dtype, np.number) \
            or not np.all(np.isfinite(op_seconds) & (op_seconds >= 0)):
        raise ArgumentError(f"op_seconds: {op_seconds.dtype} array of shape {op_seconds.shape}; expected finite "
                            f"seconds >= 0 of shape (n_ops, n_devices) = ({graph.n_ops}, {cluster.n_devices})")
    groups = group_graph(graph, cluster, op_seconds)
    group = graph.group
    categories = np.array([op_category(t) for t in graph.op_types.tolist()], np.int64)
    histogram = np.zeros((n_groups, len(CATEGORY_NAMES)))
    np.add.at(histogram, (group, categories), 1.0)
    histogram /= np.maximum(histogram.sum(axis=1, keepdims=True), 1.0)

    data = groups.data  # the edges some tensor crosses (not dependencies only)
    g_src, g_dst, weight = groups.src[data], groups.dst[data], groups.bytes[data].astype(np.float64)
    out_index, out_bytes = _top_neighbours(g_src, g_dst, weight, n_groups)
    in_index, in_bytes = _top_neighbours(g_dst, g_src, weight, n_groups)
    neighbours = np.concatenate([in_index, out_index], axis=1)
    neighbour_bytes = np.concatenate([in_bytes, out_bytes], axis=1)

    compute = np.zeros((n_groups, 2))
    for column, kind in enumerate(("CPU", "GPU")):
        per_group = groups.kind_seconds(kind)
        if per_group is not None:
            compute[:, column] = per_group / max(per_group.sum(), 1e-300)
    largest_memory = float(cluster.memory_bytes.max())
    memory = np.stack([groups.resident_bytes / largest_memory, groups.output_bytes / largest_memory], axis=1)

    def pad(array: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((slots, *array.shape[1:]), fill, np.float32)
        out[:n_groups] = array
        return out

    devices = np.stack([
        (cluster.kinds == 0), (cluster.kinds == 1),
        cluster.peak_flops / cluster.peak_flops.max(),
        cluster.memory_bandwidth / cluster.memory_bandwidth.max(),
        cluster.memory_bytes / cluster.memory_bytes.max(),
    ], axis=1).astype(np.float32)
    fields = {
        "group_mask": pad(np.ones(n_groups)),
        "op_types": pad(histogram),
        "output_shapes": pad(_output_shapes(graph), fill=-1.0),
        "neighbours": pad(np.where(neighbours >= 0, (neighbours + 1) / slots, 0.0)),
        "neighbour_bytes": pad(np.minimum(np.log10(1.0 + neighbour_bytes) / 12.0, 1.0)),
        "compute": pad(compute),
        "memory": pad(np.minimum(memory, 1.0)),
        "position": pad(np.arange(n_groups) / slots),
        "devices": devices,
    }
    for array in fields.values():
        array.setflags(write=False)
    if edge_slots is not None:
        fields.update(edge_features(graph, groups, edge_slots))
    return GraphFeatures(fields=fields, slots=slots, n_groups=n_groups)
