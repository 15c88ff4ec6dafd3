"""The sequential decoder: groups are placed one after another in topological order, and each group's device
logits see where the groups before it went (Placeto places one node at a time on the placement so far;
GDP's one-shot decoding does not).

A group's logit on device slot d is the encoder's logit plus ``PlacementAwareHead`` of the group's encoding
and five numbers about slot d, summed over the groups already placed (:mod:`.graph_input` defines the inputs):

1. the share of the group's exchanged bytes that go to groups already on d (what placing it elsewhere
   would move);
2. whether the group just before it went to d (where the current chunk of layers is);
3. the compute already on d, 1 being an even share of the graph's GPU compute;
4. the bytes already on d at the single-GPU sequential peak, against one GPU's memory (how full d is);
5. whether d is a GPU.

The same small MLP scores every slot, so what it learns (stay with the bytes, move on when a GPU is full or
holds its share of compute) does not depend on which GPU it is and carries over between graphs; the
encoder's own logit still says which device a group prefers. The head's output layer starts at zero, so an
untrained head decodes as the encoder alone.

Sampling runs group by group in a compiled loop (:func:`decode`, no gradients); the log-probabilities of
given placements, for the loss, come from :func:`placement_features` in one batched pass (teacher forcing:
every feature of group i depends only on the devices of groups before i, so that pass gives each group the
logits it was sampled with).
"""
from __future__ import annotations

import numba
import numpy as np
import torch
from torch import nn

from .graph_input import GraphInput

PLACEMENT_FEATURES = 5
HEAD_WIDTH = 32


class PlacementAwareHead(nn.Module):
    """[group encoding, slot features] -> a logit adjustment per group and slot."""

    def __init__(self, encoding_dim: int, width: int = HEAD_WIDTH) -> None:
        super().__init__()
        self.context = nn.Linear(encoding_dim, width)
        self.features = nn.Linear(PLACEMENT_FEATURES, width, bias=False)
        self.out = nn.Linear(width, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, context: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """``context`` [n, width] (``self.context`` of the encodings), ``features`` [K, n, S, F] -> [K, n, S]."""
        hidden = torch.relu(context[None, :, None, :] + self.features(features))
        return self.out(hidden)[..., 0]


def placement_features(inputs: GraphInput, actions: torch.Tensor, slots: int) -> torch.Tensor:
    """[K, n, slots, PLACEMENT_FEATURES] float32: each group's slot features given the devices ``actions`` [K, n]
    gave the groups before it (see the module docstring)."""
    k, n = actions.shape
    onehot = nn.functional.one_hot(actions, slots).float()  # [K, n, S]
    bytes_with = onehot.new_zeros((k, n, slots)).index_add_(
        1, inputs.earlier_dst, onehot[:, inputs.earlier_src] * inputs.earlier_share[None, :, None])
    previous = torch.cat([onehot.new_zeros((k, 1, slots)), onehot[:, :-1]], dim=1)

    def before(load: torch.Tensor) -> torch.Tensor:
        placed = onehot * load[None, :, None]
        return placed.cumsum(dim=1) - placed

    gpu = inputs.gpu_slots.float()[None, None, :].expand(k, n, slots)
    return torch.stack([bytes_with, previous, before(inputs.compute_load), before(inputs.memory_load), gpu], dim=3)


@numba.njit(cache=True)
def _decode(context, weights, out_weight, out_bias, base, pair_ptr, pair_src, pair_share, compute_load,
            memory_load, gpu_slots, uniforms, override, greedy):  # pragma: no cover - compiled
    k_samples, n = uniforms.shape
    slots, width = base.shape[1], context.shape[1]
    actions = np.zeros((k_samples, n), np.int64)
    logits = np.empty(slots)
    feature = np.zeros(PLACEMENT_FEATURES)
    for k in range(k_samples):
        compute = np.zeros(slots)
        memory = np.zeros(slots)
        exchanged = np.zeros(slots)
        for i in range(n):
            exchanged[:] = 0.0
            for p in range(pair_ptr[i], pair_ptr[i + 1]):
                exchanged[actions[k, pair_src[p]]] += pair_share[p]
            top = -np.inf
            for d in range(slots):
                if base[i, d] == -np.inf:
                    logits[d] = -np.inf
                    continue
                feature[0] = exchanged[d]
                feature[1] = 1.0 if i > 0 and actions[k, i - 1] == d else 0.0
                feature[2] = compute[d]
                feature[3] = memory[d]
                feature[4] = 1.0 if gpu_slots[d] else 0.0
                total = out_bias
                for h in range(width):
                    x = context[i, h]
                    for f in range(PLACEMENT_FEATURES):
                        x += feature[f] * weights[f, h]
                    if x > 0.0:
                        total += x * out_weight[h]
                logits[d] = base[i, d] + total
                top = max(top, logits[d])
            chosen = -1
            if greedy:
                for d in range(slots):
                    if logits[d] == top:
                        chosen = d
                        break
            else:
                mass = 0.0
                for d in range(slots):
                    mass += np.exp(logits[d] - top)
                target, running = uniforms[k, i] * mass, 0.0
                for d in range(slots):
                    if logits[d] == -np.inf:
                        continue
                    running += np.exp(logits[d] - top)
                    chosen = d
                    if running > target:
                        break
            if override[k, i] >= 0:
                chosen = override[k, i]
            actions[k, i] = chosen
            compute[chosen] += compute_load[i]
            memory[chosen] += memory_load[i]
    return actions


def decode(head: PlacementAwareHead, context: torch.Tensor, base: torch.Tensor, inputs: GraphInput, k: int,
           generator: torch.Generator | None, greedy: bool, override: torch.Tensor | None = None) -> torch.Tensor:
    """[k, n] int64 placements decoded group by group: sampled (uniforms from ``generator``) or, with ``greedy``,
    each group's likeliest device given the ones before it. ``context`` [n, width], ``base`` [n, S] the
    encoder's masked logits; ``override`` [k, n]: where >= 0, the group's device instead of the drawn one (the
    groups after it see that device)."""
    n = base.shape[0]
    overrides = np.full((k, n), -1, np.int64) if override is None else override.numpy()
    pair_ptr = np.searchsorted(inputs.earlier_dst.numpy(), np.arange(n + 1))
    uniforms = (np.zeros((k, n)) if greedy
                else torch.rand((k, n), generator=generator, dtype=torch.float64).numpy())
    with torch.no_grad():
        actions = _decode(
            context.detach().double().numpy(), head.features.weight.detach().double().T.numpy().copy(),
            head.out.weight.detach().double()[0].numpy().copy(), float(head.out.bias.detach()[0]),
            base.detach().double().numpy(), pair_ptr, inputs.earlier_src.numpy(),
            inputs.earlier_share.double().numpy(), inputs.compute_load.double().numpy(),
            inputs.memory_load.double().numpy(), inputs.gpu_slots.numpy(), uniforms, overrides, greedy)
    return torch.from_numpy(actions)
