"""NMT benchmark: a GNMT-like attention encoder-decoder, unrolled, one training step (paper: batch 64).

Graph (TF1 graph mode, no feeds, no control flow, every shape static; ``L`` = ``layers``, the number
of encoder layers and of decoder layers):

- ``inputs``: source ids [batch, src_len] and target ids [batch, tgt_len + 1] drawn in-graph by
  ``tf.random.uniform``; the decoder reads ``target[:, :-1]`` and predicts ``target[:, 1:]``.
- ``encoder/embedding``: [src_vocab, hidden] table, one lookup, unstacked per source step (dense
  gradient, see :func:`placement_env.benchmarks.common.embedding_lookup`; likewise for the decoder).
- ``encoder/lstm_0`` .. ``encoder/lstm_<L-1>``: unrolled LSTM layers
  (:mod:`placement_env.benchmarks.lstm`); from the third layer up (k >= 2) a layer passes up its
  output plus its input, ``encoder/lstm_<k>/t<t>/residual`` (GNMT's residual connections, Wu et
  al. 2016; the 2-layer model has none).
- ``attention/memory``, ``attention/keys``: the top encoder outputs stacked to [batch, src_len,
  hidden] and projected once by W_k (the attention keys).
- ``decoder/embedding``: [tgt_vocab, hidden] table, one lookup, unstacked per target step.
- per decoder step t (decoder layer k starts from encoder layer k's final state):
  - ``decoder/lstm_0/t<t>``: input [y_t ; ctx_{t-1}] (input feeding; ctx_{-1} = 0);
  - ``attention/t<t>``: additive (Bahdanau) attention with the bottom decoder output as query,
    score_s = v . tanh(keys_s + W_q h0_t), alpha = softmax(score), ctx_t = alpha @ memory;
  - ``decoder/lstm_<k>/t<t>`` for k = 1 .. L-1: input [h_{k-1,t} ; ctx_t] (the context feeds
    every upper layer, GNMT style), h_{k-1,t} being the output passed up by the layer below; from
    k >= 2 the layer passes up its output plus h_{k-1,t} (``.../residual``, as in the encoder);
  - ``softmax/t<t>``: attentional output a_t = tanh(W_c [h_{L-1,t} ; ctx_t]) (the context feeds
    the output projection);
- ``softmax``: all a_t concatenated to [tgt_len * batch, hidden], logits = a W_o + b over the full
  target vocabulary in one matmul (a per-step softmax would keep 50 [hidden, vocab] weight
  gradients of 1.3 GB alive until they are summed), sparse softmax cross-entropy.
- ``loss``: mean cross-entropy over steps and batch; ``gradients/...``, ``train_step/...`` from
  ``common.momentum_train_op`` (gradients co-located with their forward ops).

Layer k+1 at step t depends only on layer k at step t and itself at t-1, so the layer-wise
("expert", one layer per GPU) split can pipeline, as in the paper.

Sizes (from :mod:`placement_env.benchmarks.sizes`, which says why they were chosen). ``PAPER``:
batch 64, hidden = embedding = attention size 2048, source and target vocab 40,000 each, source
and target length 30, 2 encoder + 2 decoder layers. Parameters (430.4 M floats): embeddings 2 x
81.9M, softmax 82.0M, encoder LSTMs 2 x 33.6M, decoder LSTMs 2 x 50.3M (inputs widened by the
context), attention + output projection 16.8M. The vocabulary mostly adds parameters, the [batch,
vocab] softmax tensors and softmax FLOPs; the op count does not depend on it.

PAPER builds 10,284 TF ops (9,972 in the OpGraph, 179 groups); :func:`estimate_step_memory` = 5.5
GiB: 3.2 GiB parameters + momentum slots, 2.3 GiB activations kept for the backward pass (each
weight's one shared read, the [batch, src_len, hidden] attention energies and the [batch,
tgt_vocab] cross-entropy backprop tensors of every decoder step, the LSTM gates). TINY (batch 4,
hidden 16, vocab 50, source length 4, target length 3, 2 + 2 layers) builds 1,533 TF ops (1,305 in
the OpGraph, 191 groups).

``nmt-deep`` (``sizes.NMT_DEEP``): GNMT's 8 + 8 layers of 1,024 units, batch 128, source and
target length 60, vocab 40,000 each. Parameters 295.0 M floats (embeddings 2 x 41.0M, softmax
41.0M, encoder LSTMs 8 x 8.4M, decoder LSTMs 8 x 12.6M, attention + output projection 4.2M); it
builds 68,335 TF ops (67,639 in the OpGraph; 256 groups by default, 1,139 with max_groups=4000);
:func:`estimate_step_memory` = 10.1 GiB (2.2 GiB parameters + slots, 7.9 GiB activations).
"""
from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from . import common
from .sizes import NMT_PAPER as PAPER, NMT_TINY as TINY  # noqa: F401 (the module's sizes)
from .common import check_params, embedding_lookup
from .lstm import LSTMLayer, reenter_scope, softmax_xent

