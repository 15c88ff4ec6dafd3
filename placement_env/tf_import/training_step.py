"""The form in which a graph builder hands one training step to ``from_tf``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf


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
