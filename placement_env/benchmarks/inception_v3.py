"""Inception-V3 training step (Szegedy et al. 2015, layer for layer as TF-slim's ``inception_v3``).

Structure, in forward order (``BLOCKS``; each is a top-level name scope, TF-slim names):

    inputs, Conv2d_1a_3x3, Conv2d_2a_3x3, Conv2d_2b_3x3, MaxPool_3a_3x3, Conv2d_3b_1x1,
    Conv2d_4a_3x3, MaxPool_5a_3x3, Mixed_5b, Mixed_5c, Mixed_5d, Mixed_6a, Mixed_6b, Mixed_6c,
    Mixed_6d, Mixed_6e, AuxLogits, Mixed_7a, Mixed_7b, Mixed_7c, Logits, loss

- Every convolution is conv2d without bias + batch norm in training mode (batch statistics,
  learned beta, no gamma, epsilon 1e-3: TF-slim's Inception arg scope) + ReLU. The moving
  mean/variance updates (decay 0.9997) are plain ``AssignSubVariableOp`` ops co-located with
  their variables and grouped with the optimiser into the train op
  (``train_step_with_bn_updates``), so one run of ``train_op`` is a full slim training step.
  No ``tf.cond`` anywhere.
- ``AuxLogits`` (TF-slim's auxiliary head on ``Mixed_6e``: 5x5/3 average pool, 1x1 conv 128,
  5x5 conv 768, 1x1 conv to the classes) is always built and adds 0.4 x its cross-entropy to
  the loss, as slim's training script does. It sits in ``BLOCKS`` right after ``Mixed_6e``, its
  only input. For inputs smaller than 299 its pooling and 5x5 kernels shrink to the feature
  map (slim's ``_reduced_kernel_size_for_small_input``; slim itself only shrinks the conv).
- ``Logits``: global average pool (8x8 at 299), dropout (``dropout_keep_prob``; 1.0 builds no
  dropout ops), 1x1 conv with bias to ``num_classes``, squeeze. No weight decay term.
- ``inputs``: images ``tf.random.uniform([batch, size, size, 3])`` and labels
  ``tf.random.uniform([batch], 0, num_classes, int32)``; ``loss``: sparse softmax
  cross-entropy, mean over the batch. Optimiser: ``common.momentum_train_op``.
- Channel widths are ``max(int(d * depth_multiplier), min_depth)`` as in slim. Graph-level
  random seed 0, so values as well as structure repeat between builds.

Measured on the 2-core CPU build machine (TF 2.21):
- PAPER (299x299, batch 32, 1000 classes, depth 1.0): 7,582 ops, built in 2.5-2.8 s
  (5,516 under the ``BLOCKS`` scopes, forward ops plus the variables, their initialisers and
  batch-norm updates; 1,865 under ``gradients/``; the rest is the ``train_step`` optimiser and
  ``init``). 98 Conv2D (94 trunk, 3 aux, 1 logits), 96 FusedBatchNorm. One training step on
  the 2 CPU cores: about 12 s (the first about 21 s); initial loss about 9.9 (= 1.4 ln 1000).
- TINY (75x75, batch 2, 10 classes, depth 0.1, min depth 8): 7,516 ops (same structure),
  built in about 3 s; a training step takes well under a second.

Convolutions and batch norm come from :class:`placement_env.benchmarks.cnn.ConvBuilder` (batch
norm's ``scale`` input is a constant of ones per layer, as in slim's Inception arg scope).
"""
from __future__ import annotations

import tensorflow as tf

from .sizes import INCEPTION_V3_BLOCKS as BLOCKS  # noqa: F401 (the module's block order)
from .sizes import INCEPTION_V3_PAPER as PAPER, INCEPTION_V3_TINY as TINY  # noqa: F401 (the module's sizes)
from . import common
from .cnn import ConvBuilder, avg_pool, max_pool



