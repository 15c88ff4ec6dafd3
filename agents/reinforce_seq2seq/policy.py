"""The seq2seq placement policy of Mirhoseini et al. (2017), in PyTorch.

* Group embedding: a linear projection (+ tanh) of the env's per-group features
  (:func:`group_features`: op-type histogram, output shapes, neighbours and their traffic,
  compute, memory, position, and the devices the group may go to).
* Encoder: a bidirectional LSTM over the groups in topological order.
* Decoder: an LSTM cell that emits one device per group; its input at step t is the embedding of
  the device chosen for group t-1 (a start token at t=0) and the encoder output of group t; a
  content-based attention over all encoder outputs (a scaled dot product of a projection of the
  decoder state with each output, Luong's "general" form) gives a context vector; the logits over
  devices come from [decoder state, context]. The decoder's input projection is computed once per
  device and per group, outside the loop over the groups.
* Decoding runs in two passes (:mod:`.decoding`): a loop over the groups without gradients draws the devices
  and records the decoder LSTM's activations, then one batched pass over all groups computes the
  log-probabilities and entropies with gradients (the LSTM's backward pass from the record: :mod:`.recurrence`).
* Devices a group cannot run on (``allowed`` False: no kernel) get logit -inf, so they are never
  sampled; logits are divided by a temperature and may get Gaussian noise (exploration, as in TF's
  hierarchical placer) before masking.

``policy(features, allowed, samples=K)`` samples K placements and returns their summed log-prob
and entropy (with gradients); ``policy(features, allowed, actions=A)`` scores given placements;
with both, one call samples K and scores A (self-imitation). ``policy.decode`` also returns every
group's device distribution (local moves around the best placement, in the trainer).
:func:`problem_features` is the policy's input for a :class:`placement_env.Problem`.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from torch import nn

from placement_env import Problem, graph_features

from .decoding import DecoderTables, Sampling, score, unroll

# env observation fields the group embedding reads (see placement_env.env.features)
GROUP_FIELDS = ("op_types", "output_shapes", "neighbours", "neighbour_bytes", "compute", "memory", "position")


def group_features(fields: Mapping[str, np.ndarray], n_groups: int, allowed: np.ndarray) -> np.ndarray:
    """[n_groups, F] float32: the env's group fields (padding slots dropped) plus derived columns.

    Derived: compute and memory also as log10 of the group's share times n_groups (so the
    features do not shrink as graphs get more groups), and the ``allowed`` device mask.
    """
    columns = [np.asarray(fields[name], np.float32)[:n_groups].reshape(n_groups, -1) for name in GROUP_FIELDS]
    share = np.concatenate([np.asarray(fields["compute"], np.float32)[:n_groups],
                            np.asarray(fields["memory"], np.float32)[:n_groups]], axis=1)
    columns.append(np.log10(1e-4 + share * n_groups).astype(np.float32) / 4.0)
    columns.append(np.asarray(allowed, np.float32))
    return np.concatenate(columns, axis=1)


def problem_features(problem: Problem) -> np.ndarray:
    """[n_groups, F]: :func:`group_features` of ``problem``'s graph on its cluster, from the env's feature fields
    (``placement_env.graph_features`` without padding, on the problem's op costs)."""
    graph = problem.graph
    fields = graph_features(graph, problem.cluster, problem.costs.seconds, graph.n_groups).fields
    return group_features(fields, graph.n_groups, problem.allowed)


class Seq2SeqPolicy(nn.Module):
    """Encoder-decoder with attention; one categorical device choice per group."""

    def __init__(self, feature_dim: int, n_devices: int, *, hidden: int = 256) -> None:
        super().__init__()
        if hidden < 2 or hidden % 2:
            raise ValueError(f"hidden={hidden!r}; expected an even number >= 2")
        self.feature_dim, self.n_devices, self.hidden = feature_dim, n_devices, hidden
        self.embed = nn.Sequential(nn.Linear(feature_dim, hidden), nn.Tanh())
        self.encoder = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(hidden, 2 * hidden)  # encoder summary -> decoder (h0, c0)
        self.device_embed = nn.Embedding(n_devices + 1, hidden)  # index n_devices: the start token
        self.decoder = nn.LSTMCell(2 * hidden, hidden)
        self.att_query = nn.Linear(hidden, hidden, bias=False)
        self.head = nn.Linear(2 * hidden, n_devices)

    def encode(self, features: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Encoder outputs [n, H] and the decoder's initial state ([1, H], [1, H])."""
        out, _ = self.encoder(self.embed(features)[None])
        out = out[0]
        summary = torch.cat([out[-1, : self.hidden // 2], out[0, self.hidden // 2:]])  # fwd end, bwd end
        h0, c0 = torch.tanh(self.bridge(summary)).chunk(2)
        return out, (h0[None], c0[None])

    def forward(self, features: torch.Tensor, allowed: torch.Tensor, **kwargs) -> tuple[torch.Tensor, ...]:
        """(actions [K+E, n] int64, log_prob [K+E], entropy [K+E]); the arguments are :meth:`decode`'s."""
        return self.decode(features, allowed, **kwargs)[:3]

    def decode(self, features: torch.Tensor, allowed: torch.Tensor, *, samples: int = 0,
               actions: torch.Tensor | None = None, temperature: float = 1.0, noise_std: float = 0.0,
               explore: float = 0.0, generator: torch.Generator | None = None, greedy: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(actions [K+E, n] int64, log_prob [K+E], entropy [K+E], step_log_probs [K+E, n, D]): ``samples`` (K)
        sampled placements, then the E given ``actions`` [E, n] scored, in one pass over the groups;
        ``step_log_probs`` (no gradient) are each row's per-group device distributions, given its own earlier groups.

        ``features`` [n, F], ``allowed`` [n, D] bool. ``greedy``: the K rows take the most likely device
        instead of sampling. ``explore`` = e: each group's distribution is (1 - e) * the network's + e * uniform
        over its allowed devices (log-probs and entropy are of that mixture).
        """
        if not 0.0 <= explore < 1.0:
            raise ValueError(f"explore={explore!r}; expected a probability in [0, 1)")
        n = features.shape[0]
        if allowed.shape != (n, self.n_devices):
            raise ValueError(f"allowed has shape {tuple(allowed.shape)}; expected ({n}, {self.n_devices})")
        if not bool(allowed.any(dim=1).all()):
            raise ValueError("some group has no allowed device")
        if actions is not None and (actions.dim() != 2 or actions.shape[1] != n):
            raise ValueError(f"actions has shape {tuple(actions.shape)}; expected (E, {n})")
        given = 0 if actions is None else actions.shape[0]
        if samples < 0 or samples + given == 0:
            raise ValueError(f"samples={samples!r} with {given} given placements; "
                             f"expected something to sample or score")
        enc, (h0, c0) = self.encode(features)
        tables = self.decoder_tables(enc)
        how = Sampling(samples=samples, temperature=temperature, noise_std=noise_std, explore=explore,
                       generator=generator, greedy=greedy)
        with torch.no_grad():
            run = unroll(tables.detached(), h0.detach(), c0.detach(), allowed, actions, how)
        log_prob, entropy, steps = score(tables, h0, c0, allowed, run, how)
        return run.actions.T.contiguous(), log_prob, entropy, steps.detach().transpose(0, 1).contiguous()

    def decoder_tables(self, enc: torch.Tensor) -> DecoderTables:
        """The decoder's tensors for the encoder outputs ``enc`` [n, H]: the LSTM's input projection per previous
        device and per group, and the attention and head weights folded with the encoder outputs."""
        w_device, w_group = self.decoder.weight_ih.split(self.hidden, dim=1)
        w_state, w_context = self.head.weight.split(self.hidden, dim=1)
        return DecoderTables(
            device_gates=self.device_embed.weight @ w_device.T,
            group_gates=enc @ w_group.T + self.decoder.bias_ih + self.decoder.bias_hh,
            w_hh=self.decoder.weight_hh,
            attention=self.att_query.weight.T @ (enc.T / self.hidden ** 0.5),
            state_logits=w_state.T, context_logits=enc @ w_context.T, bias=self.head.bias)
