"""What every benchmark builder shares: parameter checks, embedding lookups with a dense gradient,
the optimizer step, and how a builder wraps its graph as a TrainingStep."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from ..tf_import.training_step import TrainingStep


LOSS_COLLECTION = "placement_env_loss"
_DENSE_ROWS_GRAD = "PlacementEnvDenseRowsGrad"


def _dense_rows_grad(op: tf.Operation, grad):
    """Gradient of an Identity that turns an ``IndexedSlices`` gradient into a dense tensor."""
    if isinstance(grad, tf.IndexedSlices):
        rows = int(op.inputs[0].shape[0])
        return tf.math.unsorted_segment_sum(grad.values, grad.indices, num_segments=rows, name="dense")
    return grad


try:
    tf.RegisterGradient(_DENSE_ROWS_GRAD)(_dense_rows_grad)
except KeyError:  # already registered (module reloaded)
    pass


def embedding_lookup(table: tf.Variable | tf.Tensor, ids: tf.Tensor, name: str = "lookup") -> tf.Tensor:
    """Gather rows of ``table`` [rows, dim] at ``ids``, with a *dense* gradient for ``table``.

    A plain gather hands the optimizer an ``IndexedSlices`` gradient, and the sparse momentum
    update then runs ``Unique``, whose output shape is unknown. Here the read of the table is an
    ``Identity`` whose gradient sums the slices into a dense [rows, dim] tensor
    (``UnsortedSegmentSum`` with a constant segment count), so every tensor of the step keeps a
    static shape and the update is a dense ``ResourceApplyMomentum``. ``table`` may also be an
    activation (BERT gathers the hidden states of its masked positions this way).
    """
    graph = tf.compat.v1.get_default_graph()
    with tf.compat.v1.name_scope(name):
        with graph.gradient_override_map({"Identity": _DENSE_ROWS_GRAD}):
            table_t = tf.identity(table, name="table")
        return tf.gather(table_t, ids, name="gather")


def momentum_train_op(loss: tf.Tensor, learning_rate: float = 0.01, momentum: float = 0.9) -> tf.Operation:
    """SGD with momentum over all trainable variables, gradients co-located with their forward ops."""
    tf.compat.v1.add_to_collection(LOSS_COLLECTION, loss)
    optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate, momentum)
    return optimizer.minimize(loss, colocate_gradients_with_ops=True, name="train_step")


def finish(graph: tf.Graph, train_op: tf.Operation, params: dict[str, Any]) -> TrainingStep:
    """Add the initialiser to ``graph`` and wrap everything in a TrainingStep."""
    with graph.as_default():
        init = tf.compat.v1.global_variables_initializer()
    losses = graph.get_collection(LOSS_COLLECTION)
    return TrainingStep(graph=graph, train_op=train_op.name, init_op=init.name, params=dict(params),
                        loss=losses[0].name if losses else "")


# The largest size parameter a builder takes (batch, hidden, vocabulary, steps, ...). Past it a graph is
# far beyond any device's memory, and TF cannot build some at all: an LSTM's forget-gate bias is a
# constant of 4 x hidden floats, and a graph's constants must stay under 2 GB.
MAX_SIZE = 1 << 20


def require_int(model: str, name: str, value: Any, minimum: int = 1, maximum: int | None = MAX_SIZE) -> int:
    """``value`` as an int, or a ValueError naming the parameter and the accepted range (``maximum=None``:
    no upper limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum \
            or (maximum is not None and value > maximum):
        accepted = f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum:,}"
        raise ValueError(f"{model}: {name}={value!r}; expected {accepted}")
    return int(value)


def require_constant_fits(model: str, sizes: dict[str, int]) -> None:
    """A ValueError naming ``sizes`` when a float32 constant of their product would pass the 2 GB that TF
    allows one tensor of a graph (the builder would first spend that much memory, then fail in TF)."""
    size = 4 * math.prod(sizes.values())
    if size >= 2**31:
        shown = " x ".join(f"{name}={value}" for name, value in sizes.items())
        raise ValueError(f"{model}: {shown} makes a constant of {size / 2**30:,.1f} GiB; TF holds one tensor of a "
                         "graph under 2 GiB, so make them smaller")


def require_rate(model: str, name: str, value: Any) -> float:
    """``value`` as a float in [0, 1) (a dropout rate), or a ValueError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 <= value < 1:
        raise ValueError(f"{model}: {name}={value!r}; expected a number from 0 (inclusive) to 1 (exclusive)")
    return float(value)


def check_params(name: str, defaults: dict, params: dict) -> dict:
    """Merge ``params`` over ``defaults``; TypeError naming any unknown key, ValueError for a bad int."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise TypeError(f"{name}.build() got unknown parameter(s): {', '.join(unknown)}")
    merged = dict(defaults)
    merged.update(params)
    for key, value in merged.items():
        if isinstance(defaults[key], int) and not isinstance(defaults[key], bool):
            merged[key] = require_int(name, key, value)
    return merged
