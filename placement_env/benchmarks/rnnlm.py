"""RNNLM benchmark: a 2-layer LSTM language model, unrolled, one training step (paper: batch 64).

Graph (TF1 graph mode, no feeds, no control flow, every shape static):

- ``inputs``: token ids ``[batch, num_steps + 1]`` drawn in-graph by ``tf.random.uniform``;
  the model reads ``ids[:, :-1]`` and predicts ``ids[:, 1:]``.
- ``embedding``: variable ``embedding/embedding`` [vocab, hidden], one lookup, unstacked into
  ``num_steps`` tensors of [batch, hidden]; its gradient is made dense
  (:func:`placement_env.benchmarks.common.embedding_lookup`) so that no tensor has an unknown shape.
- ``lstm_0``, ``lstm_1``: hand-written LSTM layers (:mod:`placement_env.benchmarks.lstm`), unrolled;
  step ``t`` of layer ``k`` is under ``lstm_<k>/t<t>/``.
- ``softmax``: the outputs of all steps concatenated to [num_steps * batch, hidden], one full
  softmax over the vocabulary (``softmax/logits`` = h @ W [hidden, vocab] + b) and sparse softmax
  cross-entropy against the next token.
- ``loss``: mean cross-entropy over all steps and the batch.
- ``gradients/...`` and ``train_step/...``: ``common.momentum_train_op`` (momentum SGD, gradients
  co-located with their forward ops).

The softmax is one matmul over all steps, as in the LM implementations of the time: a softmax
per step would keep one [hidden, vocab] weight gradient per step alive until they are summed
(35 x 328 MB), which no 12 GB GPU holds.

Sizes (``PAPER``): batch 64, hidden 2048 (embedding size = hidden), vocab 40,000, 35 unrolled
steps, 2 layers. This is the shape of the large LSTM LMs of the time (2048-unit layers, a
vocabulary of tens of thousands of words; 35 steps is the classic PTB "large" unroll) and gives
about 5,000 ops. Parameters (0.23 G floats): LSTMs 2 x 33.6M, embedding 81.9M, softmax 81.9M;
with the momentum slots 1.7 GiB, and about 1.2 GiB of activations kept for the backward pass
(the ``estimate_step_memory`` rule of :mod:`placement_env.benchmarks.nmt`: 2.9 GiB in all), so, as in
the paper, one step fits one 12 GB GPU.

Measured on the 2-core development machine (TF 2.21 CPU): PAPER builds 5,022 ops in about 1.5 s
(plus about 2.3 s to import TensorFlow); TINY (batch 4, hidden 16, vocab 50, 4 steps) builds 724
ops in about 0.2 s.
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .sizes import RNNLM_PAPER as PAPER, RNNLM_TINY as TINY  # noqa: F401 (the module's sizes)
from .common import check_params, embedding_lookup
from .lstm import softmax_xent, stacked_lstm

__all__ = ["PAPER", "TINY", "build"]


def build(**params) -> common.TrainingStep:
    """Build one RNNLM training step; keyword parameters default to :data:`PAPER`."""
    p = check_params("rnnlm", PAPER, params)
    batch, hidden, vocab, steps = p["batch"], p["hidden"], p["vocab"], p["num_steps"]

    graph = tf.Graph()
    with graph.as_default():
        with tf.compat.v1.name_scope("inputs"):
            ids = tf.random.uniform([batch, steps + 1], maxval=vocab, dtype=tf.int32, name="token_ids")
            source = tf.slice(ids, [0, 0], [batch, steps], name="source")
            target = tf.slice(ids, [0, 1], [batch, steps], name="target")
            labels = tf.unstack(target, num=steps, axis=1, name="labels")

        with tf.compat.v1.variable_scope("embedding"):
            table = tf.compat.v1.get_variable("embedding", shape=[vocab, hidden], dtype=tf.float32)
            embedded = embedding_lookup(table, source, name="lookup")  # [batch, steps, hidden]
            step_inputs = tf.unstack(embedded, num=steps, axis=1, name="steps")

        outputs, _, _ = stacked_lstm(step_inputs, hidden, p["num_layers"], prefix="lstm_")

        with tf.compat.v1.variable_scope("softmax"):
            w = tf.compat.v1.get_variable("weights", shape=[hidden, vocab], dtype=tf.float32)
            b = tf.compat.v1.get_variable(
                "bias", shape=[vocab], dtype=tf.float32, initializer=tf.compat.v1.zeros_initializer()
            )
            xent = softmax_xent(outputs, labels, w, b)

        with tf.compat.v1.name_scope("loss"):
            loss = tf.reduce_mean(xent, name="mean_xent")

        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, p)
