"""GraphDef -> OpGraph: the training step's ops, shapes, bytes, edges and hard co-location."""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.core.framework import graph_pb2, node_def_pb2

from ..errors import GraphImportError, NoTrainingOpError, UnknownShapeError
from ..opgraph import ANY_KIND, CPU_ONLY, MAX_RANK, OpGraph
from ..unionfind import UnionFind
from . import op_facts

TRAIN_STEP_NAME = "placement_env/train_step"
INIT_NAME = "placement_env/init"
_LOOP_BACK_EDGE_TYPES = ("NextIteration", "RefNextIteration")


def parse_graph_def(data: bytes) -> graph_pb2.GraphDef:
    """Parse a serialised GraphDef, with a clear error for anything else."""
    graph_def = graph_pb2.GraphDef()
    try:
        graph_def.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise GraphImportError(f"not a serialised GraphDef ({len(data)} bytes): {error}") from error
    if not graph_def.node:
        raise GraphImportError(f"the GraphDef ({len(data)} bytes) has no nodes; expected a TensorFlow training graph")
    return graph_def


def graph_def_to_opgraph(
    graph_def: graph_pb2.GraphDef,
    *,
    name: str,
    fetches: Sequence[str] | None = None,
    init_op: str | None = None,
    unknown_dim: int | None = None,
    meta: dict | None = None,
) -> OpGraph:
    """Turn a GraphDef holding a training step into an OpGraph (one group per co-location component).

    ``fetches`` are the op names whose run is one step; by default the sinks that lead to an
    optimizer update (``Apply*``/``ResourceApply*`` ops). ``init_op`` initialises the variables;
    by default one is made from the graph's own initialisers (and zero-fills for variables that
    have none). ``unknown_dim`` replaces unknown dimensions; without it they are an error.
    """
    graph_def = _with_function_calls_inlined(graph_def)
    nodes = _nodes_by_name(graph_def)
    fetch_names = _resolve_fetches(graph_def, nodes, fetches)
    graph_def = _add_train_step(graph_def, fetch_names)
    step_names = _ancestors(graph_def, [TRAIN_STEP_NAME])
    graph_def, init_name = _add_initializer(graph_def, step_names, init_op)

    graph = _import(graph_def)
    step_ops = _topological_order(graph, step_names)
    arrays = _op_arrays(step_ops, unknown_dim)
    feeds = tuple(
        {"name": op.name, "shape": _static_dims(op.outputs[0], unknown_dim), "dtype": op.outputs[0].dtype.name}
        for op in step_ops if op.type == "Placeholder"
    )
    return OpGraph(
        name=name,
        graph_def=graph_def.SerializeToString(deterministic=True),
        train_op=TRAIN_STEP_NAME,
        init_op=init_name,
        feeds=feeds,
        meta={"tf_version": tf.__version__, **(meta or {})},
        **arrays,
    )


# ---- which ops form the step ---------------------------------------------------------------------
def _input_op_name(input_name: str) -> str:
    return input_name.lstrip("^").split(":")[0]


def _nodes_by_name(graph_def) -> dict[str, node_def_pb2.NodeDef]:
    """The GraphDef's nodes by name, or a GraphImportError naming a repeated name or an input that names no
    node (every later pass follows inputs by name)."""
    nodes: dict[str, node_def_pb2.NodeDef] = {}
    for node in graph_def.node:
        if node.name in nodes:
            raise GraphImportError(f"the GraphDef has two nodes named {node.name!r}; node names must be unique")
        nodes[node.name] = node
    for node in graph_def.node:
        for name in node.input:
            if _input_op_name(name) not in nodes:
                raise GraphImportError(f"node {node.name!r} ({node.op}) has input {name!r}, but the GraphDef has no "
                                       f"node named {_input_op_name(name)!r}; every input must name a node of the "
                                       "graph (\"node\", \"node:output\" or \"^node\" for a control input)")
    return nodes