__all__ = ["PAPER", "TINY", "build", "estimate_step_memory"]


def _variable(name: str, shape: list[int], zeros: bool = False) -> tf.Variable:
    init = tf.compat.v1.zeros_initializer() if zeros else None
    return tf.compat.v1.get_variable(name, shape=shape, dtype=tf.float32, initializer=init)


@dataclass(frozen=True)
class _Attention:
    """The attention's weights and its per-step inputs computed once from the encoder."""

    scope: str  # absolute name scope: every decoder step's attention ops go under it
    w_q: tf.Tensor  # [hidden, hidden] query projection
    v_a: tf.Tensor  # [hidden] score vector
    memory: tf.Tensor  # [batch, src_len, hidden] top encoder outputs
    keys: tf.Tensor  # [batch, src_len, hidden] memory projected by W_k, plus the score bias


@dataclass(frozen=True)
class _Output:
    """The attentional output projection and the softmax over the target vocabulary."""

    scope: str  # absolute name scope of every output op
    w_c: tf.Tensor  # [2 hidden, hidden] projection of [h_top,t ; ctx_t]
    w_o: tf.Tensor  # [hidden, tgt_vocab] softmax weights
    b_o: tf.Tensor  # [tgt_vocab] softmax bias


def seq2seq_inputs(p: dict) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
    """Random source ids, the decoder's input ids and its per-step labels (the inputs shifted by one)."""
    batch, src_len, tgt_len = p["batch"], p["src_len"], p["tgt_len"]
    with tf.compat.v1.name_scope("inputs"):
        src = tf.random.uniform(
            [batch, src_len], maxval=p["src_vocab"], dtype=tf.int32, name="source_ids"
        )
        tgt = tf.random.uniform(
            [batch, tgt_len + 1], maxval=p["tgt_vocab"], dtype=tf.int32, name="target_ids"
        )
        tgt_in = tf.slice(tgt, [0, 0], [batch, tgt_len], name="decoder_input")
        tgt_out = tf.slice(tgt, [0, 1], [batch, tgt_len], name="decoder_target")
        labels = tf.unstack(tgt_out, num=tgt_len, axis=1, name="labels")
    return src, tgt_in, labels


