"""Random RNNs: training steps of unrolled LSTM and GRU language models and seq2seq models (with or without
attention) whose architecture and sizes a seed draws, so that a placer learns from many recurrent models rather
than from the paper's two.

``structure(seed, **overrides)`` draws the architecture from ``numpy.random.default_rng(seed)`` alone (the same
arguments always give the same graph), every value in this order:

- ``kind``: ``lm`` (a language model, as ``rnnlm``) or ``seq2seq`` (an encoder-decoder, as ``nmt``), half each;
- ``cell``: ``lstm`` (:mod:`placement_env.benchmarks.lstm`) or ``gru`` (:mod:`placement_env.benchmarks.gru`),
  half each;
- ``attention`` (a seq2seq model's, half the time): ``nmt``'s additive attention with input feeding and the
  context fed to every decoder layer and to the output projection; without it the decoder starts from the
  encoder's final states and reads its embedded input alone;
- ``layers``: 1-4 (a seq2seq model's a side);
- ``steps``: a language model's unrolled steps, 10-60, then a seq2seq model's source and target lengths,
  10-40 each (``steps`` and ``tgt_len``);
- ``vocab`` (a seq2seq model's source) and ``tgt_vocab``: log-uniform from 10,000 to 50,000, multiples of 1,000;
- ``target_bytes``: a memory target, log-uniform over ``drawing.TARGET_GIB``, and ``batch`` from ``BATCHES``
  (16-256);
- last ``units`` (= the embedding width): those of ``UNITS`` (256-4096) at which a step of the drawn batch comes
  nearest to the target by :func:`step_bytes`'s rough count (an RNN's weights and per-step weight gradients,
  most of its memory, grow with the units and not with the batch).

``overrides`` (``batch``, ``layers``, ``units``, ``steps``, ``vocab``; None keeps the drawn value) replace the
drawn sizes after everything is drawn; ``steps`` sets every length and ``vocab`` every vocabulary. The units
follow the other overrides but not ``batch``, so ``random_rnn:<seed>-batch<N>`` is the seed's model at another
batch.

The graph (no control flow, every shape static): ``inputs`` (token ids drawn in-graph; a model reads each
sequence but its last token and predicts each but its first), ``embedding`` (``encoder/embedding`` and
``decoder/embedding`` for seq2seq; lookups with a dense gradient), the unrolled layers ``<cell>_<k>`` (under
``encoder/`` and ``decoder/`` for seq2seq; step ``t`` under ``<cell>_<k>/t<t>/``; from the third layer up a layer
passes up its output plus its input, GNMT's residual connections), ``attention`` (with attention), ``softmax``
(one matmul over all steps' outputs and the vocabulary, sparse softmax cross-entropy), ``loss`` (the mean);
momentum SGD with gradients co-located with their forward ops.

Names: ``random_rnn:<seed>``, ``random_rnn:<seed>-batch<N>`` (batch N instead of the drawn one) and
``random_rnn-tiny`` (seed 0's kind, cell and attention at 2 layers of 16 units, 4 steps, vocabulary 50, batch 2).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from . import common, drawing
from .gru import GRULayer
from .lstm import LSTMLayer, softmax_xent
from .nmt import attention_decoder, attention_memory, output_variables, residual_output, seq2seq_inputs, seq2seq_loss
from .sizes import RANDOM_RNN_PAPER as PAPER, RANDOM_RNN_TINY as TINY  # noqa: F401 (the module's sizes)

__all__ = ["PAPER", "TINY", "KINDS", "CELLS", "UNITS", "OVERRIDES", "structure", "step_bytes", "build"]

NAME = "random_rnn"
KINDS = ("lm", "seq2seq")
CELLS = {"lstm": LSTMLayer, "gru": GRULayer}
UNITS = (256, 512, 768, 1024, 1536, 2048, 3072, 4096)
BATCHES = (16, 32, 64, 128, 256)
VOCAB = (10000, 50000)
OVERRIDES = ("batch", "layers", "units", "steps", "vocab")
_GATES = {"lstm": 4, "gru": 3}  # gate and candidate widths per unit: the columns of a layer's kernels

# step_bytes's floats: per unrolled step, layer and weight, the step's own weight gradient, kept until the steps'
# gradients are summed; per sequence, per layer, step and gate column, per logit and per attention energy.
_PER_STEP_WEIGHT, _PER_GATE, _PER_LOGIT, _PER_ENERGY = 0.6, 0.5, 1.5, 1


def structure(seed: int = PAPER["seed"], **overrides: int | None) -> dict[str, Any]:
    """The architecture drawn for ``seed`` with ``overrides`` applied, without TensorFlow (see the module
    docstring); ``tgt_len`` and ``tgt_vocab`` are None for a language model."""
    seed = common.require_int(NAME, "seed", seed, 0, maximum=None)
    given = drawing.check_overrides(NAME, OVERRIDES, overrides)
    rng = np.random.default_rng(seed)
    kind = KINDS[int(rng.integers(len(KINDS)))]
    cell = sorted(CELLS)[int(rng.integers(len(CELLS)))]
    attention = bool(rng.random() < 0.5)
    layers = int(rng.integers(1, 5))
    lm_steps, lengths = int(rng.integers(10, 61)), [int(n) for n in rng.integers(10, 41, size=2)]
    vocabs = [drawing.log_uniform(rng, *VOCAB, multiple=1000) for _ in range(2)]
    target = drawing.memory_target(rng)
    batch = int(rng.choice(BATCHES))

    seq2seq = kind == "seq2seq"
    if given.get("steps") is not None:
        lm_steps, lengths = given["steps"], [given["steps"]] * 2
    if given.get("vocab") is not None:
        vocabs = [given["vocab"]] * 2
    arch = {"kind": kind, "cell": cell, "attention": attention and seq2seq,
            "layers": given.get("layers") or layers, "units": given.get("units"),
            "steps": lengths[0] if seq2seq else lm_steps, "tgt_len": lengths[1] if seq2seq else None,
            "vocab": vocabs[0], "tgt_vocab": vocabs[1] if seq2seq else None, "target_bytes": target}
    arch["units"] = arch["units"] or _units_for(arch, batch)
    arch["batch"] = given.get("batch") or batch
    return arch


def _units_for(a: dict[str, Any], batch: int) -> int:
    """The units of :data:`UNITS` at which a step of ``batch`` sequences comes nearest (by ratio) to ``a``'s memory
    target by :func:`step_bytes`'s count."""
    def miss(units: int) -> float:
        fixed, per_sequence = step_bytes({**a, "units": units})
        return abs(np.log((fixed + batch * per_sequence) / a["target_bytes"]))

    return min(UNITS, key=miss)


