"""ResNet-50 benchmark: one ImageNet training step (He et al. 2016, in the "v1.5" layout of
torchvision and the MLPerf reference: the stride sits in each stage's first 3x3 convolution).

Structure, in forward order (``BLOCKS``, the name scopes of the blocks):

    inputs, conv1, pool1, block1/unit_1..3, block2/unit_1..4, block3/unit_1..6, block4/unit_1..3,
    logits, loss

- ``conv1``: 7x7/2 convolution to 64 channels (224 -> 112); ``pool1``: 3x3/2 max pool (-> 56).
- ``block<s>/unit_<u>``: bottleneck units, ``conv1`` 1x1 to the stage's width, ``conv2`` 3x3
  (stride 2 in the first unit of stages 2-4), ``conv3`` 1x1 to 4 x width; the ``shortcut`` is a
  1x1 projection (with the same stride) in each stage's first unit and the identity otherwise;
  ``relu`` after the sum. Widths 64, 128, 256, 512 (outputs 256 ... 2048 channels at 56, 28,
  14, 7 pixels).
- Every convolution is conv2d without bias + batch norm in training mode (learned gamma and
  beta, epsilon 1e-5, moving averages with decay 0.997: TF-slim's ResNet arg scope) + ReLU,
  except ``conv3`` and ``shortcut`` (no ReLU before the sum); layers from
  :class:`placement_env.benchmarks.cnn.ConvBuilder`, whose moving-average updates are grouped
  with the optimiser into the train op (``train_step_with_bn_updates``).
- ``logits``: global average pool, 1x1 convolution with bias to ``num_classes``, squeeze.
  No weight decay term.
- ``inputs``: images ``tf.random.uniform([batch, size, size, 3])`` and labels
  ``tf.random.uniform([batch], 0, num_classes, int32)``; ``loss``: sparse softmax cross-entropy,
  mean over the batch. Optimiser: ``common.momentum_train_op`` (momentum SGD, as the reference).
- Channel widths are ``max(int(d * depth_multiplier), min_depth)``. Graph-level random seed 0.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): 224x224 ImageNet images, 1000
classes, full width; batch 256, the published minibatch (He et al. spread it over 8 GPUs).
Parameters: 25.6 M (25,557,032). 54 convolutions: conv1, 3 in each of the 16 units, the 4
projection shortcuts and the logits.

PAPER builds 4,802 TF ops (2,356 in the OpGraph, 59 groups); TINY (32x32, width x0.125, batch 2,
10 classes, the same 16 units) 4,644 TF ops (only initialisers differ) and the same 2,356 in the
OpGraph.
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .cnn import ConvBuilder, classifier_step, max_pool, pooled_logits
from .sizes import BLOCKS as LAYOUTS, RESNET50_STAGES as STAGES
from .sizes import RESNET50_PAPER as PAPER, RESNET50_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "STAGES", "BLOCKS", "MIN_IMAGE_SIZE", "build"]

BLOCKS = LAYOUTS["resnet50"](PAPER)  # the same for every size

MIN_IMAGE_SIZE = 32  # after five stride-2 steps 32 pixels are 1x1; smaller images would shrink before the last stage

_BN_EPSILON = 1e-5
_BN_DECAY = 0.997


def _bottleneck(b: ConvBuilder, x: tf.Tensor, width: int, stride: int, project: bool) -> tf.Tensor:
    out = b.depth(4 * width)
    shortcut = b.conv(x, out, 1, "shortcut", stride=stride, relu=False) if project else x
    y = b.conv(x, b.depth(width), 1, "conv1")
    y = b.conv(y, b.depth(width), 3, "conv2", stride=stride)
    y = b.conv(y, out, 1, "conv3", relu=False)
    return tf.nn.relu(tf.add(shortcut, y, name="residual"), name="relu")


def build(**params) -> common.TrainingStep:
    """One ResNet-50 training step on random images and labels; keyword parameters default to :data:`PAPER`."""
    return classifier_step("resnet50", PAPER, params, MIN_IMAGE_SIZE, _logits, bn_epsilon=_BN_EPSILON,
                           bn_decay=_BN_DECAY)


def _logits(b: ConvBuilder, images: tf.Tensor, p: dict) -> tf.Tensor:
    x = b.conv(images, b.depth(64), 7, "conv1", stride=2)
    with tf.compat.v1.name_scope("pool1"):
        x = max_pool(x, 3, 2, "SAME", "max_pool")
    for s, (stage, units, width) in enumerate(STAGES):
        for u in range(units):
            with tf.compat.v1.variable_scope(f"{stage}/unit_{u + 1}"):
                stride = 2 if u == 0 and s > 0 else 1
                x = _bottleneck(b, x, width, stride, project=u == 0)
    return pooled_logits(b, x, p["num_classes"])
