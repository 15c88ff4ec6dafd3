"""Convolution + batch norm layers and pooling shared by the CNN benchmarks (Inception-V3, ResNet-50, VGG-16,
MobileNetV2).

Every convolution is ``conv2d`` without bias, then batch norm in training mode (batch statistics,
learned beta, gamma learned or fixed at one), then ReLU (optional), as TF-slim's arg scopes build
them; or ``conv2d`` + bias with no batch norm (the logits layers). The moving mean/variance
updates are plain ``AssignSubVariableOp`` ops co-located with their variables and collected in
``ConvBuilder.updates``; the builder groups them with the optimiser into the train op.

``classifier_step`` builds the training step around a model's layers (random images and labels in, softmax
cross-entropy and momentum SGD out) for the classifiers without an auxiliary head (ResNet-50, VGG-16, MobileNetV2).

Batch norm is the ``FusedBatchNorm`` (V1) op, not ``FusedBatchNormV3``
(``tf.compat.v1.nn.fused_batch_norm``): V3's ``reserve_space_3`` output has no static shape,
V1's outputs and its gradient's all do.
"""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from . import common


class ConvBuilder:
    """Holds the width rule and batch-norm settings, and collects the moving-average updates."""

    def __init__(self, depth_multiplier: float, min_depth: int, *, learn_gamma: bool, epsilon: float,
                 decay: float):
        self.depth_multiplier = depth_multiplier
        self.min_depth = min_depth
        self.learn_gamma = learn_gamma  # False: a constant scale of ones (slim's Inception scope)
        self.epsilon = epsilon
        self.decay = decay
        self.updates: list[tf.Operation] = []

    def depth(self, d: int) -> int:
        """Channels of a layer that has ``d`` at full width: ``max(int(d * multiplier), min_depth)``."""
        return max(int(d * self.depth_multiplier), self.min_depth)

    def conv(self, x, channels, kernel, scope, stride=1, padding="SAME", bn=True, relu=True):
        """conv2d, then batch norm in training mode (+ ReLU when ``relu``), or + bias when ``bn`` is False."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        in_ch = int(x.shape[-1])
        with tf.compat.v1.variable_scope(scope):
            init = tf.compat.v1.variance_scaling_initializer(2.0 if bn else 1.0, "fan_in", "truncated_normal")
            w = tf.compat.v1.get_variable("weights", [kh, kw, in_ch, channels], initializer=init)
            y = tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding)
            if not bn:
                b = tf.compat.v1.get_variable("biases", [channels], initializer=tf.zeros_initializer())
                return tf.nn.bias_add(y, b)
            y = self.batch_norm(y, channels)
            return tf.nn.relu(y) if relu else y

    def depthwise_conv(self, x, kernel, scope, stride=1):
        """A depthwise ``kernel`` x ``kernel`` convolution (one filter per input channel), then batch norm in
        training mode; no activation (the caller's)."""
        channels = int(x.shape[-1])
        with tf.compat.v1.variable_scope(scope):
            init = tf.compat.v1.variance_scaling_initializer(2.0, "fan_in", "truncated_normal")
            w = tf.compat.v1.get_variable("depthwise_weights", [kernel, kernel, channels, 1], initializer=init)
            y = tf.nn.depthwise_conv2d(x, w, strides=[1, stride, stride, 1], padding="SAME")
            return self.batch_norm(y, channels)

    def batch_norm(self, y, channels):
        """Fused batch norm in training mode; its moving-average updates go to ``self.updates``."""
        with tf.compat.v1.variable_scope("BatchNorm"):
            beta = tf.compat.v1.get_variable("beta", [channels], initializer=tf.zeros_initializer())
            if self.learn_gamma:
                gamma = tf.compat.v1.get_variable("gamma", [channels], initializer=tf.ones_initializer())
            moving_mean = tf.compat.v1.get_variable(
                "moving_mean", [channels], initializer=tf.zeros_initializer(), trainable=False)
            moving_var = tf.compat.v1.get_variable(
                "moving_variance", [channels], initializer=tf.ones_initializer(), trainable=False)
            empty = tf.constant([], tf.float32, name="empty")
            if not self.learn_gamma:
                gamma = tf.ones([channels], name="gamma")
            out, mean, var, _, _ = tf.raw_ops.FusedBatchNorm(
                x=y, scale=gamma, offset=beta, mean=empty, variance=empty,
                epsilon=self.epsilon, data_format="NHWC", is_training=True, name="FusedBatchNorm")
            with tf.name_scope("update_moving"):
                for moving, batch_stat in ((moving_mean, mean), (moving_var, var)):
                    with tf.compat.v1.get_default_graph().colocate_with(moving.op):
                        delta = (moving.read_value() - batch_stat) * (1.0 - self.decay)
                        self.updates.append(moving.assign_sub(delta, read_value=False))
        return out


def check_image_params(model: str, p: dict, min_image_size: int) -> None:
    """The image classifiers' shared parameters: an image size of at least ``min_image_size``, two classes or
    more, a width multiplier above zero (errors name ``model`` and the bad value)."""
    common.require_int(model, "image_size", p["image_size"], min_image_size)
    common.require_int(model, "num_classes", p["num_classes"], 2)
    multiplier = p["depth_multiplier"]
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not multiplier > 0:
        raise ValueError(f"{model}: depth_multiplier={multiplier!r}; expected a number > 0")


def random_images(batch: int, size: int, num_classes: int) -> tuple[tf.Tensor, tf.Tensor]:
    """In scope ``inputs``: uniform random images [batch, size, size, 3] and integer labels [batch]."""
    with tf.compat.v1.variable_scope("inputs"):
        images = tf.random.uniform([batch, size, size, 3], name="images")
        labels = tf.random.uniform([batch], 0, num_classes, dtype=tf.int32, name="labels")
    return images, labels


def classifier_step(model: str, defaults: dict, params: dict, min_image_size: int,
                    features: Callable[[ConvBuilder, tf.Tensor, dict], tf.Tensor], *, bn_epsilon: float,
                    bn_decay: float) -> common.TrainingStep:
    """One training step of the image classifier ``model`` on random images and labels: ``params`` checked
    against ``defaults`` (errors name ``model``), ``features(b, images, p)`` the logits [batch, num_classes] from
    the layers it builds with ``b``, a :class:`ConvBuilder` at the parameters' width with learned batch-norm scales
    (``bn_epsilon``, ``bn_decay``), then sparse softmax cross-entropy (scope ``loss``), momentum SGD and the batch
    norms' moving-average updates in the train op. Graph-level random seed 0."""
    p = common.check_params(model, defaults, params)
    check_image_params(model, p, min_image_size)
    p["depth_multiplier"] = float(p["depth_multiplier"])
    b = ConvBuilder(p["depth_multiplier"], p["min_depth"], learn_gamma=True, epsilon=bn_epsilon, decay=bn_decay)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        images, labels = random_images(p["batch"], p["image_size"], p["num_classes"])
        logits = features(b, images, p)
        with tf.compat.v1.variable_scope("loss"):
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.reduce_mean(xent, name="mean_xent")
        train_op = common.momentum_train_op(loss)
        if b.updates:
            train_op = tf.group(train_op, *b.updates, name="train_step_with_bn_updates")
    return common.finish(graph, train_op, p)


def pooled_logits(b: ConvBuilder, x: tf.Tensor, num_classes: int) -> tf.Tensor:
    """In scope ``logits``: global average pool, 1x1 convolution with bias to ``num_classes``, squeeze."""
    with tf.compat.v1.variable_scope("logits"):
        x = tf.reduce_mean(x, axis=[1, 2], keepdims=True, name="global_pool")
        x = b.conv(x, num_classes, 1, "conv", bn=False)
        return tf.squeeze(x, [1, 2], name="squeeze")


def max_pool(x, kernel, stride, padding, name):
    return tf.nn.max_pool2d(x, kernel, stride, padding, name=name)


def avg_pool(x, kernel, stride, padding, name):
    return tf.nn.avg_pool2d(x, kernel, stride, padding, name=name)
