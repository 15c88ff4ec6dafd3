"""The layers of the attention benchmarks (Transformer, GPT-2, BERT), in raw TF ops.

Hidden states travel as 2-D [batch * length, d_model] tensors (as BERT's reference code keeps
them), so every projection is one ``MatMul`` + ``BiasAdd``; attention reshapes to
[batch, heads, length, d_head] for its two ``BatchMatMulV2`` ops and back. Every shape is
static, and there is no control flow: a causal mask is added to the scores, never a ``tf.cond``.

Naming, under the caller's variable scope (e.g. ``encoder/layer_3``): :func:`residual` opens the
sublayer's scope, so its variables and ops are ``self_attention/query/kernel``,
``ffn/intermediate/kernel``, ``ffn/norm/gamma``...; each layer's forward ops, and with
``colocate_gradients_with_ops`` its gradients, are attributed to it by name.

Residual wiring: ``post_norm`` (the Transformer paper and BERT) is
``LayerNorm(x + Dropout(Sublayer(x)))``; pre-norm (GPT-2) is ``x + Dropout(Sublayer(LayerNorm(x)))``
with one final LayerNorm after the last layer. Dropout (``rate`` 0 builds none) goes where the
reference models put it: on every sublayer output, on the attention probabilities and on the
summed embeddings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from . import common

__all__ = ["Dims", "check_dims", "dense", "layer_norm", "gelu", "dropout", "attention", "feed_forward",
           "residual", "causal_mask", "sinusoid_positions", "tied_logits_xent"]

_LAYER_NORM_EPSILON = 1e-5
_MASKED_SCORE = -1e4  # added to the scores of masked (future) positions before the softmax


@dataclass(frozen=True)
class Dims:
    """The sizes every layer of a model shares."""

    batch: int
    d_model: int
    heads: int
    d_ff: int
    dropout: float  # rate; 0 builds no dropout ops

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads


def check_dims(model: str, p: dict) -> Dims:
    """The Dims of checked parameters ``p``; ValueError when heads do not divide d_model or a rate is bad."""
    if p["d_model"] % p["heads"]:
        raise ValueError(f"{model}: d_model={p['d_model']} is not a multiple of heads={p['heads']}; "
                         "each head takes d_model / heads features")
    return Dims(batch=p["batch"], d_model=p["d_model"], heads=p["heads"], d_ff=p["d_ff"],
                dropout=common.require_rate(model, "dropout", p["dropout"]))


def dense(x: tf.Tensor, units: int, scope: str, activation: Callable | None = None,
          initializer: Any = None) -> tf.Tensor:
    """``activation(x @ kernel + bias)`` for a 2-D ``x``; variables ``<scope>/kernel`` (``initializer``, by default
    BERT's and GPT-2's truncated normal of stddev 0.02) and ``<scope>/bias``."""
    with tf.compat.v1.variable_scope(scope):
        kernel = tf.compat.v1.get_variable(
            "kernel", [int(x.shape[-1]), units],
            initializer=initializer or tf.compat.v1.truncated_normal_initializer(stddev=0.02))
        bias = tf.compat.v1.get_variable("bias", [units], initializer=tf.zeros_initializer())
        y = tf.nn.bias_add(tf.matmul(x, kernel, name="matmul"), bias, name="bias_add")
        return activation(y) if activation is not None else y


def layer_norm(x: tf.Tensor, scope: str) -> tf.Tensor:
    """Layer normalisation over the last axis with learned gain ``gamma`` and offset ``beta``."""
    with tf.compat.v1.variable_scope(scope):
        width = int(x.shape[-1])
        gamma = tf.compat.v1.get_variable("gamma", [width], initializer=tf.ones_initializer())
        beta = tf.compat.v1.get_variable("beta", [width], initializer=tf.zeros_initializer())
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True, name="moments")
        normed = (x - mean) * tf.math.rsqrt(variance + _LAYER_NORM_EPSILON, name="inverse_std")
        return tf.add(normed * gamma, beta, name="normalized")


def gelu(x: tf.Tensor) -> tf.Tensor:
    """GELU in the tanh form GPT-2's and BERT's reference code use."""
    return tf.nn.gelu(x, approximate=True, name="gelu")


def dropout(x: tf.Tensor, rate: float, name: str = "dropout") -> tf.Tensor:
    """``tf.nn.dropout`` at ``rate``; ``x`` itself when the rate is 0."""
    return tf.nn.dropout(x, rate=rate, name=name) if rate > 0 else x


def _split_heads(x: tf.Tensor, dims: Dims, length: int, name: str) -> tf.Tensor:
    """[batch * length, d_model] -> [batch, heads, length, d_head]."""
    x = tf.reshape(x, [dims.batch, length, dims.heads, dims.d_head], name=f"{name}_reshape")
    return tf.transpose(x, [0, 2, 1, 3], name=f"{name}_heads")


def attention(queries: tf.Tensor, memory: tf.Tensor, dims: Dims, lengths: tuple[int, int],
              mask: tf.Tensor | None = None) -> tf.Tensor:
    """Multi-head scaled dot-product attention of ``queries`` over ``memory`` (self-attention when equal).

    ``queries`` is [batch * q_len, d_model], ``memory`` [batch * kv_len, d_model], ``lengths`` is
    ``(q_len, kv_len)``; ``mask`` ([q_len, kv_len], 1 = may attend) blocks the scores where 0.
    Returns the output projection, [batch * q_len, d_model].
    """
    q_len, kv_len = lengths
    q = _split_heads(dense(queries, dims.d_model, "query"), dims, q_len, "query")
    k = _split_heads(dense(memory, dims.d_model, "key"), dims, kv_len, "key")
    v = _split_heads(dense(memory, dims.d_model, "value"), dims, kv_len, "value")
    scores = tf.matmul(q, k, transpose_b=True, name="scores")  # [batch, heads, q_len, kv_len]
    scores = tf.multiply(scores, 1.0 / math.sqrt(dims.d_head), name="scaled_scores")
    if mask is not None:
        scores = tf.add(scores * mask, (1.0 - mask) * _MASKED_SCORE, name="masked_scores")
    probs = dropout(tf.nn.softmax(scores, axis=-1, name="probs"), dims.dropout, "probs_dropout")
    context = tf.matmul(probs, v, name="context")  # [batch, heads, q_len, d_head]
    context = tf.transpose(context, [0, 2, 1, 3], name="context_merge")
    context = tf.reshape(context, [dims.batch * q_len, dims.d_model], name="context_flat")
    return dense(context, dims.d_model, "output")


def feed_forward(x: tf.Tensor, dims: Dims, activation: Callable) -> tf.Tensor:
    """Position-wise feed-forward: ``dense(activation(dense(x, d_ff)), d_model)``."""
    return dense(dense(x, dims.d_ff, "intermediate", activation), dims.d_model, "output")


def residual(x: tf.Tensor, sublayer: Callable[[tf.Tensor], tf.Tensor], dims: Dims, scope: str,
             post_norm: bool) -> tf.Tensor:
    """One residual sublayer under ``scope``: post-norm ``LN(x + drop(f(x)))`` or pre-norm ``x + drop(f(LN(x)))``."""
    with tf.compat.v1.variable_scope(scope):
        if post_norm:
            y = dropout(sublayer(x), dims.dropout)
            return layer_norm(tf.add(x, y, name="residual"), "norm")
        y = dropout(sublayer(layer_norm(x, "norm")), dims.dropout)
        return tf.add(x, y, name="residual")


def causal_mask(length: int, name: str = "causal_mask") -> tf.Tensor:
    """[length, length] float mask, 1 where query position i may attend to key position j <= i."""
    return tf.linalg.band_part(tf.ones([length, length], name=f"{name}_ones"), -1, 0, name=name)


def sinusoid_positions(length: int, width: int, name: str = "positions") -> tf.Tensor:
    """The Transformer paper's fixed positional encoding, a [length, width] constant."""
    position = np.arange(length, dtype=np.float64)[:, None]
    rates = np.power(10000.0, -(np.arange(0, width, 2, dtype=np.float64) / width))
    table = np.zeros([length, width], dtype=np.float32)
    table[:, 0::2] = np.sin(position * rates)
    table[:, 1::2] = np.cos(position * rates[: width // 2])
    return tf.constant(table, name=name)


def tied_logits_xent(hidden: tf.Tensor, table: tf.Variable, labels: tf.Tensor, bias: tf.Tensor | None = None
                     ) -> tf.Tensor:
    """Cross-entropy per row of ``hidden`` [rows, d] against ``labels`` [rows], with logits over the
    vocabulary from the embedding ``table`` [vocab, d] itself (tied input and output embedding)."""
    logits = tf.matmul(hidden, table, transpose_b=True, name="logits")
    if bias is not None:
        logits = tf.nn.bias_add(logits, bias, name="logits_bias")
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xent")
