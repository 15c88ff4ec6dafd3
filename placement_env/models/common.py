"""What every benchmark builder returns, and the optimizer step they share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf


LOSS_COLLECTION = "placement_env_loss"


@dataclass(frozen=True)
class TrainingStep:
    """A TF1-style graph of one training step plus the names needed to run it."""

    graph: tf.Graph
    train_op: str  # name of the op whose run is one training step
    init_op: str  # name of the op that initialises every variable
    params: dict[str, Any] = field(default_factory=dict)  # builder parameters actually used
    loss: str = ""  # name of the loss tensor, fetched with the train op as a training loop would

    @property
    def fetches(self) -> list[str]:
        """Op names one training step runs: the update and the loss."""
        return [self.train_op] + ([self.loss.split(":")[0]] if self.loss else [])


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