MIN_IMAGE_SIZE = 75  # below this Mixed_7a's stride-2 VALID convolutions get an empty map

_BN_EPSILON = 1e-3
_BN_DECAY = 0.9997
_AUX_LOSS_WEIGHT = 0.4


def _reduced_kernel(x, kernel):
    return [min(int(x.shape[1]), kernel[0]), min(int(x.shape[2]), kernel[1])]


def _mixed_5(b: ConvBuilder, x, pool_channels):
    """Mixed_5b/5c/5d: 35x35 block with 1x1, 5x5, double 3x3 and pooled branches."""
    with tf.compat.v1.variable_scope("Branch_0"):
        b0 = b.conv(x, b.depth(64), 1, "Conv2d_0a_1x1")
    with tf.compat.v1.variable_scope("Branch_1"):
        b1 = b.conv(x, b.depth(48), 1, "Conv2d_0a_1x1")
        b1 = b.conv(b1, b.depth(64), 5, "Conv2d_0b_5x5")
    with tf.compat.v1.variable_scope("Branch_2"):
        b2 = b.conv(x, b.depth(64), 1, "Conv2d_0a_1x1")
        b2 = b.conv(b2, b.depth(96), 3, "Conv2d_0b_3x3")
        b2 = b.conv(b2, b.depth(96), 3, "Conv2d_0c_3x3")
    with tf.compat.v1.variable_scope("Branch_3"):
        b3 = avg_pool(x, 3, 1, "SAME", "AvgPool_0a_3x3")
        b3 = b.conv(b3, b.depth(pool_channels), 1, "Conv2d_0b_1x1")
    return tf.concat([b0, b1, b2, b3], axis=3)


def _mixed_6a(b: ConvBuilder, x):
    with tf.compat.v1.variable_scope("Branch_0"):
        b0 = b.conv(x, b.depth(384), 3, "Conv2d_1a_1x1", stride=2, padding="VALID")
    with tf.compat.v1.variable_scope("Branch_1"):
        b1 = b.conv(x, b.depth(64), 1, "Conv2d_0a_1x1")
        b1 = b.conv(b1, b.depth(96), 3, "Conv2d_0b_3x3")
        b1 = b.conv(b1, b.depth(96), 3, "Conv2d_1a_1x1", stride=2, padding="VALID")
    with tf.compat.v1.variable_scope("Branch_2"):
        b2 = max_pool(x, 3, 2, "VALID", "MaxPool_1a_3x3")
    return tf.concat([b0, b1, b2], axis=3)


def _mixed_6(b: ConvBuilder, x, mid):
    """Mixed_6b..6e: 17x17 block with the factorised 1x7 / 7x1 convolutions."""
    with tf.compat.v1.variable_scope("Branch_0"):
        b0 = b.conv(x, b.depth(192), 1, "Conv2d_0a_1x1")
    with tf.compat.v1.variable_scope("Branch_1"):
        b1 = b.conv(x, b.depth(mid), 1, "Conv2d_0a_1x1")
        b1 = b.conv(b1, b.depth(mid), [1, 7], "Conv2d_0b_1x7")
        b1 = b.conv(b1, b.depth(192), [7, 1], "Conv2d_0c_7x1")
    with tf.compat.v1.variable_scope("Branch_2"):
        b2 = b.conv(x, b.depth(mid), 1, "Conv2d_0a_1x1")
        b2 = b.conv(b2, b.depth(mid), [7, 1], "Conv2d_0b_7x1")
        b2 = b.conv(b2, b.depth(mid), [1, 7], "Conv2d_0c_1x7")
        b2 = b.conv(b2, b.depth(mid), [7, 1], "Conv2d_0d_7x1")
        b2 = b.conv(b2, b.depth(192), [1, 7], "Conv2d_0e_1x7")
    with tf.compat.v1.variable_scope("Branch_3"):
        b3 = avg_pool(x, 3, 1, "SAME", "AvgPool_0a_3x3")
        b3 = b.conv(b3, b.depth(192), 1, "Conv2d_0b_1x1")
    return tf.concat([b0, b1, b2, b3], axis=3)


