"""What placement needs to know about a TF op type: kernels per device kind, sizes and FLOPs."""
from __future__ import annotations

import math
from collections.abc import Sequence

# Op types TensorFlow registers no GPU kernel for (string handling, I/O, queues, tables,
# summaries, host callbacks). Ops with a string input or output are CPU-only as well.
CPU_ONLY_OP_TYPES = frozenset({
    "Assert", "Print", "PrintV2", "PyFunc", "PyFuncStateless", "EagerPyFunc",
    "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec",
    "ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummaryV2", "TensorSummaryV2",
    "MergeSummary", "WriteScalarSummary", "WriteHistogramSummary", "WriteSummary",
    "IteratorGetNext", "IteratorV2", "AnonymousIteratorV3", "MakeIterator", "OneShotIterator",
    "DecodeJpeg", "DecodePng", "DecodeRaw", "DecodeCSV", "ParseExample", "ParseExampleV2",
    "ParseSingleExample", "ReaderReadV2", "FIFOQueueV2", "RandomShuffleQueueV2",
    "PaddingFIFOQueueV2", "QueueDequeueV2", "QueueDequeueManyV2", "QueueEnqueueV2",
    "HashTableV2", "MutableHashTableV2", "LookupTableFindV2", "LookupTableImportV2",
    "InitializeTableV2", "NonMaxSuppression", "NonMaxSuppressionV2",
})

# Op types whose run is one training update of a variable (the evidence that a graph trains).
OPTIMIZER_OP_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")

# Ops that own a variable's storage; their persistent bytes are the variable's size.
VARIABLE_OP_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable", "TemporaryVariable"})

# Ops whose outputs list axes of another tensor: data-dependent length, but never more than that
# tensor's rank, so an unknown dimension of theirs is bounded by MAX_RANK (documented fallback).
AXIS_LIST_OP_TYPES = frozenset({"BroadcastGradientArgs"})

# Bytes per element for dtypes whose element size is not fixed (documented estimate).
OPAQUE_ELEMENT_BYTES = 64


def element_bytes(dtype) -> int:
    """Bytes of one element of a tf.DType: 0 for resource handles, an estimate for strings/variants."""
    base = dtype.base_dtype
    if base.name == "resource":
        return 0
    if base.name in ("string", "variant"):
        return OPAQUE_ELEMENT_BYTES
    return base.size


def is_optimizer_op(op_type: str) -> bool:
    return op_type.startswith(OPTIMIZER_OP_PREFIXES)


_CONVOLUTIONS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
                 "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")


def estimate_flops(op_type: str, output_shapes: Sequence[Sequence[int]], input_shapes: Sequence[Sequence[int]],
                   attrs: dict) -> float:
    """A coarse FLOP count for balancing groups: matmuls and convolutions exactly, the rest by size.

    Shapes are fully known lists of ints. Runtime costs come from TF's own cost model later; this
    number only weighs ops against each other while grouping.
    """
    out_elems = sum(math.prod(s) for s in output_shapes)
    if op_type in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3") and input_shapes:
        a = input_shapes[0]
        if len(a) >= 2:
            adjoint = attrs.get("transpose_a", attrs.get("adj_x", False))
            inner = a[-2] if adjoint else a[-1]
            return 2.0 * out_elems * inner
    if op_type in _CONVOLUTIONS:
        # A convolution and its two gradients cost 2 * |dy| * kh * kw * c_in (c_in = 1 for a depthwise one,
        # whose filter is [kh, kw, channels, multiplier]); the filter shape is an input or the output.
        filter_shape = output_shapes[0] if op_type.endswith("BackpropFilter") else (
            input_shapes[1] if len(input_shapes) > 1 else ())
        dy_shape = output_shapes[0] if op_type in ("Conv2D", "DepthwiseConv2dNative") else input_shapes[-1]
        if len(filter_shape) == 4:
            kh, kw, c_in = filter_shape[0], filter_shape[1], filter_shape[2]
            if op_type.startswith("DepthwiseConv2dNative"):
                c_in = 1
            return 2.0 * math.prod(dy_shape) * kh * kw * c_in
    in_elems = max((math.prod(s) for s in input_shapes), default=0)
    return float(max(out_elems, in_elems))
