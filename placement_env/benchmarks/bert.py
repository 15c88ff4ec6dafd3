"""BERT benchmark: a BERT-base encoder with its two pre-training heads (Devlin et al. 2019), one
training step.

Graph (TF1 graph mode, no feeds, no control flow, every shape static; layers from
:mod:`placement_env.benchmarks.transformer_layers`):

- ``inputs``: token ids [batch, seq_len] (every sequence full length, so no padding mask);
  segment ids 0 for the first half of each sequence and 1 for the second (sentence A and B);
  ``masked`` positions per sequence with their label ids (drawn independently, so a position may
  repeat), and a next-sentence label per sequence, all drawn in-graph by ``tf.random.uniform``.
  The input tokens are not replaced by ``[MASK]``: they are random anyway.
- ``embeddings``: word [vocab, d_model], position [seq_len, d_model] and segment [2, d_model]
  embeddings summed, then LayerNorm and dropout (BERT's embedding postprocessor).
- ``encoder/layer_<k>`` (k < layers): ``self_attention`` and ``ffn`` (GELU, tanh form)
  sublayers, each ``LayerNorm(x + Dropout(Sublayer(x)))``.
- ``pooler``: tanh dense layer on each sequence's first ([CLS]) position.
- ``masked_lm``: the encoder output gathered at the masked positions, a GELU dense transform and
  LayerNorm, logits against the word table (tied, as BERT) plus an output bias, cross-entropy.
- ``next_sentence``: a 2-way classifier on the pooled output, cross-entropy.
- ``loss``: the mean masked-LM cross-entropy plus the mean next-sentence cross-entropy.
- ``gradients/...``, ``train_step/...``: ``common.momentum_train_op`` (momentum SGD instead of
  BERT's Adam with weight decay, as every benchmark here; gradients co-located with their forward ops).

Graph-level random seed 0, so values as well as structure repeat between builds.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): BERT-base, d_model 768, 12 layers,
12 heads, d_ff 3072, vocabulary 30,522 (uncased WordPiece), sequence 512 with 80 masked positions
(the reference pre-training script's ``max_predictions_per_seq`` at 512), dropout 0.1; batch 16
sequences (BERT's second pre-training phase ran 256 a step on TPU pods). Parameters: 110.1 M.

PAPER builds 9,429 TF ops (6,583 in the OpGraph, 159 groups); TINY (2 layers, d_model 16, 2
heads, sequence 8 with 2 masked positions, vocabulary 50, batch 2) builds 2,127 TF ops (1,521 in
the OpGraph).
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .sizes import BERT_PAPER as PAPER, BERT_TINY as TINY  # noqa: F401 (the module's sizes)
from .transformer_layers import (Dims, attention, check_dims, dense, dropout, feed_forward, gelu, layer_norm,
                                 residual, tied_logits_xent)

__all__ = ["PAPER", "TINY", "build"]

_SEGMENTS = 2  # sentence A and sentence B


def _inputs(p: dict) -> dict[str, tf.Tensor]:
    """Token and segment ids, masked positions (flat rows of [batch * seq_len]) and both heads' labels."""
    batch, length, masked = p["batch"], p["seq_len"], p["masked"]
    with tf.compat.v1.name_scope("inputs"):
        ids = tf.random.uniform([batch, length], maxval=p["vocab"], dtype=tf.int32, name="token_ids")
        halves = tf.concat([tf.zeros([length - length // 2], tf.int32), tf.ones([length // 2], tf.int32)], 0)
        segments = tf.tile(tf.reshape(halves, [1, length]), [batch, 1], name="segment_ids")
        positions = tf.random.uniform([batch, masked], maxval=length, dtype=tf.int32, name="masked_positions")
        offsets = tf.reshape(tf.range(batch, dtype=tf.int32) * length, [batch, 1], name="row_offsets")
        rows = tf.reshape(positions + offsets, [batch * masked], name="masked_rows")
        mlm_labels = tf.random.uniform([batch * masked], maxval=p["vocab"], dtype=tf.int32, name="masked_ids")
        nsp_labels = tf.random.uniform([batch], maxval=2, dtype=tf.int32, name="is_next")
    return {"ids": ids, "segments": segments, "rows": rows, "mlm_labels": mlm_labels, "nsp_labels": nsp_labels}


def _embeddings(p: dict, dims: Dims, inputs: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Variable]:
    """The embedded sequence [batch * seq_len, d_model] and the word table (tied to the masked-LM output)."""
    batch, length, width = p["batch"], p["seq_len"], dims.d_model
    with tf.compat.v1.variable_scope("embeddings"):
        init = tf.compat.v1.truncated_normal_initializer(stddev=0.02)
        words = tf.compat.v1.get_variable("words", [p["vocab"], width], initializer=init)
        positions = tf.compat.v1.get_variable("positions", [length, width], initializer=init)
        segments = tf.compat.v1.get_variable("segments", [_SEGMENTS, width], initializer=init)
        x = tf.add(common.embedding_lookup(words, inputs["ids"], "word_lookup"),
                   common.embedding_lookup(segments, inputs["segments"], "segment_lookup"), name="sum")
        x = tf.reshape(tf.add(x, positions, name="with_positions"), [batch * length, width], name="flat")
        return dropout(layer_norm(x, "norm"), dims.dropout), words


def _heads(p: dict, dims: Dims, hidden: tf.Tensor, words: tf.Variable, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
    """The pooler, the masked-LM and next-sentence heads, and the summed loss."""
    batch, length = p["batch"], p["seq_len"]
    with tf.compat.v1.variable_scope("pooler"):
        first = tf.reshape(hidden, [batch, length, dims.d_model], name="sequence")[:, 0, :]
        pooled = dense(first, dims.d_model, "dense", tf.tanh)
    with tf.compat.v1.variable_scope("masked_lm"):
        picked = common.embedding_lookup(hidden, inputs["rows"], "gather_masked")  # [batch * masked, d_model]
        transformed = layer_norm(dense(picked, dims.d_model, "transform", gelu), "norm")
        bias = tf.compat.v1.get_variable("output_bias", [p["vocab"]], initializer=tf.zeros_initializer())
        mlm = tied_logits_xent(transformed, words, inputs["mlm_labels"], bias)
    with tf.compat.v1.variable_scope("next_sentence"):
        logits = dense(pooled, _SEGMENTS, "classifier")
        nsp = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=inputs["nsp_labels"], logits=logits, name="xent")
    with tf.compat.v1.name_scope("loss"):
        return tf.add(tf.reduce_mean(mlm, name="masked_lm"), tf.reduce_mean(nsp, name="next_sentence"), name="total")


def build(**params) -> common.TrainingStep:
    """Build one BERT pre-training step; keyword parameters default to :data:`PAPER`."""
    p = common.check_params("bert", PAPER, params)
    dims = check_dims("bert", p)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        inputs = _inputs(p)
        x, words = _embeddings(p, dims, inputs)
        lengths = (p["seq_len"], p["seq_len"])
        with tf.compat.v1.variable_scope("encoder"):
            for k in range(p["layers"]):
                with tf.compat.v1.variable_scope(f"layer_{k}"):
                    x = residual(x, lambda h: attention(h, h, dims, lengths), dims, "self_attention", post_norm=True)
                    x = residual(x, lambda h: feed_forward(h, dims, gelu), dims, "ffn", post_norm=True)
        train_op = common.momentum_train_op(_heads(p, dims, x, words, inputs))
    return common.finish(graph, train_op, {**p, "dropout": dims.dropout})
