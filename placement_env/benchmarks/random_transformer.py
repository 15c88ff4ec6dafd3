"""Random Transformers: training steps of decoder-only (GPT-like), encoder-only (BERT-like) and encoder-decoder
Transformers whose architecture and sizes a seed draws, so that a placer learns from many attention models rather
than from a handful of named ones.

``structure(seed, **overrides)`` draws the architecture from ``numpy.random.default_rng(seed)`` alone (the same
arguments always give the same graph), every value in this order:

- ``kind``: ``decoder`` (causal language model), ``encoder`` (masked language model on 15% of the positions) or
  ``encoder_decoder`` (translation), one third each;
- ``layers``: 2-12 for one stack, 1-6 a side for an encoder-decoder;
- ``d_model`` from ``D_MODELS`` (256-1024), the head width from ``D_HEADS`` (32-128; ``heads = d_model / d_head``),
  the feed-forward ratio from ``FFN_RATIOS`` (``d_ff = ratio * d_model``);
- ``seq_len`` (an encoder-decoder's source) and ``tgt_len`` (its target) from ``LENGTHS`` (64-512);
- ``vocab``: log-uniform from 8,000 to 64,000, a multiple of 1,000;
- ``pre_norm`` (GPT-2's ``x + f(LN(x))`` with a final LayerNorm per stack) or post-norm (``LN(x + f(x))``, the
  Transformer paper's and BERT's), ``tied`` (one table for the input and output embeddings, an encoder-decoder's
  source and target too) or untied, each half the time;
- ``activation`` of the feed-forward layers (ReLU or GELU), ``positions`` (learned or the fixed sinusoids),
  ``dropout`` (0 or 0.1);
- ``target_bytes``: a memory target, log-uniform over ``drawing.TARGET_GIB``, and last ``batch``, the largest
  (1 to ``drawing.MAX_BATCH``) whose step, by :func:`step_bytes`'s rough count, stays within the target.

``overrides`` (``batch``, ``layers``, ``d_model``, ``heads``, ``seq_len``, ``vocab``; None keeps the drawn value)
replace the drawn sizes after everything is drawn; ``seq_len`` sets every length of the model, and without
``heads`` the heads are the most that divide ``d_model`` at no less than the drawn head width.

The graph (layers from :mod:`placement_env.benchmarks.transformer_layers`, hidden states [batch * length,
d_model]): ``inputs`` (token ids drawn in-graph; the causal mask; an encoder's masked positions and their labels),
``embedding`` (lookups with a dense gradient, plus learned positions, or scaled by sqrt(d_model) plus the
sinusoids, then dropout), ``encoder/layer_<k>`` (``self_attention``, ``ffn``), ``decoder/layer_<k>`` (masked
``self_attention``, an encoder-decoder's ``cross_attention``, ``ffn``), ``<stack>/final_norm`` when pre-norm,
``masked_lm`` (an encoder's: the hidden states at the masked positions, a dense transform with the activation
and a LayerNorm), ``softmax`` (logits against the input table when tied, else a separate [vocab, d_model] output
table; sparse softmax cross-entropy), ``loss`` (the mean); momentum SGD with gradients co-located with their
forward ops. Graph-level random seed 0.

Names: ``random_transformer:<seed>``, ``random_transformer:<seed>-batch<N>`` (batch N instead of the drawn one)
and ``random_transformer-tiny`` (seed 0's kind, norm, tying, activation, positions and dropout at 2 layers,
d_model 16, 2 heads, length 8, vocabulary 50, batch 2).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from . import common, drawing
from .sizes import RANDOM_TRANSFORMER_PAPER as PAPER, RANDOM_TRANSFORMER_TINY as TINY  # noqa: F401 (module's sizes)
from .transformer_layers import (Dims, attention, causal_mask, check_dims, dense, dropout, feed_forward, gelu,
                                 layer_norm, residual, sinusoid_positions, tied_logits_xent)

__all__ = ["PAPER", "TINY", "KINDS", "D_MODELS", "D_HEADS", "FFN_RATIOS", "LENGTHS", "OVERRIDES", "structure",
           "step_bytes", "build"]

NAME = "random_transformer"
KINDS = ("decoder", "encoder", "encoder_decoder")
D_MODELS = (256, 384, 512, 640, 768, 1024)
D_HEADS = (32, 64, 128)
FFN_RATIOS = (2, 3, 4)
LENGTHS = (64, 128, 256, 512)
VOCAB = (8000, 64000)
MASKED_SHARE = 0.15  # BERT's share of masked positions
OVERRIDES = ("batch", "layers", "d_model", "heads", "seq_len", "vocab")
_ACTIVATIONS = {"relu": tf.nn.relu, "gelu": gelu}

# step_bytes's floats kept per token: per sublayer and d_model, per layer and d_ff, per layer and attention score
# (one per head and key), per embedded position and d_model, and per logit.
_PER_WIDTH, _PER_FFN, _PER_SCORE, _PER_EMBEDDED, _PER_LOGIT = 4, 8, 3, 2, 2


def structure(seed: int = PAPER["seed"], **overrides: int | None) -> dict[str, Any]:
    """The architecture drawn for ``seed`` with ``overrides`` applied, without TensorFlow (see the module
    docstring); ``tgt_len`` is None unless an encoder-decoder, ``masked`` None unless an encoder."""
    seed = common.require_int(NAME, "seed", seed, 0, maximum=None)
    given = drawing.check_overrides(NAME, OVERRIDES, overrides)
    rng = np.random.default_rng(seed)
    kind = KINDS[int(rng.integers(len(KINDS)))]
    arch: dict[str, Any] = {
        "kind": kind,
        "layers": int(rng.integers(1, 7) if kind == "encoder_decoder" else rng.integers(2, 13)),
        "d_model": int(rng.choice(D_MODELS)),
    }
    d_head = int(rng.choice(D_HEADS))
    ratio = int(rng.choice(FFN_RATIOS))
    lengths = [int(rng.choice(LENGTHS)), int(rng.choice(LENGTHS))]
    arch["vocab"] = drawing.log_uniform(rng, *VOCAB, multiple=1000)
    arch.update(pre_norm=bool(rng.random() < 0.5), tied=bool(rng.random() < 0.5),
                activation=str(rng.choice(sorted(_ACTIVATIONS))), positions=str(rng.choice(["learned", "sinusoid"])),
                dropout=float(rng.choice([0.0, 0.1])), target_bytes=drawing.memory_target(rng))

    arch.update({key: value for key, value in given.items() if value is not None and key != "batch"})
    if given.get("seq_len") is not None:
        lengths = [given["seq_len"]] * 2
    d_model = arch["d_model"]
    heads = given.get("heads") or next(h for h in range(max(1, d_model // d_head), 0, -1) if d_model % h == 0)
    arch.update(heads=heads, d_ff=ratio * d_model, seq_len=lengths[0],
                tgt_len=lengths[1] if kind == "encoder_decoder" else None,
                masked=max(1, round(MASKED_SHARE * lengths[0])) if kind == "encoder" else None)
    check_dims(NAME, {**arch, "batch": 1})
    fixed, per_sequence = step_bytes(arch)
    arch["batch"] = given.get("batch") or drawing.batch_for(arch["target_bytes"], fixed, per_sequence)
    return arch


def _parameters(a: dict[str, Any]) -> int:
    """The model's weights (floats)."""
    d, ff = a["d_model"], a["d_ff"]
    attention_weights = 4 * d * d + 4 * d
    layer = attention_weights + 2 * d * ff + ff + d + 4 * d  # + two LayerNorms
    stacks = 2 if a["kind"] == "encoder_decoder" else 1
    weights = a["layers"] * stacks * layer
    if a["kind"] == "encoder_decoder":
        weights += a["layers"] * (attention_weights + 2 * d)  # cross-attention and its LayerNorm
    if a["kind"] == "encoder":
        weights += d * d + 3 * d  # the masked-LM transform and its LayerNorm
    tables = 1 if a["tied"] else (3 if a["kind"] == "encoder_decoder" else 2)
    weights += tables * a["vocab"] * d
    if a["positions"] == "learned":
        weights += d * (a["seq_len"] + (a["tgt_len"] or 0))
    return weights


