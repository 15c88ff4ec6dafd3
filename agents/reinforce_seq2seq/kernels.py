"""The decoder's two loops over the groups, compiled with numba: the sampling pass (:func:`unroll_kernel`) and the
backward pass through time (:func:`backprop_kernel`).

Why compiled: at the paper's sizes (K = 16 rows, hidden 256, D <= 5 devices) one step of either loop is one
matrix product of about 4 M multiply-adds (the recurrent weights, a BLAS call) and some 20 small element-wise
ops; run from Python as torch ops, the ops' dispatch costs twice the product. Here each loop is one call: the
products go to BLAS (``np.dot``) and the element-wise work runs in loops LLVM vectorises.

The loops compute what :mod:`.decoding` documents, in float32, with one difference in rounding: the sigmoid,
tanh and softmax use :func:`exp_inplace`, a polynomial exponential accurate to about 2 float32 ulps (the
vector libraries LLVM would call for ``exp`` are not available to numba here, and a scalar ``exp`` per gate would
cost more than the product).
"""
from __future__ import annotations

import numpy as np
from numba import njit

# Cody & Waite's range reduction and the minimax polynomial of Cephes' expf (S. Moshier, Cephes Math Library):
# exp(x) = 2^m exp(r), r = x - m ln 2 split in two parts so r is exact, exp(r) = 1 + r + r^2 P(r) on |r| <= ln 2 / 2
# (float32 constants, so the loop stays in float32 and vectorises 16 lanes wide)
LN2_HIGH, LN2_LOW = np.float32(0.693359375), np.float32(-2.12194440e-4)
LOG2_E, HALF, ONE, TWO = np.float32(1.44269504088896341), np.float32(0.5), np.float32(1.0), np.float32(2.0)
P0, P1, P2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3)
P3, P4, P5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1)
EXP_MIN, EXP_MAX = np.float32(-87.0), np.float32(88.0)  # float32 exp underflows below and overflows above


@njit(cache=True, fastmath=True)
def exp_inplace(x: np.ndarray, scratch: np.ndarray) -> None:
    """x[:] = exp(x) for a contiguous float32 vector, with ``scratch`` an int32 vector at least as long."""
    m = x.size
    for j in range(m):
        v = min(max(x[j], EXP_MIN), EXP_MAX)
        whole = np.floor(v * LOG2_E + HALF)
        r = v - whole * LN2_HIGH - whole * LN2_LOW
        p = ((((P0 * r + P1) * r + P2) * r + P3) * r + P4) * r + P5
        x[j] = p * r * r + r + ONE
        scratch[j] = (np.int32(whole) + 127) << 23  # the float32 bits of 2^whole
    scale = scratch[:m].view(np.float32)
    for j in range(m):
        x[j] *= scale[j]


@njit(cache=True, fastmath=True)
def lstm_step(input_gates: np.ndarray, h: np.ndarray, c: np.ndarray, w_hh_t: np.ndarray, act: np.ndarray,
              c_new: np.ndarray, tanh_c: np.ndarray, h_new: np.ndarray, scratch: np.ndarray) -> None:
    """One step of ``nn.LSTMCell`` for k rows: ``act`` [k, 4H] gets the gates' activations (input, forget, cell,
    output) of ``input_gates`` [k, 4H] + ``h`` [k, H] @ ``w_hh_t`` [H, 4H]; ``c_new``, ``tanh_c`` and ``h_new``
    [k, H] the new cell state, its tanh and the new hidden state. sigmoid(x) = 1 / (1 + exp(-x)) and
    tanh(x) = 2 sigmoid(2x) - 1, so one exponential pass serves all four gates."""
    k, hidden = h.shape
    np.dot(h, w_hh_t, act)
    flat = act.reshape(-1)
    for r in range(k):
        for j in range(4 * hidden):
            scale = TWO if 2 * hidden <= j < 3 * hidden else ONE
            act[r, j] = -scale * (act[r, j] + input_gates[r, j])
    exp_inplace(flat, scratch)
    for r in range(k):
        for j in range(4 * hidden):
            s = ONE / (ONE + act[r, j])
            act[r, j] = s + s - ONE if 2 * hidden <= j < 3 * hidden else s
    for r in range(k):
        for j in range(hidden):
            cell = act[r, hidden + j] * c[r, j] + act[r, j] * act[r, 2 * hidden + j]
            c_new[r, j] = cell
            tanh_c[r, j] = -TWO * cell
    exp_inplace(tanh_c.reshape(-1), scratch)
    for r in range(k):
        for j in range(hidden):
            s = ONE / (ONE + tanh_c[r, j])
            tanh_c[r, j] = s + s - ONE
            h_new[r, j] = act[r, 3 * hidden + j] * tanh_c[r, j]


