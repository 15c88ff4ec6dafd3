"""Random CNNs: ImageNet-style training steps whose architecture a seed draws, from chains of plain convolutions
through residual units to Inception-like branched modules, so that a placer learns from structure rather than
from a handful of named families.

``structure(seed, stages, units)`` draws the architecture from ``numpy.random.default_rng(seed)`` alone (the
same parameters always give the same graph):

- the graph's own mix of unit kinds, ``mix = rng.dirichlet([0.5, 0.5, 0.5])`` over ``KINDS`` (so some graphs are
  nearly all chains, some nearly all branched modules, some mixed);
- per stage (``stages`` of them, widths ``width * 2**s``), ``1 .. 2 * units - 1`` units, each of a kind drawn from
  the mix:

  - ``plain``: one or two 3x3 convolutions with batch norm and ReLU, one after the other;
  - ``residual``: a bottleneck (1x1 to a quarter of the width, 3x3, 1x1 back) or a basic unit (two 3x3), the
    last convolution without ReLU, added to the input (through a 1x1 projection where the shape changes),
    then ReLU;
  - ``branched``: 2-4 parallel paths, each a 1x1 convolution, 1x1 then 3x3, 1x1 then two 3x3, or a 3x3 average
    pool then 1x1, their outputs concatenated to the stage's width.

  The first unit of every stage after the first halves the image (stride 2 in its spatial operations).

The graph, in forward order: ``inputs`` (random images and labels), ``stem`` (3x3/2 convolution to ``width``,
batch norm, ReLU, 3x3/2 max pool), ``stage<s>/unit_<u>``, ``logits`` (global average pool, 1x1 convolution
with bias), ``loss`` (softmax cross-entropy); momentum SGD, batch norm in training mode (epsilon 1e-5, decay
0.997) whose moving-average updates join the train op. Channel widths follow the project's rule
``max(int(d * depth_multiplier), min_depth)``. Graph-level random seed 0.

Names: ``random_cnn:<seed>`` (``PAPER`` with that seed), ``random_cnn:<seed>-batch<N>`` (and batch N), and
``random_cnn-tiny``.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from . import common
from .cnn import ConvBuilder, avg_pool, classifier_step, max_pool, pooled_logits
from .sizes import RANDOM_CNN_PAPER as PAPER, RANDOM_CNN_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "KINDS", "PATHS", "structure", "build"]

KINDS = ("plain", "residual", "branched")
PATHS = ("1x1", "3x3", "double_3x3", "pool")
_BN_EPSILON = 1e-5  # ResNet-50's batch norm (resnet50.py), the residual units' origin
_BN_DECAY = 0.997


def structure(seed: int = PAPER["seed"], stages: int = PAPER["stages"],
              units: int = PAPER["units"]) -> list[list[dict]]:
    """The architecture drawn for ``seed``, without TensorFlow: ``stages`` lists of units, each a dict with
    ``kind`` and, for ``plain``, ``convs`` (1 or 2); for ``residual``, ``bottleneck`` (bool); for ``branched``,
    ``paths`` (names from ``PATHS``)."""
    rng = np.random.default_rng(seed)
    mix = rng.dirichlet([0.5, 0.5, 0.5])
    drawn = []
    for _ in range(stages):
        stage = []
        for _ in range(int(rng.integers(1, 2 * units))):
            kind = KINDS[int(rng.choice(len(KINDS), p=mix))]
            if kind == "plain":
                stage.append({"kind": kind, "convs": int(rng.integers(1, 3))})
            elif kind == "residual":
                stage.append({"kind": kind, "bottleneck": bool(rng.integers(2))})
            else:
                paths = rng.integers(len(PATHS), size=int(rng.integers(2, 5)))
                stage.append({"kind": kind, "paths": [PATHS[int(k)] for k in paths]})
        drawn.append(stage)
    return drawn


def _plain(b: ConvBuilder, x: tf.Tensor, width: int, stride: int, unit: dict) -> tf.Tensor:
    for k in range(unit["convs"]):
        x = b.conv(x, width, 3, f"conv{k + 1}", stride=stride if k == 0 else 1)
    return x


def _residual(b: ConvBuilder, x: tf.Tensor, width: int, stride: int, unit: dict) -> tf.Tensor:
    same = stride == 1 and int(x.shape[-1]) == width
    shortcut = x if same else b.conv(x, width, 1, "shortcut", stride=stride, relu=False)
    if unit["bottleneck"]:
        inner = max(width // 4, b.min_depth)
        y = b.conv(x, inner, 1, "conv1")
        y = b.conv(y, inner, 3, "conv2", stride=stride)
        y = b.conv(y, width, 1, "conv3", relu=False)
    else:
        y = b.conv(x, width, 3, "conv1", stride=stride)
        y = b.conv(y, width, 3, "conv2", relu=False)
    return tf.nn.relu(tf.add(shortcut, y, name="residual"), name="relu")


def _branched(b: ConvBuilder, x: tf.Tensor, width: int, stride: int, unit: dict) -> tf.Tensor:
    paths = unit["paths"]
    outputs = []
    for k, path in enumerate(paths):
        channels = width // len(paths) + (width % len(paths) if k == len(paths) - 1 else 0)
        with tf.compat.v1.variable_scope(f"path{k + 1}"):
            if path == "1x1":
                y = b.conv(x, channels, 1, "conv", stride=stride)
            elif path == "pool":
                y = b.conv(avg_pool(x, 3, stride, "SAME", "avg_pool"), channels, 1, "conv")
            else:
                y = b.conv(x, channels, 1, "reduce")
                y = b.conv(y, channels, 3, "conv1", stride=stride)
                if path == "double_3x3":
                    y = b.conv(y, channels, 3, "conv2")
        outputs.append(y)
    return tf.concat(outputs, axis=3, name="concat")


_UNITS = {"plain": _plain, "residual": _residual, "branched": _branched}


def build(**params) -> common.TrainingStep:
    """One training step of the random CNN of ``params["seed"]``; keyword parameters default to :data:`PAPER`."""
    seed = common.require_int("random_cnn", "seed", params.pop("seed", PAPER["seed"]), 0, maximum=None)
    sizes = {key: value for key, value in PAPER.items() if key != "seed"}  # ints from 1 up, as check_params takes
    p = common.check_params("random_cnn", sizes, params)
    common.require_int("random_cnn", "stages", p["stages"], 1, maximum=6)
    common.require_int("random_cnn", "units", p["units"], 1, maximum=8)
    common.require_int("random_cnn", "width", p["width"])
    drawn = structure(seed, p["stages"], p["units"])

    def logits(b: ConvBuilder, images: tf.Tensor, q: dict) -> tf.Tensor:
        with tf.compat.v1.variable_scope("stem"):
            x = max_pool(b.conv(images, b.depth(q["width"]), 3, "conv", stride=2), 3, 2, "SAME", "max_pool")
        for s, stage in enumerate(drawn):
            width = b.depth(q["width"] * 2 ** s)
            for u, unit in enumerate(stage):
                with tf.compat.v1.variable_scope(f"stage{s + 1}/unit_{u + 1}"):
                    x = _UNITS[unit["kind"]](b, x, width, 2 if u == 0 and s > 0 else 1, unit)
        return pooled_logits(b, x, q["num_classes"])

    # the stem halves the image twice and each later stage once more
    step = classifier_step("random_cnn", sizes, p, 2 ** (p["stages"] + 1), logits, bn_epsilon=_BN_EPSILON,
                           bn_decay=_BN_DECAY)
    return dataclasses.replace(step, params={"seed": seed, **step.params})