def residual_output(layer: LSTMLayer, t: int, h: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """GNMT's residual connection at step ``t``: the layer's output ``h`` plus its input ``x``, named
    ``<layer>/t<t>/residual`` so that it belongs to the layer's step."""
    with reenter_scope(f"{layer.name_scope}/t{t}"):
        return tf.add(h, x, name="residual")


def _encoder(p: dict, src: tf.Tensor) -> tuple[list[tf.Tensor], list[tuple[tf.Tensor, tf.Tensor]]]:
    """Embedding and ``layers`` unrolled LSTM layers: top-layer outputs per source step, final state per layer."""
    hidden = p["hidden"]
    with tf.compat.v1.variable_scope("encoder"):
        with tf.compat.v1.variable_scope("embedding"):
            table = _variable("embedding", [p["src_vocab"], hidden])
            x = tf.unstack(embedding_lookup(table, src), num=p["src_len"], axis=1, name="steps")
        states = []
        for k in range(p["layers"]):
            layer = LSTMLayer(hidden, hidden, f"lstm_{k}")
            h, final = layer.unroll(x)
            # Residual connections from the third layer up, as in GNMT (none in the 2-layer model).
            x = [residual_output(layer, t, h_t, x_t) for t, (h_t, x_t) in enumerate(zip(h, x))] if k >= 2 else h
            states.append(final)
    return x, states


def attention_memory(p: dict, encoder_outputs: list[tf.Tensor]) -> _Attention:
    """The attention weights, and the memory (encoder outputs stacked) with its keys, computed once."""
    batch, hidden, src_len = p["batch"], p["hidden"], p["src_len"]
    with tf.compat.v1.variable_scope("attention"):
        scope = tf.compat.v1.get_default_graph().get_name_scope()
        w_k = tf.identity(_variable("key_kernel", [hidden, hidden]), name="read_key_kernel")
        w_q = tf.identity(_variable("query_kernel", [hidden, hidden]), name="read_query_kernel")
        v_a = tf.identity(_variable("score_vector", [hidden]), name="read_score_vector")
        b_a = tf.identity(_variable("score_bias", [hidden], zeros=True), name="read_score_bias")
        memory = tf.stack(encoder_outputs, axis=1, name="memory")  # [batch, src_len, hidden]
        flat = tf.reshape(memory, [batch * src_len, hidden], name="memory_flat")
        keys = tf.nn.bias_add(tf.matmul(flat, w_k, name="keys_matmul"), b_a, name="keys_bias")
        keys = tf.reshape(keys, [batch, src_len, hidden], name="keys")
    return _Attention(scope=scope, w_q=w_q, v_a=v_a, memory=memory, keys=keys)


def _decoder_layers(p: dict, tgt_in: tf.Tensor) -> tuple[list[tf.Tensor], list[LSTMLayer]]:
    """The decoder's embedded input per target step and its ``layers`` LSTM layers (variables only)."""
    hidden = p["hidden"]
    with tf.compat.v1.variable_scope("decoder"):
        with tf.compat.v1.variable_scope("embedding"):
            table = _variable("embedding", [p["tgt_vocab"], hidden])
            y = tf.unstack(embedding_lookup(table, tgt_in), num=p["tgt_len"], axis=1, name="steps")
        # Input [y_t ; ctx_{t-1}] for lstm_0, [h_{k-1,t} ; ctx_t] for every layer k above it.
        layers = [LSTMLayer(2 * hidden, hidden, f"lstm_{k}") for k in range(p["layers"])]
    return y, layers


def output_variables(p: dict) -> _Output:
    """The weights of the attentional output projection and of the softmax."""
    hidden = p["hidden"]
    with tf.compat.v1.variable_scope("softmax"):
        scope = tf.compat.v1.get_default_graph().get_name_scope()
        w_c = tf.identity(_variable("projection", [2 * hidden, hidden]), name="read_projection")
        w_o = tf.identity(_variable("weights", [hidden, p["tgt_vocab"]]), name="read_weights")
        b_o = tf.identity(_variable("bias", [p["tgt_vocab"]], zeros=True), name="read_bias")
    return _Output(scope=scope, w_c=w_c, w_o=w_o, b_o=b_o)


def _attend(attention: _Attention, query: tf.Tensor, t: int) -> tf.Tensor:
    """Additive attention at decoder step ``t``: the context [batch, hidden] for ``query`` (h0_t)."""
    with reenter_scope(attention.scope), tf.compat.v1.name_scope(f"t{t}"):
        q = tf.matmul(query, attention.w_q, name="query")
        q = tf.expand_dims(q, 1, name="query_expand")  # [batch, 1, hidden]
        energy = tf.tanh(tf.add(attention.keys, q, name="energy_sum"), name="energy")
        scores = tf.reduce_sum(tf.multiply(energy, attention.v_a, name="energy_v"), axis=2, name="scores")
        alpha = tf.nn.softmax(scores, axis=1, name="alignments")  # [batch, src_len]
        alpha = tf.expand_dims(alpha, 1, name="alignments_expand")  # [batch, 1, src_len]
        ctx = tf.matmul(alpha, attention.memory, name="context_bmm")
        return tf.squeeze(ctx, axis=[1], name="context")  # [batch, hidden]


def attention_decoder(p: dict, y: list[tf.Tensor], layers: list[LSTMLayer],
                       encoder_states: list[tuple[tf.Tensor, tf.Tensor]], attention: _Attention,
                       output: _Output) -> list[tf.Tensor]:
    """The unrolled decoder: the attentional output a_t [batch, hidden] of every target step.

    Layer k starts from encoder layer k's final state; the bottom layer reads the previous context
    (input feeding, zero at the first step), the layers above it and the output the current one.
    Layers from the third up add their input h_{k-1,t} to their output (GNMT's residuals).
    """
    bottom, upper = layers[0], layers[1:]
    with reenter_scope(attention.scope):
        ctx = tf.zeros([p["batch"], p["hidden"]], dtype=tf.float32, name="initial_context")
    states = list(encoder_states)
    attentional = []
    for t in range(p["tgt_len"]):
        h, states[0] = bottom.step([y[t], ctx], states[0])
        ctx = _attend(attention, h, t)
        for k, layer in enumerate(upper, start=1):
            h_k, states[k] = layer.step([h, ctx], states[k])
            h = residual_output(layer, t, h_k, h) if k >= 2 else h_k
        with reenter_scope(output.scope), tf.compat.v1.name_scope(f"t{t}"):
            hc = tf.concat([h, ctx], axis=1, name="concat_context")
            attentional.append(
                tf.tanh(tf.matmul(hc, output.w_c, name="projection_matmul"), name="attentional_output"))
    return attentional


def seq2seq_loss(output: _Output, attentional: list[tf.Tensor], labels: list[tf.Tensor]) -> tf.Tensor:
    """Mean softmax cross-entropy over steps and batch, all steps in one [tgt_len * batch, vocab] matmul."""
    with reenter_scope(output.scope):
        xent = softmax_xent(attentional, labels, output.w_o, output.b_o)
    with tf.compat.v1.name_scope("loss"):
        return tf.reduce_mean(xent, name="mean_xent")


def build(**params) -> common.TrainingStep:
    """Build one NMT training step; keyword parameters default to :data:`PAPER`."""
    p = check_params("nmt", PAPER, params)
    graph = tf.Graph()
    with graph.as_default():
        src, tgt_in, labels = seq2seq_inputs(p)
        encoder_outputs, encoder_states = _encoder(p, src)
        attention = attention_memory(p, encoder_outputs)
        y, layers = _decoder_layers(p, tgt_in)
        output = output_variables(p)
        attentional = attention_decoder(p, y, layers, encoder_states, attention, output)
        train_op = common.momentum_train_op(seq2seq_loss(output, attentional, labels))
    return common.finish(graph, train_op, p)


def _tensor_bytes(t) -> int:
    """Bytes of a statically shaped tensor or variable (0 for resource / variant handles)."""
    n = 0 if t.dtype in (tf.resource, tf.variant) else t.dtype.size
    for d in t.shape:
        n *= int(d)
    return n


def estimate_step_memory(step_or_graph) -> dict[str, int]:
    """Rough peak memory of one training step, in bytes.

    ``parameters`` = 2 x the bytes of every trainable variable (weights + momentum slots);
    ``activations`` = bytes of every forward-op output (op name not under ``gradients/``) that at
    least one gradient op (name under ``gradients/``) consumes, i.e. what the backward pass keeps
    alive; ``total`` = their sum. Gradients and transient tensors are not counted. Each weight's
    single shared read (``<scope>/read_*``, consumed by the gradient matmuls) counts as an
    activation, as TF does keep it alive for the backward pass. Accepts a TrainingStep or a Graph.
    """
    graph = step_or_graph.graph if hasattr(step_or_graph, "graph") else step_or_graph
    with graph.as_default():
        params = 2 * sum(_tensor_bytes(v) for v in tf.compat.v1.trainable_variables())
    kept = 0
    for op in graph.get_operations():
        if op.name.startswith("gradients/"):
            continue
        for out in op.outputs:
            if any(c.name.startswith("gradients/") for c in out.consumers()):
                kept += _tensor_bytes(out)
    return {"parameters": params, "activations": kept, "total": params + kept}