def _resolve_fetches(graph_def, nodes: dict, fetches: Sequence[str] | None) -> list[str]:
    if fetches is not None:
        names = [_input_op_name(f if isinstance(f, str) else f.name) for f in fetches]
        missing = [n for n in names if n not in nodes]
        if missing:
            raise NoTrainingOpError(f"fetches {missing} are not ops of the graph ({len(nodes)} ops)")
        if not names:
            raise NoTrainingOpError("fetches is empty: name the op(s) whose run is one training step")
        return names
    if TRAIN_STEP_NAME in nodes:  # a graph placement_env wrote (an export): its step is marked
        return [TRAIN_STEP_NAME]
    consumers: dict[str, list[str]] = {node.name: [] for node in graph_def.node}
    for node in graph_def.node:
        for i in node.input:
            consumers[_input_op_name(i)].append(node.name)
    updates = [node.name for node in graph_def.node if op_facts.is_optimizer_op(node.op)]
    if not updates:
        raise NoTrainingOpError(
            "no training op found: the graph has no optimizer update op (Apply*/ResourceApply*, "
            "e.g. from tf.compat.v1.train optimizers). Pass fetches=[<train op name>] to say which "
            "ops one training step runs."
        )
    after_update = _reachable(updates, consumers)
    return [node.name for node in graph_def.node if node.name in after_update and not consumers[node.name]]


def _ancestors(graph_def, roots: Iterable[str]) -> set[str]:
    inputs = {node.name: [_input_op_name(i) for i in node.input] for node in graph_def.node}
    return _reachable(roots, inputs)


def _reachable(roots: Iterable[str], neighbours: dict[str, list[str]]) -> set[str]:
    """Every name reachable from ``roots`` (included) through ``neighbours``."""
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(neighbours[name])
    return seen


def _add_train_step(graph_def, fetch_names: list[str]):
    if any(node.name == TRAIN_STEP_NAME for node in graph_def.node):
        if fetch_names == [TRAIN_STEP_NAME]:
            return graph_def
        raise GraphImportError(f"the graph already has an op named {TRAIN_STEP_NAME!r}; pass "
                               f"fetches=[{TRAIN_STEP_NAME!r}] or rename it")
    graph_def = _copy(graph_def)
    node = graph_def.node.add()
    node.name, node.op = TRAIN_STEP_NAME, "NoOp"
    node.input.extend(f"^{name}" for name in fetch_names)
    return graph_def


def _add_initializer(graph_def, step_names: set[str], init_op: str | None):
    """Return the GraphDef with an init op, and its name: the user's, or one built here."""
    nodes = {node.name: node for node in graph_def.node}
    if init_op is not None:
        if _input_op_name(init_op) not in nodes:
            raise GraphImportError(f"init_op {init_op!r} is not an op of the graph")
        return graph_def, _input_op_name(init_op)
    if INIT_NAME in nodes:  # a graph placement_env wrote: reuse its initialiser
        return graph_def, INIT_NAME
    variables = [n for n in step_names if nodes[n].op in op_facts.VARIABLE_OP_TYPES]
    assigns_by_variable: dict[str, list[str]] = {}
    for node in graph_def.node:
        if node.name not in step_names and node.op in ("Assign", "AssignVariableOp") and node.input:
            assigns_by_variable.setdefault(_input_op_name(node.input[0]), []).append(node.name)
    graph_def = _copy(graph_def)
    init = node_def_pb2.NodeDef(name=INIT_NAME, op="NoOp")
    for variable in sorted(variables):
        assigns = assigns_by_variable.get(variable) or [_add_zero_initializer(graph_def, nodes[variable])]
        init.input.extend(f"^{a}" for a in assigns)
    graph_def.node.append(init)
    return graph_def, INIT_NAME


def _add_zero_initializer(graph_def, variable: node_def_pb2.NodeDef) -> str:
    """Append ops that fill ``variable`` with zeros; return the assign op's name."""
    dtype = variable.attr["dtype"].type
    dims = [d.size for d in variable.attr["shape"].shape.dim]
    if any(d < 0 for d in dims):
        raise UnknownShapeError(f"variable {variable.name!r} has shape {dims} with unknown dimensions; cannot initialise it")
    prefix = f"{INIT_NAME}/{variable.name}"
    shape = graph_def.node.add(name=f"{prefix}/shape", op="Const")
    shape.attr["dtype"].type = tf.int32.as_datatype_enum
    shape.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array(dims, dtype=np.int32)))
    zero = graph_def.node.add(name=f"{prefix}/zero", op="Const")
    zero.attr["dtype"].type = dtype
    zero.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(0, dtype=tf.dtypes.as_dtype(dtype)))
    fill = graph_def.node.add(name=f"{prefix}/fill", op="Fill", input=[shape.name, zero.name])
    fill.attr["T"].type = dtype
    fill.attr["index_type"].type = tf.int32.as_datatype_enum
    is_resource = variable.op == "VarHandleOp"
    assign = graph_def.node.add(name=f"{prefix}/assign", op="AssignVariableOp" if is_resource else "Assign",
                                input=[variable.name, fill.name])
    assign.attr["dtype" if is_resource else "T"].type = dtype
    return assign.name


