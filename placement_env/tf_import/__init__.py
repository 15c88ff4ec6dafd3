"""TensorFlow graphs in: the only part of placement_env that reads TF graph protos.

``from_tf`` accepts a GraphDef (message, bytes or file), a MetaGraphDef, a ``tf.Graph``, a
``ConcreteFunction`` or ``tf.function``, a Keras 3 model (with an input spec) or a benchmark
``TrainingStep``, and returns a grouped :class:`~placement_env.opgraph.OpGraph`.
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from ..errors import ArgumentError, GraphImportError
from ..grouping import DEFAULT_MAX_GROUPS, group_ops
from ..opgraph import OpGraph
from .functions import concrete_function_graph_def, keras_training_graph_def
from .graphdef import graph_def_to_opgraph, parse_graph_def
from .training_step import TrainingStep

ACCEPTED = (
    "a tf.compat.v1.GraphDef (message, serialised bytes, or a .pb/.pbtxt file), a MetaGraphDef (or .meta file), "
    "a tf.Graph, a ConcreteFunction, a tf.function (with an input_signature or input_spec=...), a keras.Model "
    "(with input_spec=...), or a placement_env TrainingStep"
)


def from_tf(
    obj: Any,
    *,
    name: str | None = None,
    fetches: Sequence[str] | None = None,
    init_op: str | None = None,
    input_spec: Any = None,
    target_spec: Any = None,
    loss: Callable | None = None,
    optimizer: Any = None,
    max_groups: int = DEFAULT_MAX_GROUPS,
    unknown_dim: int | None = None,
) -> OpGraph:
    """Import one training step of a TF graph as an OpGraph cut into at most ``max_groups`` groups.

    ``fetches`` names the op(s) whose run is one step (default: the graph's ``train_op`` collection,
    else every sink that leads to an optimizer update). ``input_spec``/``target_spec``/``loss``/
    ``optimizer`` build the step of a Keras model. ``unknown_dim`` is assumed for unknown
    dimensions; without it an unknown shape is an error.
    """
    _check_arguments(name, fetches, init_op, unknown_dim)
    graph_def, default_fetches, default_init, default_name, source = _to_graph_def(
        obj, input_spec=input_spec, target_spec=target_spec, loss=loss, optimizer=optimizer
    )
    graph = graph_def_to_opgraph(
        graph_def,
        name=name or default_name,
        fetches=fetches if fetches is not None else default_fetches,
        init_op=init_op or default_init,
        unknown_dim=unknown_dim,
        meta={"source": source},
    )
    return group_ops(graph, max_groups=max_groups)


def _check_arguments(name: Any, fetches: Any, init_op: Any, unknown_dim: Any) -> None:
    """ArgumentError naming the first of from_tf's keywords that is of the wrong type or out of range."""
    for key, value in (("name", name), ("init_op", init_op)):
        if value is not None and not isinstance(value, str):
            raise ArgumentError(f"{key}={value!r:.200}; expected None or a str")
    if isinstance(fetches, (str, bytes)) or not (fetches is None or isinstance(fetches, Iterable)):
        raise ArgumentError(f"fetches={fetches!r:.200}; expected None or a list of op names (e.g. ['train_op'])")
    if unknown_dim is not None and (isinstance(unknown_dim, bool) or not isinstance(unknown_dim, numbers.Integral)
                                    or unknown_dim < 1):
        raise ArgumentError(f"unknown_dim={unknown_dim!r:.200}; expected None or an integer >= 1 (the size assumed "
                            "for every unknown dimension)")


