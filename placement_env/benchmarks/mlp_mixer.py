"""MLP-Mixer benchmark: an all-MLP image classifier (Tolstikhin et al. 2021, Mixer-B/16), one training step.

Graph (TF1 graph mode, no feeds, no control flow, every shape static; layers from
:mod:`placement_env.benchmarks.transformer_layers`):

- ``inputs``: images [batch, image_size, image_size, 3] (standard normal) and labels [batch], drawn in-graph.
- ``stem``: the per-patch linear embedding, a ``patch`` x ``patch`` convolution with stride ``patch`` and a
  bias, giving (image_size / patch)^2 tokens of ``d_model`` channels, flattened to [batch * tokens, d_model].
- ``layer_<k>`` (k < layers): a ``token_mixing`` sublayer (the tokens transposed to [batch * d_model, tokens],
  an MLP of ``token_mlp`` hidden units with GELU across them, transposed back) and a ``channel_mixing``
  sublayer (an MLP of ``channel_mlp`` hidden units with GELU across the channels), each pre-norm with a
  skip connection: ``x + MLP(LayerNorm(x))``.
- ``head``: the final LayerNorm, the mean over tokens and a linear layer to ``num_classes`` logits.
- ``loss``: softmax cross-entropy, the mean over the batch.
- ``gradients/...``, ``train_step/...``: ``common.momentum_train_op`` (momentum SGD instead of the paper's
  Adam, as every benchmark here; gradients co-located with their forward ops).

Graph-level random seed 0, so values as well as structure repeat between builds. No dropout (the paper
pre-trains Mixer-B/16 without it).

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): Mixer-B/16, 16x16 patches of 224x224 images
(196 tokens), d_model 768, 12 layers, token MLP 384, channel MLP 3072, 1000 classes (the paper's Table 1;
59.9 M parameters); batch 32, at which the step needs 11.3 GiB on one device in the simulator (one K80 die has
10.5). Its layers are the same shape throughout, as a Transformer encoder's are, but mix the tokens with an MLP
instead of attention.
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .sizes import MLP_MIXER_PAPER as PAPER, MLP_MIXER_TINY as TINY  # noqa: F401 (the module's sizes)
from .transformer_layers import Dims, dense, feed_forward, gelu, layer_norm, residual

__all__ = ["PAPER", "TINY", "build"]


def _token_mixing(x: tf.Tensor, batch: int, tokens: int, width: int, hidden: int) -> tf.Tensor:
    """An MLP across the tokens of each channel: [batch * tokens, width] in and out."""
    per_channel = tf.reshape(tf.transpose(tf.reshape(x, [batch, tokens, width]), [0, 2, 1], name="to_channels"),
                             [batch * width, tokens], name="per_channel")
    mixed = dense(dense(per_channel, hidden, "intermediate", gelu), tokens, "output")
    return tf.reshape(tf.transpose(tf.reshape(mixed, [batch, width, tokens]), [0, 2, 1], name="to_tokens"),
                      [batch * tokens, width], name="per_token")


def build(**params) -> common.TrainingStep:
    """Build one MLP-Mixer training step; keyword parameters default to :data:`PAPER`."""
    p = common.check_params("mlp_mixer", PAPER, params)
    size, patch = p["image_size"], p["patch"]
    if size % patch:
        raise ValueError(f"mlp_mixer: image_size={size} is not a multiple of patch={patch}; the image is cut into "
                         "whole patches")
    batch, width, tokens = p["batch"], p["d_model"], (size // patch) ** 2
    dims = Dims(batch=batch, d_model=width, heads=1, d_ff=p["channel_mlp"], dropout=0.0)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        with tf.compat.v1.name_scope("inputs"):
            images = tf.random.normal([batch, size, size, 3], name="images")
            labels = tf.random.uniform([batch], maxval=p["num_classes"], dtype=tf.int32, name="labels")

        with tf.compat.v1.variable_scope("stem"):
            kernel = tf.compat.v1.get_variable("kernel", [patch, patch, 3, width],
                                               initializer=tf.compat.v1.glorot_uniform_initializer())
            bias = tf.compat.v1.get_variable("bias", [width], initializer=tf.zeros_initializer())
            patches = tf.nn.bias_add(tf.nn.conv2d(images, kernel, strides=[1, patch, patch, 1], padding="VALID"),
                                     bias)
            x = tf.reshape(patches, [batch * tokens, width], name="tokens")

        for k in range(p["layers"]):
            with tf.compat.v1.variable_scope(f"layer_{k}"):
                x = residual(x, lambda h: _token_mixing(h, batch, tokens, width, p["token_mlp"]), dims,
                             "token_mixing", post_norm=False)
                x = residual(x, lambda h: feed_forward(h, dims, gelu), dims, "channel_mixing", post_norm=False)

        with tf.compat.v1.variable_scope("head"):
            pooled = tf.reduce_mean(tf.reshape(layer_norm(x, "final_norm"), [batch, tokens, width]), axis=1,
                                    name="pooled")
            logits = dense(pooled, p["num_classes"], "logits")
        with tf.compat.v1.name_scope("loss"):
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xent")
            loss = tf.reduce_mean(xent, name="mean_xent")
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, p)
