"""VGG-16 benchmark: one ImageNet training step (Simonyan & Zisserman 2015, configuration D), a CNN whose
layers run one after another, with no branches and no shortcuts.

Structure, in forward order (``BLOCKS``, the name scopes of the blocks):

    inputs, conv1, conv2, conv3, conv4, conv5, fc6, fc7, fc8, loss

- ``conv<s>``: 2, 2, 3, 3 and 3 convolutions 3x3/1 (``conv<s>_<k>``) with bias and ReLU, to 64, 128,
  256, 512 and 512 channels, then a 2x2/2 max pool (224 -> 7 pixels after the fifth).
- ``fc6`` (which first flattens the 7x7x512 features), ``fc7``: fully connected to 4096 with bias, ReLU and dropout 0.5 (training); ``fc8``: to
  ``num_classes`` with bias.
- No batch norm (the paper's network has none), no weight decay term; ``vgg16_bn``
  (:mod:`placement_env.benchmarks.vgg16_bn`) puts batch norm in training mode between each convolution and
  its ReLU instead of the bias.
- ``inputs``: images ``tf.random.uniform([batch, size, size, 3])`` and labels
  ``tf.random.uniform([batch], 0, num_classes, int32)``; ``loss``: sparse softmax cross-entropy, mean
  over the batch. Optimiser: ``common.momentum_train_op`` (momentum SGD, as the paper).
- Channel and fully connected widths are ``max(int(d * depth_multiplier), min_depth)``. Graph-level
  random seed 0.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): 224x224 ImageNet images, 1000 classes,
full width, batch 256 (the paper's minibatch). Parameters: 138.4 M (138,357,544).
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .cnn import ConvBuilder, classifier_step, max_pool
from .sizes import BLOCKS as LAYOUTS, VGG16_STAGES as STAGES
from .sizes import VGG16_PAPER as PAPER, VGG16_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "STAGES", "BLOCKS", "MIN_IMAGE_SIZE", "build", "build_vgg"]

BLOCKS = LAYOUTS["vgg16"](PAPER)  # the same for every size

MIN_IMAGE_SIZE = 32  # five 2x2 pools take 32 pixels to 1

_FC_WIDTH = 4096
_DROPOUT = 0.5


def _dense(x: tf.Tensor, units: int, scope: str) -> tf.Tensor:
    """x @ weights + biases (the fully connected layers)."""
    with tf.compat.v1.variable_scope(scope):
        init = tf.compat.v1.variance_scaling_initializer(1.0, "fan_in", "truncated_normal")
        w = tf.compat.v1.get_variable("weights", [int(x.shape[-1]), units], initializer=init)
        b = tf.compat.v1.get_variable("biases", [units], initializer=tf.zeros_initializer())
        return tf.nn.bias_add(tf.matmul(x, w), b)


_BN_EPSILON = 1e-5  # torchvision's vgg16_bn (BatchNorm2d defaults)
_BN_DECAY = 0.9  # torchvision's momentum 0.1 for the moving averages


def build(**params) -> common.TrainingStep:
    """One VGG-16 training step on random images and labels; keyword parameters default to :data:`PAPER`."""
    return build_vgg("vgg16", False, params)


def build_vgg(name: str, batch_norm: bool, params: dict) -> common.TrainingStep:
    """One training step of VGG-16 (``name`` in errors), with batch norm after every convolution if
    ``batch_norm``; ``params`` default to :data:`PAPER`."""
    def logits(b: ConvBuilder, x: tf.Tensor, p: dict) -> tf.Tensor:
        for s, (convs, channels) in enumerate(STAGES, start=1):
            with tf.compat.v1.variable_scope(f"conv{s}"):
                for k in range(1, convs + 1):
                    x = tf.nn.relu(b.conv(x, b.depth(channels), 3, f"conv{s}_{k}", bn=batch_norm, relu=False),
                                   name=f"relu{s}_{k}")
                x = max_pool(x, 2, 2, "VALID", "pool")
        for scope in ("fc6", "fc7"):
            with tf.compat.v1.variable_scope(scope):
                if scope == "fc6":
                    x = tf.reshape(x, [p["batch"], -1], name="flatten")
                x = tf.nn.relu(_dense(x, b.depth(_FC_WIDTH), "dense"), name="relu")
                x = tf.nn.dropout(x, rate=_DROPOUT, name="dropout")
        with tf.compat.v1.variable_scope("fc8"):
            return _dense(x, p["num_classes"], "dense")

    return classifier_step(name, PAPER, params, MIN_IMAGE_SIZE, logits, bn_epsilon=_BN_EPSILON if batch_norm else 0.0,
                           bn_decay=_BN_DECAY if batch_norm else 0.0)
