"""TF2 graphs -> self-contained GraphDefs: lift captured variables, build Keras training steps."""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from ..errors import GraphImportError, UnknownShapeError

# Captured variables up to this size keep their value in the lifted graph; larger ones are
# zero-filled by the importer's initialiser (the value does not change a step's cost).
COPIED_VALUE_BYTES = 1 << 20


def concrete_function_graph_def(function) -> tuple[graph_pb2.GraphDef, list[str]]:
    """GraphDef of a ConcreteFunction with its captures made in-graph, and the ops one call runs.

    A TF2 function sees each variable as a resource placeholder fed from outside; each becomes a
    ``VarHandleOp`` of the variable's dtype and shape (plus an initialiser for small values), and
    captured constants become ``Const`` ops, so the GraphDef runs on its own with any placement.
    """
    graph = function.graph
    graph_def = graph.as_graph_def()
    nodes = {node.name: node for node in graph_def.node}
    variables = {v.handle._id: v for v in graph.variables}
    for external, internal in graph.captures:
        node = nodes[internal.op.name]
        if external.dtype == tf.resource:
            variable = variables.get(getattr(external, "_id", None))
            if variable is None:
                raise GraphImportError(
                    f"captured resource {internal.op.name!r} is not a tf.Variable (a lookup table, iterator or "
                    "dataset?); only variables can be lifted into the graph"
                )
            _make_variable(graph_def, node, variable)
        else:
            _make_constant(node, external)
    fetches = [t.op.name for t in function.outputs] + [op.name for op in graph.control_outputs]
    if not fetches:
        raise GraphImportError(f"function {function.name!r} has no outputs and no stateful ops: nothing to run")
    return graph_def, fetches


def _make_variable(graph_def, node, variable) -> None:
    shape, dtype = variable.shape, variable.dtype.base_dtype
    if not shape.is_fully_defined():
        raise UnknownShapeError(f"captured variable {variable.name!r} has shape {shape}; its size must be known")
    node.op = "VarHandleOp"
    node.ClearField("attr")
    node.attr["dtype"].type = dtype.as_datatype_enum
    node.attr["shape"].shape.CopyFrom(shape.as_proto())
    node.attr["shared_name"].s = node.name.encode()
    node.attr["container"].s = b""
    if shape.num_elements() * dtype.size <= COPIED_VALUE_BYTES:
        value = graph_def.node.add(name=f"{node.name}/lifted_value", op="Const")
        value.attr["dtype"].type = dtype.as_datatype_enum
        value.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(variable.numpy()))
        assign = graph_def.node.add(name=f"{node.name}/lifted_assign", op="AssignVariableOp",
                                    input=[node.name, value.name])
        assign.attr["dtype"].type = dtype.as_datatype_enum


def _make_constant(node, value) -> None:
    array = np.asarray(value)
    node.op = "Const"
    node.ClearField("attr")
    node.attr["dtype"].type = tf.dtypes.as_dtype(value.dtype).as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(array))


def keras_training_graph_def(
    model,
    input_spec: Any,
    *,
    target_spec: Any = None,
    loss: Callable | None = None,
    optimizer=None,
) -> tuple[graph_pb2.GraphDef, list[str]]:
    """Lifted GraphDef (and fetches) of one training step of a Keras 3 model: forward, loss,
    gradients, optimizer update.

    ``input_spec`` (a ``tf.TensorSpec`` or nest of them, fully known shapes) describes one batch.
    ``loss(y_true, y_pred)`` needs ``target_spec``; without a loss the step minimises the mean
    square of the outputs, which has the same backward structure as any elementwise loss.
    The optimizer defaults to SGD with momentum 0.9, as in the paper.
    """
    import keras

    specs = tf.nest.flatten(input_spec) + (tf.nest.flatten(target_spec) if target_spec is not None else [])
    for spec in specs:
        if not isinstance(spec, tf.TensorSpec):
            raise GraphImportError(f"input_spec/target_spec must hold tf.TensorSpec objects, got {spec!r}")
        if not spec.shape.is_fully_defined():
            raise UnknownShapeError(
                f"spec {spec} has unknown dimensions; give the batch size and every other dimension, "
                "e.g. tf.TensorSpec([32, 128], tf.int32)"
            )
    if loss is not None and target_spec is None:
        raise GraphImportError("loss=... needs target_spec=tf.TensorSpec(...) describing the targets it compares with")
    _check_model_inputs(model, input_spec)
    if not model.built:
        with _tracing_errors(model, input_spec, target_spec):
            model(tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), input_spec), training=False)
    optimizer = optimizer or keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    optimizer.build(model.trainable_variables)

    def objective(inputs, targets):
        outputs = model(inputs, training=True)
        if loss is not None:
            value = loss(targets, outputs)
        else:
            value = tf.add_n([tf.reduce_mean(tf.square(tf.cast(o, tf.float32))) for o in tf.nest.flatten(outputs)])
        return value + tf.add_n(model.losses) if model.losses else value

    @tf.function
    def train_step(inputs, targets=None):
        with tf.GradientTape() as tape:
            value = objective(inputs, targets)
        gradients = tape.gradient(value, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return value

    specs = (input_spec,) if target_spec is None else (input_spec, target_spec)
    with _tracing_errors(model, input_spec, target_spec):
        function = train_step.get_concrete_function(*specs)
    # Lift while the optimizer is alive: the function holds its variables only weakly.
    return concrete_function_graph_def(function)


def _shapes(spec: Any) -> Any:
    return tf.nest.map_structure(lambda s: tuple(s.shape), spec)


def _check_model_inputs(model, input_spec: Any) -> None:
    """A GraphImportError unless ``input_spec`` has the count, ranks and known sizes of the model's inputs
    (a model made from ``keras.Input``s declares them; a subclassed model does not, and is checked by tracing)."""
    try:
        expected = [tuple(t.shape) for t in model.inputs]
    except (AttributeError, ValueError, TypeError):
        return
    given = [tuple(s.shape) for s in tf.nest.flatten(input_spec)]
    fits = len(given) == len(expected) and all(
        len(g) == len(e) and all(want is None or want == got for want, got in zip(e, g)) for g, e in zip(given, expected))
    if not fits:
        raise GraphImportError(
            f"input_spec has shape(s) {', '.join(map(str, given))}; keras model {model.name!r} takes "
            f"{', '.join(map(str, expected))} (None: any size, such as the batch), so give e.g. "
            f"tf.TensorSpec({[4 if d is None else d for d in expected[0]]}, ...)")


def _reason(error: Exception) -> str:
    """The sentence of a Keras or TF tracing error, without the listing of user code it carries."""
    text = str(error)
    highlighted = re.search(r"\x1b\[1m(.*?)\x1b\[0m", text, re.S)  # Keras puts the cause in bold
    if highlighted:
        return highlighted.group(1).strip()
    causes = re.findall(r"^\s*\w+Error: (.+)$", text, re.M)
    return causes[-1].strip() if causes else (text.strip().splitlines() or [type(error).__name__])[0]


@contextlib.contextmanager
def _tracing_errors(model, input_spec: Any, target_spec: Any) -> Iterator[None]:
    """Turn an error raised while tracing the model on the specs into a GraphImportError naming them."""
    try:
        yield
    except (ValueError, TypeError) as error:
        targets = f" and target_spec {_shapes(target_spec)}" if target_spec is not None else ""
        raise GraphImportError(
            f"keras model {model.name!r} cannot run one training step on input_spec {_shapes(input_spec)}{targets}: "
            f"{_reason(error).rstrip('.')}. input_spec must describe one batch of the model's inputs, and target_spec what "
            "the loss compares the outputs with") from None