def step_bytes(a: dict[str, Any]) -> tuple[int, int]:
    """A rough count of one step's peak bytes at architecture ``a``: ``(fixed, per_sequence)``, the weights with
    their momentum, and what one sequence of the batch keeps for the backward pass (each layer's activations and
    attention scores, the embedded tokens, the logits)."""
    d, ff, heads = a["d_model"], a["d_ff"], a["heads"]

    def stack(length: int, memory_length: int = 0) -> int:  # floats per sequence for one stack's layers
        sublayers = 3 if memory_length else 2
        return a["layers"] * length * (_PER_WIDTH * d * sublayers + _PER_FFN * ff
                                       + _PER_SCORE * heads * (length + memory_length))

    source = a["seq_len"]
    if a["kind"] == "encoder_decoder":
        target = a["tgt_len"]
        floats = stack(source) + stack(target, source) + _PER_EMBEDDED * d * (source + target)
        outputs = target
    else:
        floats = stack(source) + _PER_EMBEDDED * d * source
        outputs = a["masked"] if a["kind"] == "encoder" else source
    floats += _PER_LOGIT * outputs * a["vocab"]
    return 2 * 4 * _parameters(a), 4 * floats


def _table(name: str, a: dict[str, Any]) -> tf.Variable:
    return tf.compat.v1.get_variable(name, [a["vocab"], a["d_model"]],
                                     initializer=tf.compat.v1.random_normal_initializer(stddev=0.02))