def _stacks(a: dict[str, Any]) -> list[tuple[int, int]]:
    """Every unrolled stack of ``a`` as (steps, input width of its layers above the first)."""
    h = a["units"]
    if a["kind"] == "lm":
        return [(a["steps"], h)]
    return [(a["steps"], h), (a["tgt_len"], 2 * h if a["attention"] else h)]


def step_bytes(a: dict[str, Any]) -> tuple[int, int]:
    """A rough count of one step's peak bytes at architecture ``a``: ``(fixed, per_sequence)``. Fixed: the weights
    with their momentum, and each unrolled step's own weight gradients (summed only when every step's is done).
    Per sequence of the batch: each layer's gates at every step, the logits, and with attention the energies of
    every target step over every source step."""
    h, gates = a["units"], _GATES[a["cell"]] * a["units"]
    target_len = a["tgt_len"] or a["steps"]
    vocab_out = a["tgt_vocab"] or a["vocab"]
    weights = h * vocab_out + vocab_out + h * (a["vocab"] + (a["tgt_vocab"] or 0))  # softmax and embeddings
    per_step = 0  # floats of weight gradient per unrolled step of every stack
    for steps, width in _stacks(a):
        layer = (width + h) * gates + gates
        weights += a["layers"] * layer
        per_step += steps * a["layers"] * layer
    if a["attention"]:
        weights += 4 * h * h + 2 * h  # keys, queries, the output projection [2h, h], score vector and bias
        per_step += target_len * 3 * h * h  # each target step's query and output-projection gradients
    floats = sum(steps * a["layers"] * _PER_GATE * gates for steps, _ in _stacks(a))
    floats += _PER_LOGIT * target_len * vocab_out
    if a["attention"]:
        floats += _PER_ENERGY * target_len * a["steps"] * h
    return 4 * (2 * weights + _PER_STEP_WEIGHT * per_step), 4 * floats


def _embedded(ids: tf.Tensor, vocab: int, units: int) -> list[tf.Tensor]:
    """Under ``embedding``: a [vocab, units] table's rows at ``ids`` [batch, steps], one tensor per step."""
    with tf.compat.v1.variable_scope("embedding"):
        table = tf.compat.v1.get_variable("embedding", shape=[vocab, units], dtype=tf.float32)
        return tf.unstack(common.embedding_lookup(table, ids), num=int(ids.shape[1]), axis=1, name="steps")


