"""A hand-written LSTM cell and stacked-layer helper for the unrolled benchmark graphs.

Raw TF ops only (no Keras, no ``tf.nn.rnn_cell``, no while loops): one time step is

    z = BiasAdd(MatMul(ConcatV2([x, h]), kernel), bias)      # [batch, 4 * hidden]
    i, g, f, o = Split(z, 4)
    c' = Sigmoid(f) * c + Sigmoid(i) * Tanh(g)
    h' = Sigmoid(o) * Tanh(c')

The forget-gate bias starts at 1.0 (through the bias initialiser, so no extra op per step). The time
loop is unrolled in Python, so every op has a fully static shape and the graph holds no control flow.

Naming: a layer's variables (``kernel`` [input+hidden, 4*hidden], ``bias`` [4*hidden]) live in the
variable scope that is current when the :class:`LSTMLayer` is created, e.g. ``lstm_0/kernel``. Each
step re-enters that scope's name scope, so a step's ops are named ``<scope>/t<step>/...`` however the
caller interleaves layers (the NMT decoder runs ``decoder/lstm_0``, ``attention``, ``decoder/lstm_1``
and ``softmax`` step by step). Each variable is read once per layer (``<scope>/read_kernel``), and
the read is shared by all time steps.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

__all__ = ["LSTMLayer", "stacked_lstm", "zero_state", "reenter_scope", "softmax_xent"]


def reenter_scope(scope: str):
    """Context manager that re-enters the absolute name scope ``scope`` (no ``_1`` suffixing)."""
    scope = scope.rstrip("/")
    return tf.compat.v1.get_default_graph().name_scope(scope + "/" if scope else "")


def zero_state(batch: int, hidden: int, name: str = "zero_state") -> tuple[tf.Tensor, tf.Tensor]:
    """An all-zero ``(h, c)`` pair of shape ``[batch, hidden]``."""
    with tf.compat.v1.name_scope(name):
        h = tf.zeros([batch, hidden], dtype=tf.float32, name="h")
        c = tf.zeros([batch, hidden], dtype=tf.float32, name="c")
    return h, c


class LSTMLayer:
    """One LSTM layer: variables created at construction, ops created per :meth:`step` call."""

    def __init__(self, input_size: int, hidden: int, scope: str, forget_bias: float = 1.0):
        """Create ``<scope>/kernel`` and ``<scope>/bias`` in a new variable scope named ``scope``.

        ``scope`` is relative to the current variable scope (e.g. ``"lstm_0"`` inside ``"encoder"``).
        """
        self.input_size = int(input_size)
        self.hidden = int(hidden)
        bias_init = np.zeros([4 * self.hidden], dtype=np.float32)
        bias_init[2 * self.hidden : 3 * self.hidden] = forget_bias  # gate order i, g, f, o
        with tf.compat.v1.variable_scope(scope) as vs:
            self.kernel = tf.compat.v1.get_variable(
                "kernel", shape=[self.input_size + self.hidden, 4 * self.hidden], dtype=tf.float32
            )
            self.bias = tf.compat.v1.get_variable(
                "bias",
                shape=[4 * self.hidden],
                dtype=tf.float32,
                initializer=tf.compat.v1.constant_initializer(bias_init),
            )
            # One read per layer, shared by every step (and by the gradient of every step).
            self._kernel_t = tf.identity(self.kernel, name="read_kernel")
            self._bias_t = tf.identity(self.bias, name="read_bias")
            self.name_scope = tf.compat.v1.get_default_graph().get_name_scope()
        self.variable_scope = vs.name
        self._steps = 0

    def step(
        self,
        x: tf.Tensor | Sequence[tf.Tensor],
        state: tuple[tf.Tensor, tf.Tensor],
        name: str | None = None,
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
        """One time step; returns ``(h', (h', c'))``.

        ``x`` is a [batch, input_size] tensor, or a list of [batch, n_i] tensors (sum n_i =
        input_size) that is concatenated with ``h`` in the same single ``ConcatV2``.
        """
        h, c = state
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        width = sum(int(t.shape[-1]) for t in xs)
        if width != self.input_size:
            raise ValueError(f"LSTM input has {width} features, layer expects {self.input_size}")
        name = name or f"t{self._steps}"
        self._steps += 1
        with reenter_scope(self.name_scope), tf.compat.v1.name_scope(name):
            xh = tf.concat(xs + [h], axis=1, name="concat_xh")
            z = tf.matmul(xh, self._kernel_t, name="gates_matmul")
            z = tf.nn.bias_add(z, self._bias_t, name="gates_bias")
            i, g, f, o = tf.split(z, 4, axis=1, name="split_gates")
            i = tf.sigmoid(i, name="input_gate")
            g = tf.tanh(g, name="candidate")
            f = tf.sigmoid(f, name="forget_gate")
            o = tf.sigmoid(o, name="output_gate")
            kept = tf.multiply(f, c, name="forget_cell")
            added = tf.multiply(i, g, name="input_candidate")
            new_c = tf.add(kept, added, name="cell")
            new_h = tf.multiply(o, tf.tanh(new_c, name="cell_tanh"), name="hidden")
        return new_h, (new_h, new_c)

    def unroll(
        self, inputs: Sequence[tf.Tensor], state: tuple[tf.Tensor, tf.Tensor] | None = None
    ) -> tuple[list[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
        """Run the layer over the list ``inputs`` (one [batch, input_size] tensor per step)."""
        if not inputs:
            raise ValueError("need at least one time step")
        if state is None:
            with reenter_scope(self.name_scope):
                state = zero_state(int(inputs[0].shape[0]), self.hidden)
        outputs = []
        for x in inputs:
            h, state = self.step(x, state)
            outputs.append(h)
        return outputs, state


def stacked_lstm(
    inputs: Sequence[tf.Tensor],
    hidden: int,
    num_layers: int,
    prefix: str = "lstm_",
    initial_states: Sequence[tuple[tf.Tensor, tf.Tensor]] | None = None,
) -> tuple[list[tf.Tensor], list[tuple[tf.Tensor, tf.Tensor]], list[LSTMLayer]]:
    """Stack ``num_layers`` LSTM layers (scopes ``<prefix>0``, ``<prefix>1``, ...) over ``inputs``.

    Layers are built one after another (all steps of layer 0, then layer 1, ...); the data
    dependencies still let layer k+1 at step t run alongside layer k at step t+1.
    Returns the top layer's outputs, each layer's final state, and the layers.
    """
    outputs = list(inputs)
    finals: list[tuple[tf.Tensor, tf.Tensor]] = []
    layers: list[LSTMLayer] = []
    for k in range(num_layers):
        layer = LSTMLayer(int(outputs[0].shape[-1]), hidden, f"{prefix}{k}")
        state = initial_states[k] if initial_states is not None else None
        outputs, final = layer.unroll(outputs, state)
        finals.append(final)
        layers.append(layer)
    return outputs, finals, layers


def softmax_xent(step_outputs: Sequence[tf.Tensor], step_labels: Sequence[tf.Tensor], weights: tf.Tensor,
                 bias: tf.Tensor) -> tf.Tensor:
    """Cross-entropy per token of one softmax over all steps ([steps * batch, dim] x [dim, vocab]).

    One matmul for all steps, as the LM and NMT implementations of the time: a softmax per step
    would keep one [dim, vocab] weight gradient per step alive until they are summed.
    """
    h = tf.concat(list(step_outputs), axis=0, name="all_steps")
    logits = tf.nn.bias_add(tf.matmul(h, weights, name="matmul"), bias, name="logits")
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.concat(list(step_labels), axis=0, name="all_labels"), logits=logits, name="xent"
    )
