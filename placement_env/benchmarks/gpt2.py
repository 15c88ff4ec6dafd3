"""GPT-2 benchmark: a decoder-only language model at GPT-2 small scale (Radford et al. 2019), one
training step.

Graph (TF1 graph mode, no feeds, no control flow, every shape static; layers from
:mod:`placement_env.benchmarks.transformer_layers`):

- ``inputs``: token ids [batch, context + 1] drawn in-graph by ``tf.random.uniform``; the model
  reads ``ids[:, :-1]`` and predicts ``ids[:, 1:]``. ``inputs/causal_mask`` [context, context].
- ``embedding``: token table ``embedding/tokens`` [vocab, d_model] and learned positions
  ``embedding/positions`` [context, d_model], summed, then dropout.
- ``layer_<k>`` (k < layers): masked ``self_attention`` and ``ffn`` (GELU, tanh form) sublayers,
  each ``x + Dropout(Sublayer(LayerNorm(x)))`` (GPT-2's pre-norm).
- ``softmax``: the final LayerNorm (``softmax/final_norm``), logits = h W^T with the token table
  W (tied, as GPT-2), sparse softmax cross-entropy per token; ``loss``: the mean.
- ``gradients/...``, ``train_step/...``: ``common.momentum_train_op`` (momentum SGD instead of
  GPT-2's Adam, as every benchmark here; gradients co-located with their forward ops).

Graph-level random seed 0, so values as well as structure repeat between builds.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): GPT-2 small, d_model 768, 12
layers, 12 heads, d_ff 3072, context 1024, vocabulary 50,257, dropout 0.1; batch 8 sequences
(8,192 tokens; GPT-2 trained on 512 sequences a step, over many devices). Parameters: 124.4 M
(38.6 M of them the token table).

PAPER builds 9,248 TF ops (6,492 in the OpGraph, 135 groups); TINY (2 layers, d_model 16, 2
heads, context 8, vocabulary 50, batch 2) builds 1,728 TF ops (1,240 in the OpGraph).
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .sizes import GPT2_PAPER as PAPER, GPT2_TINY as TINY  # noqa: F401 (the module's sizes)
from .transformer_layers import (attention, causal_mask, check_dims, dropout, feed_forward, gelu, layer_norm,
                                 residual, tied_logits_xent)

__all__ = ["PAPER", "TINY", "build"]


def build(**params) -> common.TrainingStep:
    """Build one GPT-2 training step; keyword parameters default to :data:`PAPER`."""
    p = common.check_params("gpt2", PAPER, params)
    dims = check_dims("gpt2", p)
    batch, context, width = p["batch"], p["context"], dims.d_model
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        with tf.compat.v1.name_scope("inputs"):
            ids = tf.random.uniform([batch, context + 1], maxval=p["vocab"], dtype=tf.int32, name="token_ids")
            source = tf.slice(ids, [0, 0], [batch, context], name="source")
            labels = tf.reshape(tf.slice(ids, [0, 1], [batch, context]), [batch * context], name="labels")
            mask = causal_mask(context)

        with tf.compat.v1.variable_scope("embedding"):
            init = tf.compat.v1.random_normal_initializer(stddev=0.02)
            tokens = tf.compat.v1.get_variable("tokens", [p["vocab"], width], initializer=init)
            positions = tf.compat.v1.get_variable("positions", [context, width], initializer=init)
            x = tf.add(common.embedding_lookup(tokens, source), positions, name="with_positions")
            x = dropout(tf.reshape(x, [batch * context, width], name="flat"), dims.dropout)

        lengths = (context, context)
        for k in range(p["layers"]):
            with tf.compat.v1.variable_scope(f"layer_{k}"):
                x = residual(x, lambda h: attention(h, h, dims, lengths, mask), dims, "self_attention",
                             post_norm=False)
                x = residual(x, lambda h: feed_forward(h, dims, gelu), dims, "ffn", post_norm=False)

        with tf.compat.v1.variable_scope("softmax"):
            xent = tied_logits_xent(layer_norm(x, "final_norm"), tokens, labels)
        with tf.compat.v1.name_scope("loss"):
            loss = tf.reduce_mean(xent, name="mean_xent")
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, {**p, "dropout": dims.dropout})
