"""Ops that act outside a training step, which measured workers refuse to run.

The private network namespace of the local workers isolates the network only: a worker runs as
the user, sees the user's files and can start processes. So before a GraphDef goes to any TF
server (:meth:`~.driver.DriverProcess.measure`), :func:`refuse_side_effects` looks at every node,
including those of the graph's function library, and refuses op types that write or read host
files (checkpoints, summaries, datasets, ``WriteFile``, ``ReadFile``), print, run Python
(``PyFunc``), open network servers or connections (``Rpc*``, ``Debug*`` with its ``debug_urls``)
or end the worker process (``Abort``).

Reads are refused as well: a measured step is timed on random feeds (the graph's placeholders),
so it must depend on nothing but the graph; a read makes the step time depend on the host's disk
and brings host files into the step, whose values can come back in error messages.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ..errors import SideEffectOpError

WRITES, READS, PRINTS, PYTHON = "writes host files", "reads host files", "prints", "runs Python code"
NETWORK, EXIT = "opens network servers or connections", "ends the worker process"

_GROUPS: dict[str, tuple[str, ...]] = {
    WRITES: ("WriteFile", "Save", "SaveV2", "SaveSlices", "MergeV2Checkpoints", "DumpTensor",
             "CalibrationStatisticsSaver", "SaveDataset", "SaveDatasetV2", "DistributedSave", "DatasetToTFRecord",
             "ExperimentalDatasetToTFRecord", "SnapshotDataset", "SnapshotDatasetV2", "CacheDataset",
             "CacheDatasetV2", "CreateSummaryFileWriter", "CreateSummaryDbWriter", "WriteSummary",
             "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary", "WriteAudioSummary",
             "WriteGraphSummary", "WriteRawProtoSummary", "ImportEvent", "FlushSummaryWriter", "CloseSummaryWriter",
             "StatsAggregatorSetSummaryWriter", "FileSystemSetConfiguration"),
    READS: ("ReadFile", "MatchingFiles", "MatchingFilesDataset", "ExperimentalMatchingFilesDataset", "Restore",
            "RestoreV2", "RestoreSlice", "DTensorRestoreV2", "ImmutableConst", "InitializeTableFromTextFile",
            "InitializeTableFromTextFileV2", "GenerateVocabRemapping", "LoadAndRemapMatrix", "LoadDataset",
            "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset", "FixedLengthRecordDataset",
            "FixedLengthRecordDatasetV2", "CSVDataset", "CSVDatasetV2", "ExperimentalCSVDataset", "SqlDataset",
            "ExperimentalSqlDataset", "LMDBDataset", "ExperimentalLMDBDataset", "SnapshotDatasetReader",
            "SnapshotNestedDatasetReader", "SnapshotChunkDataset", "ListSnapshotChunksDataset", "TFRecordReader",
            "TFRecordReaderV2", "TextLineReader", "TextLineReaderV2", "WholeFileReader", "WholeFileReaderV2",
            "FixedLengthRecordReader", "FixedLengthRecordReaderV2", "LMDBReader"),
    PRINTS: ("Print", "PrintV2"),
    PYTHON: ("PyFunc", "PyFuncStateless", "EagerPyFunc"),
    NETWORK: ("RpcServer", "RpcServerRegister", "RpcServerStart", "RpcClient", "RpcCall", "DebugIdentity",
              "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount", "DebugNumericSummary", "DebugNumericSummaryV2"),
    EXIT: ("Abort",),
}
# op type -> what it does outside the step
SIDE_EFFECT_OPS: dict[str, str] = {op: effect for effect, ops in _GROUPS.items() for op in ops}


def _reads_descriptor_file(node: Any) -> bool:
    """DecodeProtoV2 / EncodeProto read their proto descriptors from a file unless ``descriptor_source``
    is ``local://`` (the default, the binary's own descriptors)."""
    source = node.attr["descriptor_source"].s if "descriptor_source" in node.attr else b"local://"
    return source not in (b"", b"local://")


# op type -> (effect, test of the node): ops that act outside the step only with some attributes
CONDITIONAL_OPS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "DecodeProtoV2": (READS, _reads_descriptor_file),
    "EncodeProto": (READS, _reads_descriptor_file),
}


@functools.lru_cache(maxsize=16)
def side_effect_nodes(graph_def: bytes) -> tuple[tuple[str, str, str], ...]:
    """(node, op type, what it does) of every node of the serialised GraphDef, and of the functions in
    its library (as ``function/node``), that acts outside the step; ``()`` if none."""
    from ..quiet_tf import import_tensorflow_quietly

    tf = import_tensorflow_quietly()
    parsed = tf.compat.v1.GraphDef.FromString(graph_def)
    nodes = [(node.name, node) for node in parsed.node]
    nodes += [(f"{function.signature.name}/{node.name}", node)
              for function in parsed.library.function for node in function.node_def]
    found = []
    for name, node in nodes:
        effect = SIDE_EFFECT_OPS.get(node.op)
        if effect is None and node.op in CONDITIONAL_OPS:
            conditional_effect, applies = CONDITIONAL_OPS[node.op]
            effect = conditional_effect if applies(node) else None
        if effect is not None:
            found.append((name, node.op, effect))
    return tuple(found)


def refuse_side_effects(graph_def: bytes, what: str = "the graph", shown: int = 8) -> None:
    """SideEffectOpError naming the first ``shown`` ops of ``graph_def`` that act outside the step, if any."""
    found = side_effect_nodes(bytes(graph_def))
    if not found:
        return
    listed = ", ".join(f"{name!r} ({op}: {effect})" for name, op, effect in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    raise SideEffectOpError(
        f"{what} cannot be run on measured workers: it has {len(found)} op(s) that act outside the training "
        f"step: {listed}{more}. The workers' private network namespace isolates the network only, not the "
        "host's files or processes, so such ops are refused. Remove them from the graph (savers, summaries, "
        "prints, file or dataset inputs: feed placeholders instead) or use runtime='sim'.", found)