def _stack(a: dict[str, Any], inputs: Sequence[tf.Tensor], initial_states: Sequence[Any] | None = None
           ) -> tuple[list[tf.Tensor], list[Any]]:
    """``layers`` unrolled layers of ``a``'s cell over ``inputs`` (from ``initial_states``, else zeros), with
    GNMT's residual connections from the third layer up: the top layer's outputs and each layer's final state."""
    outputs, finals = list(inputs), []
    for k in range(a["layers"]):
        layer = CELLS[a["cell"]](int(outputs[0].shape[-1]), a["units"], f"{a['cell']}_{k}")
        h, final = layer.unroll(outputs, initial_states[k] if initial_states is not None else None)
        outputs = [residual_output(layer, t, h_t, x_t) for t, (h_t, x_t) in enumerate(zip(h, outputs))] if k >= 2 else h
        finals.append(final)
    return outputs, finals


def _softmax_loss(outputs: list[tf.Tensor], labels: list[tf.Tensor], units: int, vocab: int) -> tf.Tensor:
    """One softmax over every step's output under ``softmax``, and the mean cross-entropy under ``loss``."""
    with tf.compat.v1.variable_scope("softmax"):
        w = tf.compat.v1.get_variable("weights", shape=[units, vocab], dtype=tf.float32)
        b = tf.compat.v1.get_variable("bias", shape=[vocab], dtype=tf.float32,
                                      initializer=tf.compat.v1.zeros_initializer())
        xent = softmax_xent(outputs, labels, w, b)
    with tf.compat.v1.name_scope("loss"):
        return tf.reduce_mean(xent, name="mean_xent")


def _language_model(a: dict[str, Any]) -> tf.Tensor:
    batch, steps = a["batch"], a["steps"]
    with tf.compat.v1.name_scope("inputs"):
        ids = tf.random.uniform([batch, steps + 1], maxval=a["vocab"], dtype=tf.int32, name="token_ids")
        source = tf.slice(ids, [0, 0], [batch, steps], name="source")
        labels = tf.unstack(tf.slice(ids, [0, 1], [batch, steps], name="target"), num=steps, axis=1, name="labels")
    outputs, _ = _stack(a, _embedded(source, a["vocab"], a["units"]))
    return _softmax_loss(outputs, labels, a["units"], a["vocab"])


def _seq2seq(a: dict[str, Any]) -> tf.Tensor:
    p = {"batch": a["batch"], "hidden": a["units"], "src_vocab": a["vocab"], "tgt_vocab": a["tgt_vocab"],
         "src_len": a["steps"], "tgt_len": a["tgt_len"], "layers": a["layers"]}  # as nmt's helpers read them
    src, tgt_in, labels = seq2seq_inputs(p)
    with tf.compat.v1.variable_scope("encoder"):
        encoder_outputs, encoder_states = _stack(a, _embedded(src, a["vocab"], a["units"]))
    if not a["attention"]:
        with tf.compat.v1.variable_scope("decoder"):
            outputs, _ = _stack(a, _embedded(tgt_in, a["tgt_vocab"], a["units"]), encoder_states)
        return _softmax_loss(outputs, labels, a["units"], a["tgt_vocab"])
    attention = attention_memory(p, encoder_outputs)
    with tf.compat.v1.variable_scope("decoder"):
        y = _embedded(tgt_in, a["tgt_vocab"], a["units"])
        # input [y_t ; ctx_{t-1}] for the bottom layer, [h_{k-1,t} ; ctx_t] above it (nmt's decoder)
        layers = [CELLS[a["cell"]](2 * a["units"], a["units"], f"{a['cell']}_{k}") for k in range(a["layers"])]
    output = output_variables(p)
    return seq2seq_loss(output, attention_decoder(p, y, layers, encoder_states, attention, output), labels)


def build(**params: Any) -> common.TrainingStep:
    """One training step of the random RNN of ``params["seed"]`` (default :data:`PAPER`'s), the other keyword
    parameters overriding drawn sizes (:data:`OVERRIDES`)."""
    params = {**PAPER, **params}
    arch = structure(**params)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        loss = _language_model(arch) if arch["kind"] == "lm" else _seq2seq(arch)
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, {"seed": params["seed"], **arch})