def _embed(table: tf.Variable, ids: tf.Tensor, a: dict[str, Any], dims: Dims, scope: str) -> tf.Tensor:
    """[batch * length, d_model] under ``embedding/<scope>``: the lookup plus positions, then dropout."""
    length = int(ids.shape[1])
    with tf.compat.v1.variable_scope(scope):
        x = common.embedding_lookup(table, ids)
        if a["positions"] == "learned":
            positions = tf.compat.v1.get_variable("positions", [length, dims.d_model],
                                                  initializer=tf.compat.v1.random_normal_initializer(stddev=0.02))
        else:
            x = tf.multiply(x, dims.d_model ** 0.5, name="scaled")
            positions = sinusoid_positions(length, dims.d_model)
        x = tf.add(x, positions, name="with_positions")
        return dropout(tf.reshape(x, [dims.batch * length, dims.d_model], name="flat"), dims.dropout)


def _stack(x: tf.Tensor, a: dict[str, Any], dims: Dims, scope: str, length: int, mask: tf.Tensor | None = None,
           memory: tuple[tf.Tensor, int] | None = None) -> tf.Tensor:
    """``layers`` layers under ``scope``: self-attention (``mask``), cross-attention over ``memory`` (hidden states
    and their length) when given, feed-forward; a final LayerNorm when pre-norm."""
    post_norm = not a["pre_norm"]
    activation = _ACTIVATIONS[a["activation"]]
    with tf.compat.v1.variable_scope(scope):
        for k in range(a["layers"]):
            with tf.compat.v1.variable_scope(f"layer_{k}"):
                x = residual(x, lambda h: attention(h, h, dims, (length, length), mask), dims, "self_attention",
                             post_norm)
                if memory is not None:
                    states, memory_length = memory
                    x = residual(x, lambda h: attention(h, states, dims, (length, memory_length)), dims,
                                 "cross_attention", post_norm)
                x = residual(x, lambda h: feed_forward(h, dims, activation), dims, "ffn", post_norm)
        return layer_norm(x, "final_norm") if a["pre_norm"] else x


def _decoder_only(a: dict[str, Any], dims: Dims) -> tuple[tf.Tensor, tf.Tensor, tf.Variable]:
    """GPT-like: the top hidden states, the labels (the next token at each position) and the input table."""
    batch, length = dims.batch, a["seq_len"]
    with tf.compat.v1.name_scope("inputs"):
        ids = tf.random.uniform([batch, length + 1], maxval=a["vocab"], dtype=tf.int32, name="token_ids")
        source = tf.slice(ids, [0, 0], [batch, length], name="source")
        labels = tf.reshape(tf.slice(ids, [0, 1], [batch, length]), [batch * length], name="labels")
        mask = causal_mask(length)
    with tf.compat.v1.variable_scope("embedding"):
        table = _table("tokens", a)
        x = _embed(table, source, a, dims, "tokens")
    return _stack(x, a, dims, "decoder", length, mask), labels, table


