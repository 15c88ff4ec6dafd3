"""The attention decoder's two passes over the groups, given its per-problem tensors (:class:`DecoderTables`):

* :func:`unroll`, without gradients, goes group by group as sampling must (each step's input is the device just
  chosen): it draws the K sampled rows' devices, teacher-forces the E given rows, and records the LSTM's
  activations and the Gaussian logit noise it drew;
* :func:`score`, with gradients, computes every row's per-group distributions at once from that record: the LSTM
  states come from :class:`~.recurrence.TracedLSTM`, and attention, head, masking, noise, the exploration mixture,
  log-probabilities and entropies are batched over all groups and rows.

The attention scores and the context's share of the logits are computed as ``h @ (W_q^T K)`` and
``softmax(.) @ (E W_c^T)``, the same products as ``(h W_q^T) K`` and ``(softmax(.) E) W_c^T`` grouped the cheap way
round (equal up to float rounding).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .recurrence import LSTMTrace, TracedLSTM


@dataclass(frozen=True)
class DecoderTables:
    """The decoder's tensors for one problem, from the encoder outputs (n groups, D devices, H hidden)."""

    device_gates: torch.Tensor  # [D + 1, 4H]: LSTM input gates from the previous device's embedding (D: start)
    group_gates: torch.Tensor  # [n, 4H]: LSTM input gates from each group's encoder output, plus both biases
    w_hh: torch.Tensor  # [4H, H]: the LSTM's recurrent weights
    attention: torch.Tensor  # [H, n]: decoder state -> attention score of each group (query weights times keys)
    state_logits: torch.Tensor  # [H, D]: decoder state -> its share of the logits
    context_logits: torch.Tensor  # [n, D]: each encoder output's share of the logits, weighted by attention
    bias: torch.Tensor  # [D]: the logits' bias

    def detached(self) -> DecoderTables:
        """The same tensors outside the autograd graph."""
        return DecoderTables(*(getattr(self, field.name).detach() for field in fields(self)))


@dataclass(frozen=True)
class Unrolled:
    """What :func:`unroll` recorded: every row's devices [n, k], the LSTM trace and the logit noise [n, k, D]
    (None without noise)."""

    actions: torch.Tensor
    trace: LSTMTrace
    noise: torch.Tensor | None


@dataclass(frozen=True)
class Sampling:
    """How :func:`unroll` and :func:`score` turn logits into distributions and draws."""

    samples: int  # K: rows drawn from the policy (the first K rows)
    temperature: float
    noise_std: float
    explore: float  # weight of the uniform distribution over allowed devices in each group's mixture
    generator: torch.Generator | None
    greedy: bool  # the K rows take each group's most likely device instead of a draw