def _to_graph_def(obj, *, input_spec, target_spec, loss, optimizer):
    """Return (GraphDef, default fetches, default init op, default name, source kind)."""
    if isinstance(obj, TrainingStep):
        return obj.graph.as_graph_def(), obj.fetches, obj.init_op, "training_step", "TrainingStep"
    if _is_keras_model(obj):
        if input_spec is None:
            raise GraphImportError("a keras.Model needs input_spec=tf.TensorSpec([batch, ...], dtype) to build its step")
        graph_def, fetches = keras_training_graph_def(obj, input_spec, target_spec=target_spec, loss=loss,
                                                      optimizer=optimizer)
        return graph_def, fetches, None, obj.name, "keras.Model"
    if isinstance(obj, tf.types.experimental.PolymorphicFunction):
        name = obj.__name__
        try:
            function = obj.get_concrete_function(*([input_spec] if input_spec is not None else []))
        except (TypeError, ValueError) as error:
            raise GraphImportError(
                f"could not trace tf.function {obj.__name__!r}: {error}. Give it an input_signature or pass "
                "input_spec=tf.TensorSpec(...)"
            ) from error
        graph_def, fetches = concrete_function_graph_def(function)
        return graph_def, fetches, None, name, "tf.function"
    if isinstance(obj, tf.types.experimental.ConcreteFunction):
        graph_def, fetches = concrete_function_graph_def(obj)
        name = obj.name.decode() if isinstance(obj.name, bytes) else obj.name
        return graph_def, fetches, None, name, "ConcreteFunction"
    if isinstance(obj, tf.Graph):
        collected = [getattr(op, "op", op).name for op in obj.get_collection("train_op")]
        return obj.as_graph_def(), collected or None, None, "graph", "tf.Graph"
    if isinstance(obj, meta_graph_pb2.MetaGraphDef):
        collected = list(obj.collection_def["train_op"].node_list.value) if "train_op" in obj.collection_def else []
        return obj.graph_def, collected or None, None, "meta_graph", "MetaGraphDef"
    if isinstance(obj, graph_pb2.GraphDef):
        return obj, None, None, "graph_def", "GraphDef"
    if isinstance(obj, (bytes, bytearray)):
        return parse_graph_def(bytes(obj)), None, None, "graph_def", "GraphDef bytes"
    if isinstance(obj, (str, os.PathLike)):
        return _read_graph_file(Path(obj))
    raise GraphImportError(f"cannot import a {type(obj).__name__}; from_tf accepts {ACCEPTED}")


def _read_graph_file(path: Path):
    if path.is_dir():
        saved_model = " (it holds a SavedModel, which from_tf does not read)" if (path / "saved_model.pb").exists() \
            else ""
        raise GraphImportError(f"{path}: is a directory{saved_model}; from_tf reads a file: a GraphDef (.pb, or "
                               f".pbtxt as text) or a MetaGraphDef (.meta); in memory it accepts {ACCEPTED}")
    if not path.is_file():
        raise GraphImportError(f"{path}: no such file; from_tf accepts {ACCEPTED}")
    data = path.read_bytes()
    if path.suffix == ".meta":
        meta_graph = meta_graph_pb2.MetaGraphDef()
        try:
            meta_graph.ParseFromString(data)
        except Exception as error:  # protobuf raises DecodeError or RuntimeError by backend
            raise GraphImportError(f"{path}: not a serialised MetaGraphDef: {error}") from error
        graph_def, fetches, init, _, _ = _to_graph_def(meta_graph, input_spec=None, target_spec=None, loss=None,
                                                        optimizer=None)
        return graph_def, fetches, init, path.stem, f"file {path.name}"
    if path.suffix == ".pbtxt":
        graph_def = graph_pb2.GraphDef()
        try:
            text_format.Parse(data.decode(), graph_def)
        except (text_format.ParseError, UnicodeDecodeError) as error:
            raise GraphImportError(f"{path}: not a text GraphDef: {error}") from error
        return graph_def, None, None, path.stem, f"file {path.name}"
    return parse_graph_def(data), None, None, path.stem, f"file {path.name}"


def _is_keras_model(obj) -> bool:
    try:
        import keras
    except ImportError:
        return False
    return isinstance(obj, keras.Model)
