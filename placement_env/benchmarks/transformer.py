"""Transformer benchmark: the base encoder-decoder of "Attention is all you need" (Vaswani et al. 2017),
one training step for translation.

Graph (TF1 graph mode, no feeds, no control flow, every shape static; layers from
:mod:`placement_env.benchmarks.transformer_layers`):

- ``inputs``: source ids [batch, src_len] and target ids [batch, tgt_len + 1] drawn in-graph by
  ``tf.random.uniform`` (every sentence full length, so no padding mask); the decoder reads
  ``target[:, :-1]`` and predicts ``target[:, 1:]``. ``inputs/causal_mask`` [tgt_len, tgt_len]
  keeps each decoder position from attending to later ones.
- ``embedding``: one [vocab, d_model] table shared by the source and target embeddings and the
  output projection, as the paper's shared BPE vocabulary does; lookups scaled by sqrt(d_model)
  plus the fixed sinusoid positional encoding, then dropout (``source``, ``target``).
- ``encoder/layer_<k>`` (k < layers): ``self_attention`` and ``ffn`` (ReLU) sublayers, each
  ``LayerNorm(x + Dropout(Sublayer(x)))`` (the paper's post-norm).
- ``decoder/layer_<k>``: masked ``self_attention``, ``cross_attention`` over the encoder's
  output, ``ffn``, same wiring. Layer k+1 depends only on layer k (and the decoder on the last
  encoder layer), so a layer-wise split pipelines only across the steps of training, not within one.
- ``softmax``: logits = h E^T with the shared table E, sparse softmax cross-entropy per target
  token (no label smoothing); ``loss``: the mean.
- ``gradients/...``, ``train_step/...``: ``common.momentum_train_op`` (momentum SGD instead of the
  paper's Adam, as every benchmark here; gradients co-located with their forward ops).

Graph-level random seed 0, so values as well as structure repeat between builds.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): the base model, d_model 512, 6 + 6
layers, 8 heads, d_ff 2048, dropout 0.1, vocabulary 37,000 (the paper's shared English-German
BPE); batch 128 sentence pairs of 128 tokens each side (16,384 tokens a side; the paper's steps
held about 25,000, spread over 8 GPUs). Parameters: 63.1 M (18.9 M of them the shared embedding).

PAPER builds 10,497 TF ops (7,131 in the OpGraph, 165 groups); TINY (2 + 2 layers, d_model 16,
2 heads, vocabulary 50, 6 source and 5 target tokens, batch 2) builds 3,570 TF ops (2,497 in the
OpGraph).
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .sizes import TRANSFORMER_PAPER as PAPER, TRANSFORMER_TINY as TINY  # noqa: F401 (the module's sizes)
from .transformer_layers import (Dims, attention, causal_mask, check_dims, dropout, feed_forward, residual,
                                 sinusoid_positions, tied_logits_xent)

__all__ = ["PAPER", "TINY", "build"]


def _inputs(p: dict) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Source ids, decoder input ids, flat labels [batch * tgt_len] and the decoder's causal mask."""
    batch, src_len, tgt_len = p["batch"], p["src_len"], p["tgt_len"]
    with tf.compat.v1.name_scope("inputs"):
        src = tf.random.uniform([batch, src_len], maxval=p["vocab"], dtype=tf.int32, name="source_ids")
        tgt = tf.random.uniform([batch, tgt_len + 1], maxval=p["vocab"], dtype=tf.int32, name="target_ids")
        tgt_in = tf.slice(tgt, [0, 0], [batch, tgt_len], name="decoder_input")
        labels = tf.reshape(tf.slice(tgt, [0, 1], [batch, tgt_len]), [batch * tgt_len], name="labels")
        mask = causal_mask(tgt_len)
    return src, tgt_in, labels, mask


def _embed(table: tf.Variable, ids: tf.Tensor, dims: Dims, name: str) -> tf.Tensor:
    """[batch * length, d_model]: lookup x sqrt(d_model) + positional encoding, then dropout."""
    length = int(ids.shape[1])
    with tf.compat.v1.name_scope(name):
        x = tf.multiply(common.embedding_lookup(table, ids), dims.d_model ** 0.5, name="scaled")
        x = tf.add(x, sinusoid_positions(length, dims.d_model), name="with_positions")
        x = tf.reshape(x, [dims.batch * length, dims.d_model], name="flat")
        return dropout(x, dims.dropout)


def _encoder(x: tf.Tensor, dims: Dims, p: dict) -> tf.Tensor:
    lengths = (p["src_len"], p["src_len"])
    with tf.compat.v1.variable_scope("encoder"):
        for k in range(p["layers"]):
            with tf.compat.v1.variable_scope(f"layer_{k}"):
                x = residual(x, lambda h: attention(h, h, dims, lengths), dims, "self_attention", post_norm=True)
                x = residual(x, lambda h: feed_forward(h, dims, tf.nn.relu), dims, "ffn", post_norm=True)
    return x


def _decoder(y: tf.Tensor, memory: tf.Tensor, mask: tf.Tensor, dims: Dims, p: dict) -> tf.Tensor:
    own, cross = (p["tgt_len"], p["tgt_len"]), (p["tgt_len"], p["src_len"])
    with tf.compat.v1.variable_scope("decoder"):
        for k in range(p["layers"]):
            with tf.compat.v1.variable_scope(f"layer_{k}"):
                y = residual(y, lambda h: attention(h, h, dims, own, mask), dims, "self_attention", post_norm=True)
                y = residual(y, lambda h: attention(h, memory, dims, cross), dims, "cross_attention",
                             post_norm=True)
                y = residual(y, lambda h: feed_forward(h, dims, tf.nn.relu), dims, "ffn", post_norm=True)
    return y


def build(**params) -> common.TrainingStep:
    """Build one Transformer training step; keyword parameters default to :data:`PAPER`."""
    p = common.check_params("transformer", PAPER, params)
    dims = check_dims("transformer", p)
    for length in ("src_len", "tgt_len"):  # the positional encodings are [length, d_model] constants
        common.require_constant_fits("transformer", {length: p[length], "d_model": p["d_model"]})
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        src, tgt_in, labels, mask = _inputs(p)
        with tf.compat.v1.variable_scope("embedding"):
            table = tf.compat.v1.get_variable(
                "shared", [p["vocab"], dims.d_model],
                initializer=tf.compat.v1.random_normal_initializer(stddev=dims.d_model ** -0.5))
            x = _embed(table, src, dims, "source")
            y = _embed(table, tgt_in, dims, "target")
        memory = _encoder(x, dims, p)
        y = _decoder(y, memory, mask, dims, p)
        with tf.compat.v1.variable_scope("softmax"):
            xent = tied_logits_xent(y, table, labels)
        with tf.compat.v1.name_scope("loss"):
            loss = tf.reduce_mean(xent, name="mean_xent")
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, {**p, "dropout": dims.dropout})