def _mixed_7a(b: ConvBuilder, x):
    with tf.compat.v1.variable_scope("Branch_0"):
        b0 = b.conv(x, b.depth(192), 1, "Conv2d_0a_1x1")
        b0 = b.conv(b0, b.depth(320), 3, "Conv2d_1a_3x3", stride=2, padding="VALID")
    with tf.compat.v1.variable_scope("Branch_1"):
        b1 = b.conv(x, b.depth(192), 1, "Conv2d_0a_1x1")
        b1 = b.conv(b1, b.depth(192), [1, 7], "Conv2d_0b_1x7")
        b1 = b.conv(b1, b.depth(192), [7, 1], "Conv2d_0c_7x1")
        b1 = b.conv(b1, b.depth(192), 3, "Conv2d_1a_3x3", stride=2, padding="VALID")
    with tf.compat.v1.variable_scope("Branch_2"):
        b2 = max_pool(x, 3, 2, "VALID", "MaxPool_1a_3x3")
    return tf.concat([b0, b1, b2], axis=3)


def _mixed_7(b: ConvBuilder, x):
    """Mixed_7b/7c: 8x8 block with the expanded 1x3 / 3x1 filter banks."""
    with tf.compat.v1.variable_scope("Branch_0"):
        b0 = b.conv(x, b.depth(320), 1, "Conv2d_0a_1x1")
    with tf.compat.v1.variable_scope("Branch_1"):
        b1 = b.conv(x, b.depth(384), 1, "Conv2d_0a_1x1")
        b1 = tf.concat([b.conv(b1, b.depth(384), [1, 3], "Conv2d_0b_1x3"),
                        b.conv(b1, b.depth(384), [3, 1], "Conv2d_0b_3x1")], axis=3)
    with tf.compat.v1.variable_scope("Branch_2"):
        b2 = b.conv(x, b.depth(448), 1, "Conv2d_0a_1x1")
        b2 = b.conv(b2, b.depth(384), 3, "Conv2d_0b_3x3")
        b2 = tf.concat([b.conv(b2, b.depth(384), [1, 3], "Conv2d_0c_1x3"),
                        b.conv(b2, b.depth(384), [3, 1], "Conv2d_0d_3x1")], axis=3)
    with tf.compat.v1.variable_scope("Branch_3"):
        b3 = avg_pool(x, 3, 1, "SAME", "AvgPool_0a_3x3")
        b3 = b.conv(b3, b.depth(192), 1, "Conv2d_0b_1x1")
    return tf.concat([b0, b1, b2, b3], axis=3)


def _check(image_size, batch, num_classes, depth_multiplier, min_depth, dropout_keep_prob):
    for name, value, low in (("image_size", image_size, MIN_IMAGE_SIZE), ("batch", batch, 1),
                             ("num_classes", num_classes, 2), ("min_depth", min_depth, 1)):
        common.require_int("inception_v3", name, value, low)
    if not isinstance(depth_multiplier, (int, float)) or not depth_multiplier > 0:
        raise ValueError(f"inception_v3: depth_multiplier={depth_multiplier!r}; expected a number > 0")
    if not isinstance(dropout_keep_prob, (int, float)) or not 0 < dropout_keep_prob <= 1:
        raise ValueError(f"inception_v3: dropout_keep_prob={dropout_keep_prob!r}; expected 0 < p <= 1")


