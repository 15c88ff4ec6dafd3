"""Random layered DAG of dense layers: a synthetic training step whose structure a seed fixes.

``build(seed, layers, width, dim, batch, fan_in)`` draws the structure from
``numpy.random.default_rng(seed)`` alone (nothing else is random at build time), so the same
parameters always give the same graph (op names, types, edges) and different seeds give
different graphs:

- ``inputs``: ``x = tf.random.normal([batch, dim])``.
- Layer 0: ``width`` nodes, each reading ``x``.
- Layer ``l > 0``: ``width`` nodes; node ``i`` takes ``k`` inputs, ``k`` uniform in
  ``1..fan_in`` (capped by the number of earlier nodes): one from layer ``l - 1`` and the other
  ``k - 1`` from any earlier layer (distinct nodes). With ``k > 1`` they are combined by a
  random choice of ``add`` (AddN), ``mul`` (elementwise product) or ``concat`` (ConcatV2, then a
  ``[k*dim, dim]`` projection matmul).
- Every node then applies a dense layer (its own ``[dim, dim]`` kernel and ``[dim]`` bias:
  MatMul + BiasAdd) and a random activation out of relu / tanh / sigmoid.
- Node ``i`` of layer ``l`` lives under the name scope ``layer_{l}/node_{i}`` (variables too).
- ``loss``: the mean over sink nodes (nodes no other node reads; the whole last layer plus any
  unread earlier node) of the mean of the squares of their outputs. Optimiser:
  ``common.momentum_train_op``.

Graph-level random seed ``seed`` (so the in-graph input and initial values repeat too).
Measured on the 2-core CPU build machine (TF 2.21): ``PAPER`` (the defaults: seed 0, 12 layers
x 8 nodes, dim 256, batch 32, fan-in 2) gives 5,744 ops (1,719 under ``gradients/``) built in
about 2 s, and a training step runs in well under a second; ``TINY`` (4 x 3, dim 16, batch 4)
gives 703 ops built in about 0.2 s.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from .sizes import SYNTHETIC_PAPER as PAPER, SYNTHETIC_TINY as TINY  # noqa: F401 (the module's sizes)
from . import common


COMBINES = ("add", "mul", "concat")
ACTIVATIONS = {"relu": tf.nn.relu, "tanh": tf.nn.tanh, "sigmoid": tf.nn.sigmoid}


def structure(seed: int = 0, layers: int = 12, width: int = 8, fan_in: int = 2) -> list[list[dict]]:
    """The DAG drawn for these parameters, without TensorFlow.

    Returns ``nodes[l][i] = {"inputs": [(layer, index), ...], "combine": str | None,
    "activation": str}``; layer 0 nodes have ``inputs == [("inputs", 0)]``.
    """
    rng = np.random.default_rng(seed)
    acts = sorted(ACTIVATIONS)
    nodes: list[list[dict]] = []
    for layer in range(layers):
        row = []
        for _ in range(width):
            if layer == 0:
                srcs: list[tuple] = [("inputs", 0)]
            else:
                earlier = [(l, i) for l in range(layer) for i in range(width)]
                k = int(rng.integers(1, fan_in + 1))
                k = min(k, len(earlier))
                first = (layer - 1, int(rng.integers(width)))
                rest = [e for e in earlier if e != first]
                picks = rng.choice(len(rest), size=k - 1, replace=False) if k > 1 else []
                srcs = [first] + [rest[int(p)] for p in sorted(picks)]
            combine = str(COMBINES[int(rng.integers(len(COMBINES)))]) if len(srcs) > 1 else None
            row.append({"inputs": srcs, "combine": combine,
                        "activation": acts[int(rng.integers(len(acts)))]})
        nodes.append(row)
    return nodes


def _check(seed, layers, width, dim, batch, fan_in):
    common.require_int("synthetic", "seed", seed, 0, maximum=None)
    for name, value in (("layers", layers), ("width", width), ("dim", dim), ("batch", batch), ("fan_in", fan_in)):
        common.require_int("synthetic", name, value)


def build(
    seed: int = PAPER["seed"],
    layers: int = PAPER["layers"],
    width: int = PAPER["width"],
    dim: int = PAPER["dim"],
    batch: int = PAPER["batch"],
    fan_in: int = PAPER["fan_in"],
) -> common.TrainingStep:
    """One training step of the random DAG these parameters fix (defaults: ``PAPER``)."""
    _check(seed, layers, width, dim, batch, fan_in)
    seed, layers, width, dim, batch, fan_in = (int(v) for v in (seed, layers, width, dim, batch, fan_in))
    params = dict(seed=seed, layers=layers, width=width, dim=dim, batch=batch, fan_in=fan_in)
    nodes = structure(seed, layers, width, fan_in)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        with tf.compat.v1.variable_scope("inputs"):
            x = tf.random.normal([batch, dim], name="x")
        outputs: dict[tuple, tf.Tensor] = {("inputs", 0): x}
        read: set[tuple] = set()
        glorot = tf.compat.v1.glorot_uniform_initializer()
        for layer, row in enumerate(nodes):
            for i, node in enumerate(row):
                srcs = node["inputs"]
                read.update(srcs)
                with tf.compat.v1.variable_scope(f"layer_{layer}/node_{i}"):
                    ins = [outputs[s] for s in srcs]
                    if node["combine"] == "add":
                        h = tf.add_n(ins, name="add")
                    elif node["combine"] == "mul":
                        h = ins[0]
                        for other in ins[1:]:
                            h = tf.multiply(h, other, name="mul")
                    elif node["combine"] == "concat":
                        cat = tf.concat(ins, axis=1, name="concat")
                        proj = tf.compat.v1.get_variable("projection", [len(ins) * dim, dim], initializer=glorot)
                        h = tf.matmul(cat, proj, name="project")
                    else:
                        h = ins[0]
                    w = tf.compat.v1.get_variable("kernel", [dim, dim], initializer=glorot)
                    b = tf.compat.v1.get_variable("bias", [dim], initializer=tf.zeros_initializer())
                    h = tf.nn.bias_add(tf.matmul(h, w, name="matmul"), b, name="bias_add")
                    outputs[(layer, i)] = ACTIVATIONS[node["activation"]](h, name=node["activation"])
        sinks = [outputs[(l, i)] for l in range(layers) for i in range(width) if (l, i) not in read]
        with tf.compat.v1.variable_scope("loss"):
            terms = [tf.reduce_mean(tf.square(s)) for s in sinks]
            total = tf.add_n(terms) if len(terms) > 1 else terms[0]
            loss = tf.divide(total, float(len(terms)), name="loss")
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, params)
