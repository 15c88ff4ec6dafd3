"""The decoder LSTM's recurrence in two halves: :class:`LSTMTrace` holds the activations that the sampling pass
(:func:`.kernels.unroll_kernel`) records, and :class:`TracedLSTM` turns a full trace into a differentiable function
of the LSTM's inputs and weights, with backpropagation through time written out (:func:`.kernels.backprop_kernel`).

Why: the decoder must run group by group to sample (each step's input is the device just drawn), but once the
devices are known the gradient needs no such loop of recorded small ops. The sampling pass fills the trace, and the
backward pass replays it with one small matrix product per step for the recurrent state and one large product for
the recurrent weights' gradient. Gates are in ``nn.LSTMCell``'s order: input, forget, cell, output.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from .kernels import backprop_kernel


class LSTMTrace:
    """A decoder LSTM's activations over n steps for k rows, time-major, as float32 tensors the kernels fill in place.

    ``gates`` [n, k, 4, H]: sigmoid(input), sigmoid(forget), tanh(cell), sigmoid(output); ``cells``, ``hidden``
    [n + 1, k, H]: the initial state, then the state after each step; ``cells_tanh`` [n, k, H]: tanh of the cell
    state after each step."""

    def __init__(self, steps: int, h0: torch.Tensor, c0: torch.Tensor) -> None:
        k, hidden = h0.shape
        self.gates = torch.empty(steps, k, 4, hidden)
        self.cells, self.hidden = torch.empty(steps + 1, k, hidden), torch.empty(steps + 1, k, hidden)
        self.cells_tanh = torch.empty(steps, k, hidden)
        self.cells[0], self.hidden[0] = c0, h0


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
        grad_gates = torch.empty(n, k, 4 * hidden)
        dh, dc = torch.empty(k, hidden), torch.empty(k, hidden)
        backprop_kernel(trace.gates.view(n, k, 4 * hidden).numpy(), trace.cells.numpy(), trace.cells_tanh.numpy(),
                        grad_hidden.contiguous().numpy(), w_hh.detach().contiguous().numpy(), grad_gates.numpy(), dh.numpy(),
                        dc.numpy())
        flat = grad_gates.view(n * k, 4 * hidden)
        grad_w = flat.T @ trace.hidden[:-1].reshape(n * k, hidden)
        grad_device = flat.new_zeros(ctx.devices, 4 * hidden).index_add_(0, prev.reshape(-1), flat)
        grad_group = flat.view(n, k, 4 * hidden).sum(dim=1)
        return grad_device, grad_group, None, dh, dc, grad_w, None