def build(
    image_size: int = PAPER["image_size"],
    batch: int = PAPER["batch"],
    num_classes: int = PAPER["num_classes"],
    depth_multiplier: float = PAPER["depth_multiplier"],
    min_depth: int = PAPER["min_depth"],
    dropout_keep_prob: float = PAPER["dropout_keep_prob"],
) -> common.TrainingStep:
    """One Inception-V3 training step on random images and labels (defaults: ``PAPER``)."""
    _check(image_size, batch, num_classes, depth_multiplier, min_depth, dropout_keep_prob)
    params = dict(image_size=image_size, batch=batch, num_classes=num_classes,
                  depth_multiplier=float(depth_multiplier), min_depth=min_depth,
                  dropout_keep_prob=float(dropout_keep_prob))
    b = ConvBuilder(float(depth_multiplier), min_depth, learn_gamma=False, epsilon=_BN_EPSILON, decay=_BN_DECAY)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        with tf.compat.v1.variable_scope("inputs"):
            images = tf.random.uniform([batch, image_size, image_size, 3], name="images")
            labels = tf.random.uniform([batch], 0, num_classes, dtype=tf.int32, name="labels")

        # Stem: 299 -> 149 -> 147 -> 147 -> 73 -> 73 -> 71 -> 35.
        x = b.conv(images, b.depth(32), 3, "Conv2d_1a_3x3", stride=2, padding="VALID")
        x = b.conv(x, b.depth(32), 3, "Conv2d_2a_3x3", padding="VALID")
        x = b.conv(x, b.depth(64), 3, "Conv2d_2b_3x3")
        x = max_pool(x, 3, 2, "VALID", "MaxPool_3a_3x3")
        x = b.conv(x, b.depth(80), 1, "Conv2d_3b_1x1", padding="VALID")
        x = b.conv(x, b.depth(192), 3, "Conv2d_4a_3x3", padding="VALID")
        x = max_pool(x, 3, 2, "VALID", "MaxPool_5a_3x3")

        for scope, pool_channels in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
            with tf.compat.v1.variable_scope(scope):
                x = _mixed_5(b, x, pool_channels)
        with tf.compat.v1.variable_scope("Mixed_6a"):
            x = _mixed_6a(b, x)
        for scope, mid in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
            with tf.compat.v1.variable_scope(scope):
                x = _mixed_6(b, x, mid)

        with tf.compat.v1.variable_scope("AuxLogits"):
            aux = avg_pool(x, _reduced_kernel(x, [5, 5]), 3, "VALID", "AvgPool_1a_5x5")
            aux = b.conv(aux, b.depth(128), 1, "Conv2d_1b_1x1")
            aux = b.conv(aux, b.depth(768), _reduced_kernel(aux, [5, 5]), "Conv2d_2a_5x5", padding="VALID")
            aux = b.conv(aux, num_classes, 1, "Conv2d_2b_1x1", bn=False)
            aux_logits = tf.squeeze(aux, [1, 2], name="SpatialSqueeze")

        with tf.compat.v1.variable_scope("Mixed_7a"):
            x = _mixed_7a(b, x)
        for scope in ("Mixed_7b", "Mixed_7c"):
            with tf.compat.v1.variable_scope(scope):
                x = _mixed_7(b, x)

        with tf.compat.v1.variable_scope("Logits"):
            x = avg_pool(x, _reduced_kernel(x, [8, 8]), 1, "VALID", "AvgPool_1a_8x8")
            if dropout_keep_prob < 1.0:
                x = tf.nn.dropout(x, rate=1.0 - dropout_keep_prob, name="Dropout_1b")
            x = b.conv(x, num_classes, 1, "Conv2d_1c_1x1", bn=False)
            logits = tf.squeeze(x, [1, 2], name="SpatialSqueeze")

        with tf.compat.v1.variable_scope("loss"):
            main = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            aux_loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=aux_logits))
            loss = tf.add(main, _AUX_LOSS_WEIGHT * aux_loss, name="total")

        minimize = common.momentum_train_op(loss)
        train_op = tf.group(minimize, *b.updates, name="train_step_with_bn_updates")
    return common.finish(graph, train_op, params)