def _copy(graph_def):
    copy = graph_pb2.GraphDef()
    copy.CopyFrom(graph_def)
    return copy


def _with_function_calls_inlined(graph_def):
    """Inline function-call ops with grappler's function optimizer; other graphs pass unchanged."""
    calls = {f.signature.name for f in graph_def.library.function}
    if not any(node.op in calls or node.op.endswith("PartitionedCall") for node in graph_def.node):
        return graph_def
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    meta_graph = meta_graph_pb2.MetaGraphDef(graph_def=graph_def)
    sinks = [n.name for n in graph_def.node]
    meta_graph.collection_def["train_op"].node_list.value.extend(sinks)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers.append("function")
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    try:
        return tf_optimizer.OptimizeGraph(config, meta_graph)
    except Exception as error:  # grappler reports any failure as a generic TF error
        raise GraphImportError(f"could not inline the graph's function calls: {error}") from error


# ---- reading the step ------------------------------------------------------------------------------
def _import(graph_def) -> tf.Graph:
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
    except (ValueError, tf.errors.OpError) as error:
        raise GraphImportError(f"TensorFlow rejected the GraphDef: {error}") from error
    return graph


def _topological_order(graph: tf.Graph, step_names: set[str]) -> list[tf.Operation]:
    """The step's ops in topological order, ties broken by position in the GraphDef."""
    ops = [op for op in graph.get_operations() if op.name in step_names]
    position = {op.name: i for i, op in enumerate(ops)}
    consumers: dict[str, list[str]] = {op.name: [] for op in ops}
    indegree = dict.fromkeys(position, 0)
    for op in ops:
        for producer in _producers(op):
            if producer.name in position and producer.type not in _LOOP_BACK_EDGE_TYPES:
                consumers[producer.name].append(op.name)
                indegree[op.name] += 1
    ready = [position[name] for name, degree in indegree.items() if degree == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        op = ops[heapq.heappop(ready)]
        order.append(op)
        for consumer in consumers[op.name]:
            indegree[consumer] -= 1
            if indegree[consumer] == 0:
                heapq.heappush(ready, position[consumer])
    if len(order) != len(ops):
        stuck = sorted(name for name, degree in indegree.items() if degree > 0)[:5]
        raise GraphImportError(f"the training step has a cycle that is not a while loop (e.g. through {stuck})")
    return order


def _producers(op: tf.Operation) -> list[tf.Operation]:
    return [t.op for t in op.inputs] + list(op.control_inputs)


def _static_dims(tensor: tf.Tensor, unknown_dim: int | None) -> list[int] | None:
    """Dimensions of ``tensor``; None when some are unknown and no ``unknown_dim`` is given."""
    shape = tensor.shape
    if tensor.op.type in op_facts.AXIS_LIST_OP_TYPES and shape.rank == 1:
        unknown_dim = MAX_RANK
    if shape.rank is None:
        return None if unknown_dim is None else [unknown_dim]
    dims = shape.as_list()
    if any(d is None for d in dims):
        if unknown_dim is None:
            return None
        dims = [unknown_dim if d is None else d for d in dims]
    return dims


def _op_arrays(ops: list[tf.Operation], unknown_dim: int | None) -> dict[str, np.ndarray]:
    index = {op.name: i for i, op in enumerate(ops)}
    n = len(ops)
    flops = np.zeros(n)
    persistent = np.zeros(n, dtype=np.int64)
    mask = np.full(n, ANY_KIND, dtype=np.uint8)
    output_ptr = np.zeros(n + 1, dtype=np.int64)
    dims_rows, dtypes, out_bytes = [], [], []
    unknown: list[str] = []
    colocation = UnionFind(n)
    class_owner: dict[str, int] = {}
    edges: dict[tuple[int, int, int], int] = {}

    for i, op in enumerate(ops):
        shapes = []
        for t in op.outputs:
            dims = _static_dims(t, unknown_dim)
            if dims is None:
                unknown.append(f"{op.name}:{t.value_index} {t.shape}")
                dims = []
            if len(dims) > MAX_RANK:
                raise GraphImportError(f"{t.name} has rank {len(dims)}; at most {MAX_RANK} is supported")
            shapes.append(dims)
            dims_rows.append(dims + [-1] * (MAX_RANK - len(dims)))
            dtypes.append(t.dtype.base_dtype.name)
            out_bytes.append(int(np.prod(dims, dtype=np.int64)) * op_facts.element_bytes(t.dtype))
        output_ptr[i + 1] = output_ptr[i] + len(op.outputs)
        input_shapes = [_static_dims(t, unknown_dim) or [] for t in op.inputs]
        flops[i] = op_facts.estimate_flops(op.type, shapes, input_shapes, _scalar_attrs(op))
        persistent[i] = _variable_bytes(op)
        if op.type in op_facts.CPU_ONLY_OP_TYPES or any(
            t.dtype.base_dtype == tf.string for t in list(op.inputs) + list(op.outputs)
        ):
            mask[i] = CPU_ONLY
        for t in op.inputs:
            j = index.get(t.op.name)
            if j is None or t.op.type in _LOOP_BACK_EDGE_TYPES:
                continue
            edges[(j, i, t.value_index)] = out_bytes[output_ptr[j] + t.value_index]
            if t.dtype.base_dtype == tf.resource or t.dtype._is_ref_dtype:
                colocation.union(i, j)  # TF places resource and ref consumers with the variable
        for producer in op.control_inputs:
            j = index.get(producer.name)
            if j is not None and producer.type not in _LOOP_BACK_EDGE_TYPES:
                edges.setdefault((j, i, -1), 0)
        for target in _colocation_targets(op):
            owner = index[target] if target in index else class_owner.setdefault(target, i)
            colocation.union(i, owner)

    if unknown:
        raise UnknownShapeError(
            f"{len(unknown)} op outputs of the training step have unknown shapes, so their sizes are unknown, "
            f"e.g. {unknown[:5]}. Give every input a static shape (e.g. a fixed batch size) or pass "
            f"unknown_dim=<int> to assume that size for every unknown dimension."
        )
    key = np.array(sorted(edges), dtype=np.int64).reshape(-1, 3)
    component = colocation.labels()
    return {
        "op_names": np.array([op.name for op in ops]),
        "op_types": np.array([op.type for op in ops]),
        "flops": flops,
        "persistent_bytes": persistent,
        "device_mask": mask,
        "colocation": component,
        "group": component,
        "output_ptr": output_ptr,
        "output_dims": np.array(dims_rows, dtype=np.int64).reshape(-1, MAX_RANK),
        "output_dtypes": np.array(dtypes, dtype=np.str_),
        "output_bytes": np.array(out_bytes, dtype=np.int64),
        "edge_src": key[:, 0],
        "edge_dst": key[:, 1],
        "edge_src_output": key[:, 2],
        "edge_bytes": np.array([edges[tuple(k)] for k in key.tolist()], dtype=np.int64),
    }


def _colocation_targets(op: tf.Operation) -> list[str]:
    try:
        classes = op.get_attr("_class")
    except ValueError:
        return []
    return [c.decode()[len("loc:@"):] for c in classes if c.startswith(b"loc:@")]


def _scalar_attrs(op: tf.Operation) -> dict:
    attrs = {}
    for key in ("transpose_a", "adj_x"):
        try:
            attrs[key] = bool(op.get_attr(key))
        except ValueError:
            pass
    return attrs


def _variable_bytes(op: tf.Operation) -> int:
    if op.type not in op_facts.VARIABLE_OP_TYPES:
        return 0
    dtype = tf.dtypes.as_dtype(op.get_attr("dtype"))
    shape = tf.TensorShape(op.get_attr("shape"))
    if not shape.is_fully_defined():
        raise UnknownShapeError(f"variable {op.name!r} has shape {shape}; its size must be known")
    return int(np.prod(shape.as_list(), dtype=np.int64)) * dtype.size