@njit(cache=True, fastmath=True)
def backprop_kernel(act: np.ndarray, cells: np.ndarray, cells_tanh: np.ndarray, grad_hidden: np.ndarray,
                    w_hh: np.ndarray, grad_gates: np.ndarray, dh: np.ndarray, dc: np.ndarray) -> None:
    """Backpropagation through time of the LSTM recurrence that recorded ``act`` [n, k, 4H] (activations),
    ``cells`` [n + 1, k, H] and ``cells_tanh`` [n, k, H], given the loss's gradient ``grad_hidden`` [n, k, H] with
    respect to each step's hidden state: fills ``grad_gates`` [n, k, 4H] (with respect to the pre-activation gates)
    and ``dh``, ``dc`` [k, H] (with respect to the initial states). ``w_hh`` [4H, H]: the recurrent weights."""
    n, k, hidden = cells_tanh.shape
    dh[:] = grad_hidden[n - 1]
    dc[:] = 0.0
    for t in range(n - 1, -1, -1):
        a, dz, tc, c_prev = act[t], grad_gates[t], cells_tanh[t], cells[t]
        for r in range(k):
            for j in range(hidden):
                i, f, g, o = a[r, j], a[r, hidden + j], a[r, 2 * hidden + j], a[r, 3 * hidden + j]
                d_cell = dc[r, j] + dh[r, j] * o * (ONE - tc[r, j] * tc[r, j])  # through h = o tanh(c)
                dz[r, j] = d_cell * g * i * (ONE - i)
                dz[r, hidden + j] = d_cell * c_prev[r, j] * f * (ONE - f)
                dz[r, 2 * hidden + j] = d_cell * i * (ONE - g * g)
                dz[r, 3 * hidden + j] = dh[r, j] * tc[r, j] * o * (ONE - o)
                dc[r, j] = d_cell * f
        np.dot(dz, w_hh, dh)
        if t:
            dh += grad_hidden[t - 1]


@njit(cache=True, fastmath=True)
def _draw(logits: np.ndarray, allowed: np.ndarray, explore: float, greedy: bool, uniform: float) -> int:
    """The device drawn (or, ``greedy``, the most likely) from one group's logits [D] over its ``allowed`` devices,
    mixed with weight ``explore`` with the uniform distribution over them; ``uniform`` in [0, 1) drives the draw
    (the first device whose cumulative probability passes it times the total)."""
    devices = logits.size
    top, count = -np.inf, 0
    for d in range(devices):
        if allowed[d]:
            top, count = max(top, logits[d]), count + 1
    probs = np.zeros(devices, np.float32)
    total = 0.0
    for d in range(devices):
        if allowed[d]:
            probs[d] = np.exp(logits[d] - top)
            total += probs[d]
    chosen, best = -1, -1.0
    mass = 0.0
    for d in range(devices):
        if allowed[d]:
            probs[d] = (1.0 - explore) * probs[d] / total + explore / count
            mass += probs[d]
            if probs[d] > best:
                chosen, best = d, probs[d]
    if greedy:
        return chosen
    target, cumulative = uniform * mass, 0.0
    for d in range(devices):
        if probs[d] > 0.0:
            chosen = d
            cumulative += probs[d]
            if cumulative > target:
                break
    return chosen


@njit(cache=True, fastmath=True)
def unroll_kernel(group_gates: np.ndarray, device_gates: np.ndarray, w_hh_t: np.ndarray, attention: np.ndarray,
                  state_logits: np.ndarray, context_logits: np.ndarray, bias: np.ndarray, allowed: np.ndarray,
                  actions: np.ndarray, sampled: int, uniforms: np.ndarray, noise: np.ndarray, noise_std: float,
                  temperature: float, explore: float, greedy: bool, act: np.ndarray, cells: np.ndarray,
                  cells_tanh: np.ndarray, hidden: np.ndarray) -> None:
    """The decoder's pass over the n groups for k rows (see :func:`.decoding.unroll`): rows below ``sampled`` get
    their devices drawn into ``actions`` [n, k], using ``uniforms`` [n, sampled]; the others keep theirs. Fills the
    LSTM record ``act`` [n, k, 4H], ``cells`` and ``hidden`` [n + 1, k, H] (from their initial states at index 0)
    and ``cells_tanh`` [n, k, H]; ``noise`` [n, k, D] (or empty) is added to the logits times ``noise_std``."""
    n, k = actions.shape
    devices, start = allowed.shape[1], device_gates.shape[0] - 1
    width = w_hh_t.shape[1]
    scratch = np.empty(max(k * width, max(sampled, 1) * n), np.int32)
    input_gates = np.empty((k, width), np.float32)
    weights = np.empty((max(sampled, 1), n), np.float32)
    from_state = np.empty((max(sampled, 1), devices), np.float32)
    from_context = np.empty((max(sampled, 1), devices), np.float32)
    logits = np.empty(devices, np.float32)
    for t in range(n):
        for r in range(k):
            previous = actions[t - 1, r] if t else start
            for j in range(width):
                input_gates[r, j] = group_gates[t, j] + device_gates[previous, j]
        lstm_step(input_gates, hidden[t], cells[t], w_hh_t, act[t], cells[t + 1], cells_tanh[t], hidden[t + 1],
                  scratch)
        if sampled == 0:
            continue
        state = hidden[t + 1][:sampled]
        np.dot(state, attention, weights)
        for r in range(sampled):
            top = weights[r].max()
            for j in range(n):
                weights[r, j] -= top
        exp_inplace(weights.reshape(-1), scratch)
        for r in range(sampled):
            weights[r] /= weights[r].sum()
        np.dot(state, state_logits, from_state)
        np.dot(weights, context_logits, from_context)
        for r in range(sampled):
            for d in range(devices):
                logits[d] = (bias[d] + from_state[r, d] + from_context[r, d]) / temperature
                if noise.size:
                    logits[d] += noise_std * noise[t, r, d]
            actions[t, r] = _draw(logits, allowed[t], explore, greedy, uniforms[t, r])
