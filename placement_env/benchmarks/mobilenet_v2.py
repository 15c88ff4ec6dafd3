"""MobileNetV2 benchmark: one ImageNet training step (Sandler et al. 2018, "MobileNetV2: Inverted Residuals and
Linear Bottlenecks", Table 2), a CNN of another family than ResNet-50 whose units also run one after another with
an identity shortcut around most of them.

Structure, in forward order (``BLOCKS``, the name scopes of the blocks):

    inputs, conv1, block1/unit_1, block2/unit_1..2, block3/unit_1..3, block4/unit_1..4, block5/unit_1..3,
    block6/unit_1..3, block7/unit_1, conv_last, logits, loss

- ``conv1``: 3x3/2 convolution to 32 channels (224 -> 112), batch norm, ReLU6.
- ``block<s>/unit_<u>``: inverted residual units (``STAGES``: expansion t, output channels c, units n, stride s
  of the stage's first unit): ``expand`` 1x1 convolution to t x the input's channels with batch norm and ReLU6
  (absent when t = 1), ``depthwise`` 3x3 depthwise convolution (stride s in the first unit) with batch norm and
  ReLU6, ``project`` 1x1 convolution to c with batch norm and no activation (the linear bottleneck); the input
  is added to the output where the unit keeps the shape (stride 1, same channels): 10 of the 17 units.
- ``conv_last``: 1x1 convolution to 1280 channels, batch norm, ReLU6 (7x7 pixels).
- ``logits``: global average pool, 1x1 convolution with bias to ``num_classes``, squeeze. No dropout, no weight
  decay term.
- Every convolution but the logits' is without bias; batch norm in training mode with learned scale and offset,
  epsilon 1e-3 and moving averages with decay 0.999 (Keras' ``MobileNetV2``), from
  :class:`placement_env.benchmarks.cnn.ConvBuilder`, whose moving-average updates are grouped with the optimiser
  into the train op.
- ``inputs``: images ``tf.random.uniform([batch, size, size, 3])`` and labels
  ``tf.random.uniform([batch], 0, num_classes, int32)``; ``loss``: sparse softmax cross-entropy, mean over the
  batch. Optimiser: ``common.momentum_train_op``.
- Channel widths are ``max(int(d * depth_multiplier), min_depth)`` (the project's rule for every CNN here, not
  the paper's rounding to multiples of 8; the same at full width). Graph-level random seed 0.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): 224x224 ImageNet images, 1000 classes, full width,
batch 96 (the paper trained with 96 per worker over 16 GPUs). Parameters: 3.5 M (3,504,872, as Keras'
``MobileNetV2`` counts its trainable weights).
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .cnn import ConvBuilder, classifier_step, pooled_logits
from .sizes import BLOCKS as LAYOUTS, MOBILENET_V2_STAGES as STAGES
from .sizes import MOBILENET_V2_PAPER as PAPER, MOBILENET_V2_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "STAGES", "BLOCKS", "MIN_IMAGE_SIZE", "build"]

BLOCKS = LAYOUTS["mobilenet_v2"](PAPER)  # the same for every size

MIN_IMAGE_SIZE = 32  # five stride-2 steps take 32 pixels to 1

_FIRST_CHANNELS = 32
_LAST_CHANNELS = 1280
_BN_EPSILON = 1e-3  # Keras' MobileNetV2 (BatchNormalization(epsilon=1e-3, momentum=0.999))
_BN_DECAY = 0.999


def _inverted_residual(b: ConvBuilder, x: tf.Tensor, expansion: int, channels: int, stride: int) -> tf.Tensor:
    inputs = int(x.shape[-1])
    y = x
    if expansion != 1:
        y = tf.nn.relu6(b.conv(y, inputs * expansion, 1, "expand", relu=False), name="expand_relu6")
    y = tf.nn.relu6(b.depthwise_conv(y, 3, "depthwise", stride=stride), name="depthwise_relu6")
    y = b.conv(y, channels, 1, "project", relu=False)
    return tf.add(x, y, name="add") if stride == 1 and inputs == channels else y


def build(**params) -> common.TrainingStep:
    """One MobileNetV2 training step on random images and labels; keyword parameters default to :data:`PAPER`."""
    return classifier_step("mobilenet_v2", PAPER, params, MIN_IMAGE_SIZE, _logits, bn_epsilon=_BN_EPSILON,
                           bn_decay=_BN_DECAY)


def _logits(b: ConvBuilder, images: tf.Tensor, p: dict) -> tf.Tensor:
    with tf.compat.v1.variable_scope("conv1"):
        x = tf.nn.relu6(b.conv(images, b.depth(_FIRST_CHANNELS), 3, "conv", stride=2, relu=False), name="relu6")
    for s, (expansion, channels, units, stride) in enumerate(STAGES, start=1):
        for u in range(units):
            with tf.compat.v1.variable_scope(f"block{s}/unit_{u + 1}"):
                x = _inverted_residual(b, x, expansion, b.depth(channels), stride if u == 0 else 1)
    with tf.compat.v1.variable_scope("conv_last"):
        x = tf.nn.relu6(b.conv(x, b.depth(_LAST_CHANNELS), 1, "conv", relu=False), name="relu6")
    return pooled_logits(b, x, p["num_classes"])