def _encoder_only(a: dict[str, Any], dims: Dims) -> tuple[tf.Tensor, tf.Tensor, tf.Variable]:
    """BERT-like: the masked-LM transform of the hidden states at the masked positions, their labels, the table."""
    batch, length, masked = dims.batch, a["seq_len"], a["masked"]
    with tf.compat.v1.name_scope("inputs"):
        ids = tf.random.uniform([batch, length], maxval=a["vocab"], dtype=tf.int32, name="token_ids")
        positions = tf.random.uniform([batch, masked], maxval=length, dtype=tf.int32, name="masked_positions")
        offsets = tf.reshape(tf.range(batch, dtype=tf.int32) * length, [batch, 1], name="row_offsets")
        rows = tf.reshape(positions + offsets, [batch * masked], name="masked_rows")
        labels = tf.random.uniform([batch * masked], maxval=a["vocab"], dtype=tf.int32, name="masked_ids")
    with tf.compat.v1.variable_scope("embedding"):
        table = _table("words", a)
        x = _embed(table, ids, a, dims, "words")
    x = _stack(x, a, dims, "encoder", length)
    with tf.compat.v1.variable_scope("masked_lm"):
        picked = common.embedding_lookup(x, rows, "gather_masked")  # [batch * masked, d_model]
        transformed = layer_norm(dense(picked, dims.d_model, "transform", _ACTIVATIONS[a["activation"]]), "norm")
    return transformed, labels, table


def _encoder_decoder(a: dict[str, Any], dims: Dims) -> tuple[tf.Tensor, tf.Tensor, tf.Variable]:
    """Translation: the decoder's top hidden states, the target labels and the target (or shared) table."""
    batch, source_length, target_length = dims.batch, a["seq_len"], a["tgt_len"]
    with tf.compat.v1.name_scope("inputs"):
        src = tf.random.uniform([batch, source_length], maxval=a["vocab"], dtype=tf.int32, name="source_ids")
        tgt = tf.random.uniform([batch, target_length + 1], maxval=a["vocab"], dtype=tf.int32, name="target_ids")
        tgt_in = tf.slice(tgt, [0, 0], [batch, target_length], name="decoder_input")
        labels = tf.reshape(tf.slice(tgt, [0, 1], [batch, target_length]), [batch * target_length], name="labels")
        mask = causal_mask(target_length)
    with tf.compat.v1.variable_scope("embedding"):
        source_table = _table("shared" if a["tied"] else "source_table", a)
        target_table = source_table if a["tied"] else _table("target_table", a)
        x = _embed(source_table, src, a, dims, "source")
        y = _embed(target_table, tgt_in, a, dims, "target")
    memory = _stack(x, a, dims, "encoder", source_length)
    return _stack(y, a, dims, "decoder", target_length, mask, (memory, source_length)), labels, target_table


_BODIES = {"decoder": _decoder_only, "encoder": _encoder_only, "encoder_decoder": _encoder_decoder}


def build(**params: Any) -> common.TrainingStep:
    """One training step of the random Transformer of ``params["seed"]`` (default :data:`PAPER`'s), the other
    keyword parameters overriding drawn sizes (:data:`OVERRIDES`)."""
    params = {**PAPER, **params}
    arch = structure(**params)
    dims = check_dims(NAME, arch)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        hidden, labels, table = _BODIES[arch["kind"]](arch, dims)
        with tf.compat.v1.variable_scope("softmax"):
            xent = tied_logits_xent(hidden, table if arch["tied"] else _table("output", arch), labels)
        with tf.compat.v1.name_scope("loss"):
            loss = tf.reduce_mean(xent, name="mean_xent")
        train_op = common.momentum_train_op(loss)
    return common.finish(graph, train_op, {"seed": params["seed"], **arch})
