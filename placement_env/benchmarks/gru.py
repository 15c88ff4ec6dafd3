"""A hand-written GRU layer with :class:`~placement_env.benchmarks.lstm.LSTMLayer`'s interface, so an unrolled
builder takes either cell.

Raw TF ops only (no Keras, no while loops), the cell of TF's ``GRUCell`` (Cho et al. 2014); one time step is

    r, u = Split(Sigmoid(BiasAdd(MatMul(ConcatV2([x, h]), gates_kernel), gates_bias)), 2)   # [batch, hidden] each
    c = Tanh(BiasAdd(MatMul(ConcatV2([x, r * h]), candidate_kernel), candidate_bias))
    h' = u * h + (1 - u) * c

The gate bias starts at 1.0 (as ``GRUCell``'s), so a fresh layer mostly keeps its state. The state is ``h``
alone, where an LSTM's is ``(h, c)``.

Naming, as :mod:`~placement_env.benchmarks.lstm`: the variables ``<scope>/gates/kernel`` [input+hidden,
2*hidden], ``<scope>/gates/bias``, ``<scope>/candidate/kernel`` [input+hidden, hidden] and
``<scope>/candidate/bias``, each read once per layer (``<scope>/read_*``); step ``t``'s ops are under
``<scope>/t<t>/``.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from .lstm import reenter_scope

__all__ = ["GRULayer"]


class GRULayer:
    """One GRU layer: variables created at construction, ops created per :meth:`step` call."""

    def __init__(self, input_size: int, hidden: int, scope: str, gate_bias: float = 1.0):
        """Create the layer's variables in a new variable scope named ``scope`` (relative to the current one)."""
        self.input_size = int(input_size)
        self.hidden = int(hidden)
        rows = self.input_size + self.hidden
        with tf.compat.v1.variable_scope(scope) as vs:
            gates_kernel = tf.compat.v1.get_variable("gates/kernel", shape=[rows, 2 * self.hidden], dtype=tf.float32)
            gates_bias = tf.compat.v1.get_variable("gates/bias", shape=[2 * self.hidden], dtype=tf.float32,
                                                   initializer=tf.compat.v1.constant_initializer(gate_bias))
            candidate_kernel = tf.compat.v1.get_variable("candidate/kernel", shape=[rows, self.hidden],
                                                         dtype=tf.float32)
            candidate_bias = tf.compat.v1.get_variable("candidate/bias", shape=[self.hidden], dtype=tf.float32,
                                                       initializer=tf.compat.v1.zeros_initializer())
            # One read per variable, shared by every step (and by the gradient of every step).
            self._gates_kernel = tf.identity(gates_kernel, name="read_gates_kernel")
            self._gates_bias = tf.identity(gates_bias, name="read_gates_bias")
            self._candidate_kernel = tf.identity(candidate_kernel, name="read_candidate_kernel")
            self._candidate_bias = tf.identity(candidate_bias, name="read_candidate_bias")
            self.name_scope = tf.compat.v1.get_default_graph().get_name_scope()
        self.variable_scope = vs.name
        self._steps = 0

    def step(self, x: tf.Tensor | Sequence[tf.Tensor], state: tf.Tensor,
             name: str | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """One time step; returns ``(h', h')``. ``x`` is a [batch, input_size] tensor or a list of tensors
        whose widths sum to ``input_size``, concatenated with the state in the same ``ConcatV2``."""
        xs = list(x) if isinstance(x, (list, tuple)) else [x]
        width = sum(int(t.shape[-1]) for t in xs)
        if width != self.input_size:
            raise ValueError(f"GRU input has {width} features, layer expects {self.input_size}")
        name = name or f"t{self._steps}"
        self._steps += 1
        with reenter_scope(self.name_scope), tf.compat.v1.name_scope(name):
            xh = tf.concat(xs + [state], axis=1, name="concat_xh")
            gates = tf.nn.bias_add(tf.matmul(xh, self._gates_kernel, name="gates_matmul"), self._gates_bias,
                                   name="gates_bias")
            reset, update = tf.split(tf.sigmoid(gates, name="gates"), 2, axis=1, name="split_gates")
            xrh = tf.concat(xs + [tf.multiply(reset, state, name="reset_state")], axis=1, name="concat_xrh")
            candidate = tf.nn.bias_add(tf.matmul(xrh, self._candidate_kernel, name="candidate_matmul"),
                                       self._candidate_bias, name="candidate_bias")
            candidate = tf.tanh(candidate, name="candidate")
            kept = tf.multiply(update, state, name="kept_state")
            added = tf.multiply(tf.subtract(1.0, update, name="new_share"), candidate, name="added_candidate")
            new_h = tf.add(kept, added, name="hidden")
        return new_h, new_h

    def unroll(self, inputs: Sequence[tf.Tensor], state: tf.Tensor | None = None
               ) -> tuple[list[tf.Tensor], tf.Tensor]:
        """Run the layer over the list ``inputs`` (one [batch, input_size] tensor per step) from ``state``
        (zeros when None)."""
        if not inputs:
            raise ValueError("need at least one time step")
        if state is None:
            with reenter_scope(self.name_scope):
                state = tf.zeros([int(inputs[0].shape[0]), self.hidden], dtype=tf.float32, name="zero_state")
        outputs = []
        for x in inputs:
            h, state = self.step(x, state)
            outputs.append(h)
        return outputs, state
