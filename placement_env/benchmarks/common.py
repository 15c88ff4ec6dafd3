"""The optimizer step every benchmark builder shares, and how a builder wraps its graph as a TrainingStep."""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ..tf_import.training_step import TrainingStep


LOSS_COLLECTION = "placement_env_loss"


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


def require_int(model: str, name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int, or a ValueError naming the parameter and the accepted range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{model}: {name}={value!r}; expected an integer >= {minimum}")
    return int(value)
