"""The decoder LSTM's recurrence in two halves: :meth:`LSTMTrace.step` runs one step (no gradients) and
records its activations; :class:`TracedLSTM` turns a full trace into a differentiable function of the
LSTM's inputs and weights, with backpropagation through time written out.

Why: the decoder must run group by group to sample (each step's input is the device just drawn), but once the
devices are known the gradient needs no such loop of recorded small ops. The sampling pass fills the trace, and the
backward pass replays it with one small matrix product per step for the recurrent state and one large product for
the recurrent weights' gradient. Gates are in ``nn.LSTMCell``'s order: input, forget, cell, output.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


class LSTMTrace:
    """A decoder LSTM's activations over n steps for k rows, time-major, filled one :meth:`step` at a time.

    ``gates`` [n, k, 4, H]: sigmoid(input), sigmoid(forget), tanh(cell), sigmoid(output); ``cells``, ``hidden``
    [n + 1, k, H]: the initial state, then the state after each step; ``cells_tanh`` [n, k, H]: tanh of the cell
    state after each step."""

    def __init__(self, steps: int, h0: torch.Tensor, c0: torch.Tensor) -> None:
        k, hidden = h0.shape
        self.gates = h0.new_empty(steps, k, 4, hidden)
        self.cells, self.hidden = h0.new_empty(steps + 1, k, hidden), h0.new_empty(steps + 1, k, hidden)
        self.cells_tanh = h0.new_empty(steps, k, hidden)
        self.cells[0], self.hidden[0] = c0, h0
        # per-step views, made once: the loops over the steps then index Python tuples, not tensors
        self.step_gates = self.gates.unbind(0)
        self.step_cells, self.step_cells_tanh = self.cells.unbind(0), self.cells_tanh.unbind(0)
        self.step_hidden = self.hidden.unbind(0)

    def step(self, t: int, input_gates: torch.Tensor, w_hh_t: torch.Tensor) -> torch.Tensor:
        """Step ``t``: the gates are ``input_gates`` [k, 4H] (input projection and biases) plus the previous hidden
        state times ``w_hh_t`` [H, 4H]; the activations are recorded; the new hidden state [k, H] is returned."""
        act = self.step_gates[t]
        gates = torch.addmm(input_gates, self.step_hidden[t], w_hh_t).view(act.shape)
        torch.sigmoid(gates, out=act)
        torch.tanh(gates[:, 2], out=act[:, 2])
        i, f, g, o = act.unbind(1)
        c = torch.addcmul(f * self.step_cells[t], i, g, out=self.step_cells[t + 1])
        return torch.mul(o, torch.tanh(c, out=self.step_cells_tanh[t]), out=self.step_hidden[t + 1])


class TracedLSTM(torch.autograd.Function):
    """``TracedLSTM.apply(device_gates [D+1, 4H], group_gates [n, 4H], prev [n, k], h0 [k, H], c0 [k, H],
    w_hh [4H, H], trace)``: the hidden states [n, k, H] of the decoder's LSTM recurrence, whose input gates at step
    t of row r are ``device_gates[prev[t, r]] + group_gates[t]``, as ``trace`` recorded them (the values are
    returned, not recomputed); the backward pass differentiates with respect to the five float tensors."""

    @staticmethod
    def forward(ctx, device_gates: torch.Tensor, group_gates: torch.Tensor, prev: torch.Tensor, h0: torch.Tensor,
                c0: torch.Tensor, w_hh: torch.Tensor, trace: LSTMTrace) -> torch.Tensor:
        n, k, hidden = trace.cells_tanh.shape
        if prev.shape != (n, k) or group_gates.shape != (n, 4 * hidden) or w_hh.shape != (4 * hidden, hidden):
            raise ValueError(f"prev {tuple(prev.shape)}, group_gates {tuple(group_gates.shape)} and w_hh "
                             f"{tuple(w_hh.shape)} do not fit a trace of {n} steps, {k} rows, hidden size {hidden}")
        ctx.trace, ctx.devices = trace, device_gates.shape[0]
        ctx.save_for_backward(prev, w_hh)
        return trace.hidden[1:].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_hidden: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        trace: LSTMTrace = ctx.trace
        prev, w_hh = ctx.saved_tensors
        n, k, hidden = trace.cells_tanh.shape
        grad_gates, dh, dc = _grad_gates(trace, grad_hidden, w_hh)
        flat = grad_gates.view(n * k, 4 * hidden)
        grad_w = flat.T @ trace.hidden[:-1].reshape(n * k, hidden)
        grad_device = flat.new_zeros(ctx.devices, 4 * hidden).index_add_(0, prev.reshape(-1), flat)
        grad_group = flat.view(n, k, 4 * hidden).sum(dim=1)
        return grad_device, grad_group, None, dh, dc, grad_w, None


def _grad_gates(trace: LSTMTrace, grad_hidden: torch.Tensor, w_hh: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backpropagation through time: the loss's gradient with respect to every step's pre-activation gates
    [n, k, 4, H], the initial hidden state and the initial cell state [k, H]."""
    n, k, hidden = trace.cells_tanh.shape
    one = w_hh.new_ones(())
    grad_gates = w_hh.new_empty(n, k, 4, hidden)
    upstream = w_hh.new_empty(k, 4, hidden)  # the gradient reaching each gate's activation
    step_grad, step_out = grad_hidden.unbind(0), grad_gates.unbind(0)
    dh, dc = step_grad[n - 1], w_hh.new_zeros(k, hidden)
    for t in range(n - 1, -1, -1):
        act, tc, dz = trace.step_gates[t], trace.step_cells_tanh[t], step_out[t]
        i, f, g, o = act.unbind(1)
        dc = torch.addcmul(dc, dh * o, torch.addcmul(one, tc, tc, value=-1.0))  # through h = o * tanh(c)
        torch.mul(dc, g, out=upstream[:, 0])
        torch.mul(dc, trace.step_cells[t], out=upstream[:, 1])
        torch.mul(dc, i, out=upstream[:, 2])
        torch.mul(dh, tc, out=upstream[:, 3])
        torch.addcmul(act, act, act, value=-1.0, out=dz)  # sigmoid' = s (1 - s) ...
        torch.addcmul(one, g, g, value=-1.0, out=dz[:, 2])  # ... and tanh' = 1 - g^2
        dz.mul_(upstream)
        dc = dc * f
        dh = torch.addmm(step_grad[t - 1], dz.view(k, 4 * hidden), w_hh) if t else dz.view(k, 4 * hidden) @ w_hh
    return grad_gates, dh, dc
