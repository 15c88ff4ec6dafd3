"""TensorFlow graphs out: a placement written back as the ``device`` of every node.

* :func:`placed_graph_def` returns the OpGraph's own GraphDef (step plus initialisers) with every
  node pinned to a device of the cluster, as deterministic serialised bytes: the graph the measured
  runtime runs (it pins ops the same way, ``Device.tf_device`` per op of a group).
* :func:`export_placed_graph` writes it to a ``.pb`` (binary) or ``.pbtxt`` (text) file.
* :func:`apply_placement` puts a placement on the user's own graph in memory: a ``tf.Graph``
  (changed in place) or a ``GraphDef`` (a changed copy is returned).

Nodes of the GraphDef that are not ops of the OpGraph (variable initialisers, ``IsInitialized``
checks, the init op, constants used only by them) are placed so that TF's own co-location rules
hold, and otherwise on the host:

1. a node with a ``_class`` co-location attribute (``loc:@X``) goes where ``X`` goes;
2. a node that consumes a resource handle or a reference (``float32_ref``) output of another node,
   or an output of a variable op, goes where that producer goes (TF's placer requires this too);
3. both rules are applied transitively; a set of nodes linked this way that contains an op of the
   OpGraph goes to that op's device (the ops of the OpGraph in one such set always share a group,
   because grouping follows the same rules);
4. everything else goes to the cluster's first CPU device (its device 0 if it has no CPU).

``_class`` attributes are kept: TF requires co-located ops on one device, and the placement
puts them there. Nodes inside the GraphDef's function library are not touched (TF places a
function's body with its call op).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2

from ..errors import ArgumentError, GraphImportError, GraphMismatchError
from ..opgraph import OpGraph
from ..output_paths import check_output_file
from ..placement import check_placement
from ..unionfind import UnionFind
from . import op_facts

if TYPE_CHECKING:
    from ..cluster import Cluster

__all__ = ["placed_graph_def", "export_placed_graph", "apply_placement", "op_tf_devices", "GraphMismatchError",
           "EXPORT_SUFFIXES"]

EXPORT_SUFFIXES = (".pb", ".pbtxt")
_IMPORTER_PREFIX = "placement_env/"  # ops the importer adds (train step, init); not in a user's graph


def op_tf_devices(graph: OpGraph, cluster: Cluster, placement: Any) -> np.ndarray:
    """The TF device string of every op of ``graph`` (object array, op order) under ``placement``."""
    checked = check_placement(graph, cluster, placement)
    tf_devices = np.array([d.tf_device for d in cluster.devices], dtype=object)
    return tf_devices[checked[graph.group]]


def _parse(graph: OpGraph) -> graph_pb2.GraphDef:
    if not graph.graph_def:
        raise ValueError(f"OpGraph {graph.name!r} carries no GraphDef, so there is no TF graph to place")
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(graph.graph_def)
    return graph_def


def _split_input(name: str) -> tuple[str, int]:
    """(producer node, output index) of a GraphDef input; output -1 for a control input."""
    if name.startswith("^"):
        return name[1:], -1
    node, _, slot = name.partition(":")
    return node, int(slot) if slot.isdigit() else 0


def _pins_to_producer(graph: OpGraph, index: dict[str, int], producer, slot: int) -> bool:
    """Whether consuming output ``slot`` of ``producer`` (a NodeDef) forces co-location with it."""
    if producer.op in op_facts.VARIABLE_OP_TYPES:
        return True
    i = index.get(producer.name)
    if i is None or i >= graph.n_ops:
        return False
    first, stop = int(graph.output_ptr[i]), int(graph.output_ptr[i + 1])
    if not 0 <= slot < stop - first:
        return False
    dtype = str(graph.output_dtypes[first + slot])
    return dtype == "resource" or dtype.endswith("_ref")


def _node_devices(graph: OpGraph, cluster: Cluster, placement: Any, graph_def: graph_pb2.GraphDef) -> dict[str, str]:
    """TF device of every node of ``graph_def`` (see the module docstring for non-OpGraph nodes)."""
    per_op = op_tf_devices(graph, cluster, placement)
    names = graph.op_names.tolist()
    index = {name: i for i, name in enumerate(names)}  # OpGraph ops first, so they root their sets
    nodes = {node.name: node for node in graph_def.node}
    for node in graph_def.node:
        if node.name not in index:
            index[node.name] = len(index)
    sets = UnionFind(len(index))
    for node in graph_def.node:
        me = index[node.name]
        if me < graph.n_ops:
            continue  # OpGraph ops are placed by their group; rules only pull the other nodes in
        if "_class" in node.attr:
            for target in node.attr["_class"].list.s:
                target = target.decode()
                if target.startswith("loc:@") and target[5:] in index:
                    sets.union(me, index[target[5:]])
        for name in node.input:
            producer, slot = _split_input(name)
            if slot >= 0 and producer in nodes and _pins_to_producer(graph, index, nodes[producer], slot):
                sets.union(me, index[producer])
    cpus = [d for d in cluster.devices if d.kind == "CPU"]
    host = (cpus[0] if cpus else cluster.devices[0]).tf_device
    devices = {}
    for name, i in index.items():
        if name not in nodes:
            continue  # an OpGraph op missing from its own GraphDef cannot happen; be lenient
        root = i if i < graph.n_ops else sets.find(i)
        devices[name] = per_op[root] if root < graph.n_ops else host
    return devices


def placed_graph_def(graph: OpGraph, cluster: Cluster, placement: Any) -> bytes:
    """``graph.graph_def`` with every node's ``device`` set from ``placement`` (deterministic bytes).

    Ops of the OpGraph get ``cluster.devices[placement[group]].tf_device``; the other nodes follow
    the rules of the module docstring (co-located with their variable, else on the host CPU).
    """
    graph_def = _parse(graph)
    devices = _node_devices(graph, cluster, placement, graph_def)
    for node in graph_def.node:
        node.device = devices[node.name]
    return graph_def.SerializeToString(deterministic=True)


def export_placed_graph(graph: OpGraph, cluster: Cluster, placement: Any, path: str | os.PathLike) -> Path:
    """Write :func:`placed_graph_def` to ``path``: ``.pb`` binary, ``.pbtxt`` text. Returns the path. A path
    that cannot be written (a folder, a link, under a file) is an OutputPathError before any work."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"path={path!r:.200}; expected a str or os.PathLike ending in .pb or .pbtxt")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in EXPORT_SUFFIXES:
        raise ArgumentError(f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
                            f"use one of {', '.join(EXPORT_SUFFIXES)} (binary or text GraphDef)")
    check_output_file(path, "path")
    data = placed_graph_def(graph, cluster, placement)
    if suffix == ".pbtxt":
        data = text_format.MessageToString(graph_pb2.GraphDef.FromString(data)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _match(graph: OpGraph, types: dict[str, str], what: str) -> np.ndarray:
    """Indices of the OpGraph ops found in the target (same name and op type).

    GraphMismatchError when fewer than half of the OpGraph's ops are found (a different graph
    that happens to share a few common names such as ``gradients/Shape`` is still the wrong
    graph); a warning when some are missing.
    """
    names = graph.op_names.tolist()
    present = np.array([types.get(n) == t for n, t in zip(names, graph.op_types.tolist())], dtype=bool)
    own = np.array([not n.startswith(_IMPORTER_PREFIX) for n in names], dtype=bool)  # not added on import
    found, wanted = int(present[own].sum()), int(own.sum())
    if not present.any() or 2 * found < wanted:
        example = names[int(np.flatnonzero(own & ~present)[0])] if (own & ~present).any() else names[0]
        raise GraphMismatchError(
            f"only {found} of the {wanted} ops of OpGraph {graph.name!r} are in the target {what} "
            f"({len(types)} ops) with the same name and type (e.g. {example!r} is missing): "
            "is this the graph the OpGraph was imported from?")
    missing = [names[i] for i in np.flatnonzero(own & ~present)]
    if missing:
        warnings.warn(
            f"{len(missing)} of the {wanted} ops of OpGraph {graph.name!r} are not in the target {what} "
            f"(e.g. {', '.join(repr(m) for m in missing[:3])}); the ops found are placed, the rest is unchanged",
            stacklevel=3)
    return np.flatnonzero(present)


def apply_placement(target: Any, graph: OpGraph, cluster: Cluster, placement: Any) -> Any:
    """Set the device of every op of ``target`` that is an op of ``graph`` to its placed TF device.

    ``target`` is a ``tf.Graph`` (changed in place and returned; sessions made before keep their
    old placement), a ``GraphDef`` (a placed copy is returned) or serialised GraphDef bytes (placed
    bytes are returned). Ops of ``target`` that are not in ``graph`` keep their device. Ops are
    matched by name and type; GraphMismatchError if fewer than half of the OpGraph's ops match
    (a different graph), a warning if some are missing.
    """
    devices = op_tf_devices(graph, cluster, placement)
    names = graph.op_names.tolist()
    if isinstance(target, tf.Graph):
        ops = {op.name: op for op in target.get_operations()}
        for i in _match(graph, {name: op.type for name, op in ops.items()}, "tf.Graph"):
            ops[names[i]]._set_device(devices[i])
        return target
    if isinstance(target, (bytes, bytearray)):
        graph_def = graph_pb2.GraphDef()
        try:
            graph_def.ParseFromString(bytes(target))
        except Exception as error:  # protobuf raises DecodeError or RuntimeError by backend
            raise GraphImportError(f"apply_placement: the bytes are not a serialised GraphDef: {error}") from error
        return apply_placement(graph_def, graph, cluster, placement).SerializeToString(deterministic=True)
    if isinstance(target, graph_pb2.GraphDef):
        placed = graph_pb2.GraphDef()
        placed.CopyFrom(target)
        by_name = {node.name: node for node in placed.node}
        for i in _match(graph, {name: node.op for name, node in by_name.items()}, "GraphDef"):
            by_name[names[i]].device = devices[i]
        return placed
    raise TypeError(f"apply_placement cannot place a {type(target).__name__}; "
                    "target must be a tf.Graph, a tf.compat.v1.GraphDef or serialised GraphDef bytes")
