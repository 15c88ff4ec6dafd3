"""DLRM benchmark: the deep learning recommendation model (Naumov et al. 2019) at MLPerf's shape, one training step.

Graph (TF1 graph mode, no feeds, no control flow, every shape static):

- ``inputs``: dense features [batch, dense_features] (standard normal), one id per example for each table (uniform
  over its rows: Criteo's categorical features take one value each) and click labels [batch] (0 or 1), drawn
  in-graph.
- ``bottom_mlp``: the dense features through ``bottom_mlp`` ReLU layers; the last has ``dim`` units.
- ``table_<k>`` (k < number of tables): an embedding table [rows_k, dim] and the gather of its ids (one row per
  example).
- ``interaction``: the bottom MLP's output and the tables' rows stacked [batch, 1 + tables, dim], the dot product of
  every pair (a batched matmul with the transpose; the pairs below the diagonal, without self-products) and the
  bottom MLP's output beside them: [batch, dim + (1 + tables) * tables / 2].
- ``top_mlp``: ``top_mlp`` layers, ReLU between them, the last (one unit, the click logit) linear.
- ``loss``: sigmoid cross-entropy, the mean over the batch.
- ``gradients/...``, ``train_step/...``: plain SGD (``GradientDescentOptimizer``), as MLPerf's DLRM reference trains.
  A table's gradient stays sparse (``IndexedSlices``: the batch's rows) and its update is a ``ResourceScatterAdd``
  of those rows: the step never touches a table's other rows, and keeps no optimiser slot. (The other benchmarks
  use momentum and dense embedding gradients, ``common.embedding_lookup``; a sparse momentum update needs
  ``Unique``, whose output shape is unknown, and a dense one would read and write every row each step, which real
  DLRM training does not.) The MLPs' updates are ``ResourceApplyGradientDescent``.

Graph-level random seed 0, so values as well as structure repeat between builds.

Sizes (``PAPER``, from :mod:`placement_env.benchmarks.sizes`): MLPerf's DLRM (dimension 128, bottom MLP
13-512-256-128, top MLP 479-1024-1024-512-256-1) over the 26 tables of the Criteo Kaggle dataset at their full row
counts (33.8 M rows, 16.1 GiB of float32), batch 2,048. The tables alone pass one K80 die's memory, so they must be
spread over devices, as recommendation models' tables are in practice.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from . import common
from .transformer_layers import dense
from .sizes import DLRM_PAPER as PAPER, DLRM_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "build", "interaction_width"]

LEARNING_RATE = 0.1  # the DLRM reference's SGD rate on Criteo Kaggle (its run script: --learning-rate=0.1)


def interaction_width(dim: int, tables: int) -> int:
    """Width of the interaction's output: the bottom MLP's ``dim`` and one dot product per pair of the
    ``1 + tables`` vectors."""
    return dim + (tables + 1) * tables // 2


def _positive_ints(name: str, value: Any, *, maximum: int = common.MAX_SIZE) -> tuple[int, ...]:
    """``value`` as a non-empty tuple of ints from 1 to ``maximum``, or a ValueError naming the parameter."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0:
        raise ValueError(f"dlrm: {name}={value!r}; expected a non-empty list of positive integers")
    return tuple(common.require_int("dlrm", f"{name}[{k}]", v, maximum=maximum) for k, v in enumerate(value))


def _relu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(x, name="relu")


def _mlp(x: tf.Tensor, sizes: tuple[int, ...], last_relu: bool) -> tf.Tensor:
    """Dense layers ``layer_<k>`` of ``sizes`` units (Glorot-uniform kernels), ReLU after each
    but the last unless ``last_relu``."""
    for k, units in enumerate(sizes):
        relu = last_relu or k + 1 < len(sizes)
        x = dense(x, units, f"layer_{k}", activation=_relu if relu else None,
                  initializer=tf.compat.v1.glorot_uniform_initializer())
    return x


def build(**params) -> common.TrainingStep:
    """Build one DLRM training step; keyword parameters default to :data:`PAPER`."""
    p = common.check_params("dlrm", PAPER, params)
    # A table's rows are bounded by int32 ids, not by MAX_SIZE (Criteo's largest has 10 M rows).
    rows = _positive_ints("table_rows", p["table_rows"], maximum=2**31 - 1)
    bottom, top = _positive_ints("bottom_mlp", p["bottom_mlp"]), _positive_ints("top_mlp", p["top_mlp"])
    batch, dim = p["batch"], p["dim"]
    if bottom[-1] != dim:
        raise ValueError(f"dlrm: bottom_mlp={list(bottom)} ends in {bottom[-1]} units, but dim={dim}; the bottom "
                         "MLP's output is dotted with the tables' rows, so its last layer must have dim units")
    if top[-1] != 1:
        raise ValueError(f"dlrm: top_mlp={list(top)} ends in {top[-1]} units; expected 1 (the click logit)")
    p = {**p, "table_rows": rows, "bottom_mlp": bottom, "top_mlp": top}
    n_tables = len(rows)
    vectors = n_tables + 1
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        with tf.compat.v1.name_scope("inputs"):
            dense_features = tf.random.normal([batch, p["dense_features"]], name="dense")
            ids = [tf.random.uniform([batch], maxval=r, dtype=tf.int32, name=f"ids_{k}") for k, r in enumerate(rows)]
            labels = tf.cast(tf.random.uniform([batch]) < 0.5, tf.float32, name="labels")

        with tf.compat.v1.variable_scope("bottom_mlp"):
            bottom_out = _mlp(dense_features, bottom, last_relu=True)

        embedded = []
        for k, r in enumerate(rows):
            with tf.compat.v1.variable_scope(f"table_{k}"):
                bound = 1.0 / r ** 0.5  # DLRM's uniform(-1/sqrt(rows), 1/sqrt(rows))
                table = tf.compat.v1.get_variable(
                    "embeddings", [r, dim], initializer=tf.compat.v1.random_uniform_initializer(-bound, bound))
                embedded.append(tf.gather(table, ids[k], name="gather"))

        with tf.compat.v1.name_scope("interaction"):
            stacked = tf.stack([bottom_out, *embedded], axis=1, name="stacked")  # [batch, vectors, dim]
            dots = tf.matmul(stacked, stacked, transpose_b=True, name="dots")  # [batch, vectors, vectors]
            below = [i * vectors + j for i in range(vectors) for j in range(i)]
            pairs = tf.gather(tf.reshape(dots, [batch, vectors * vectors]), below, axis=1, name="pairs")
            features = tf.concat([bottom_out, pairs], axis=1, name="features")

        with tf.compat.v1.variable_scope("top_mlp"):
            logits = tf.squeeze(_mlp(features, top, last_relu=False), axis=1, name="logits")
        with tf.compat.v1.name_scope("loss"):
            xent = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="xent")
            loss = tf.reduce_mean(xent, name="mean_xent")
        tf.compat.v1.add_to_collection(common.LOSS_COLLECTION, loss)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
        train_op = optimizer.minimize(loss, colocate_gradients_with_ops=True, name="train_step")
    return common.finish(graph, train_op, p)