def unroll(tables: DecoderTables, h0: torch.Tensor, c0: torch.Tensor, allowed: torch.Tensor,
           given: torch.Tensor | None, how: Sampling) -> Unrolled:
    """Run the decoder group by group for the ``how.samples`` sampled rows and the ``given`` [E, n] rows, from
    the initial states ``h0``, ``c0`` [1, H]. Per group, the generator draws the noise of all rows (if any),
    then the sampled rows' devices, as one ``torch.randn`` and one draw of ``torch.multinomial(probs, 1)``:
    the argmax of probs / Exp(1) variates (Gumbel-max, the same variates and devices as torch's own
    one-sample path, which also checks probs for negative, infinite and all-zero rows at ~3x the cost)."""
    n, devices = allowed.shape
    k, sampled = how.samples + (0 if given is None else given.shape[0]), how.samples
    trace = LSTMTrace(n, h0.expand(k, -1), c0.expand(k, -1))
    actions = torch.empty(n, k, dtype=torch.long)
    if given is not None:
        actions[:, sampled:] = given.T
    noise = torch.empty(n, k, devices) if how.noise_std > 0 else None
    step_noise = noise.unbind(0) if noise is not None else None
    step_actions, group_gates = actions.unbind(0), tables.group_gates.unbind(0)
    # the logits' bias, with -inf for the devices a group may not use (their probability is then exactly 0)
    step_bias = tables.bias.expand(n, -1).masked_fill(~allowed, float("-inf")).unbind(0)
    step_uniform = (how.explore * allowed / allowed.sum(dim=1, keepdim=True)).unbind(0)
    w_hh_t = tables.w_hh.T
    prev = torch.full((k,), devices, dtype=torch.long)  # the start token
    draw = torch.empty(sampled, devices)  # the exponential variates of each group's draw
    for t in range(n):
        h = trace.step(t, torch.add(group_gates[t], tables.device_gates.index_select(0, prev)), w_hh_t)
        if step_noise is not None:
            torch.randn((k, devices), generator=how.generator, out=step_noise[t])
        if sampled:
            h = h[:sampled]
            weights = torch.softmax(h @ tables.attention, dim=1)
            logits = torch.addmm(torch.addmm(step_bias[t], h, tables.state_logits), weights, tables.context_logits)
            if how.temperature != 1.0:
                logits /= how.temperature
            if step_noise is not None:
                logits.add_(step_noise[t][:sampled], alpha=how.noise_std)
            probs = torch.softmax(logits, dim=1)
            if how.explore > 0:  # the exploration mixture
                probs = torch.add(step_uniform[t], probs, alpha=1 - how.explore)
            if how.greedy:
                step_actions[t][:sampled] = probs.argmax(dim=1)
            else:  # torch.multinomial(probs, 1)'s own draw, without its checks of probs
                torch.div(probs, draw.exponential_(1.0, generator=how.generator), out=draw)
                torch.argmax(draw, dim=1, out=step_actions[t][:sampled])
        prev = step_actions[t]
    return Unrolled(actions=actions, trace=trace, noise=noise)


def score(tables: DecoderTables, h0: torch.Tensor, c0: torch.Tensor, allowed: torch.Tensor, run: Unrolled,
          how: Sampling) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log_prob [k], entropy [k], log_probs [n, k, D]): each row's summed log-probability of its devices, the
    summed entropy of its per-group distributions, and those distributions (log), all with gradients."""
    n, devices = allowed.shape
    k = run.actions.shape[1]
    start = torch.full((1, k), devices, dtype=torch.long)
    prev = torch.cat([start, run.actions[:-1]])  # [n, k]
    hidden = TracedLSTM.apply(tables.device_gates, tables.group_gates, prev, h0.expand(k, -1), c0.expand(k, -1),
                              tables.w_hh, run.trace)
    # transposed, a column per (group, row): matrix products of these shapes are the fast ones, also backwards
    states = hidden.reshape(n * k, -1).T  # [H, n k]
    weights = torch.softmax(tables.attention.T @ states, dim=0)  # [n, n k]
    logits = torch.addmm(torch.addmm(tables.bias[:, None], tables.state_logits.T, states), tables.context_logits.T,
                         weights)  # [D, n k]
    logits = logits.T.view(n, k, devices) / how.temperature
    if run.noise is not None:
        logits = logits + how.noise_std * run.noise
    masked = ~allowed[:, None, :]
    logp = torch.log_softmax(logits.masked_fill(masked, float("-inf")), dim=2)
    if how.explore > 0:
        mixture = (1 - how.explore) * logp.exp() + how.explore * (allowed / allowed.sum(dim=1, keepdim=True))[:, None]
        logp = torch.log(mixture.clamp_min(1e-30)).masked_fill(masked, float("-inf"))
    log_prob = logp.gather(2, run.actions[:, :, None]).squeeze(2).sum(dim=0)
    safe = logp.masked_fill(masked, 0.0)  # 0 * -inf would make NaN gradients
    entropy = -(safe.exp() * safe).masked_fill(masked, 0.0).sum(dim=(0, 2))
    return log_prob, entropy, logp
