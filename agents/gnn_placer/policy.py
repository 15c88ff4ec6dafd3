"""Sampling, scoring and greedy decoding of placements by the network (:class:`GnnPlacerNet`'s decoder)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .network import Encoding, GnnPlacerNet


@dataclass(frozen=True)
class Samples:
    """``actions`` [K, n] int64, their summed ``log_prob`` [K] (with gradients) and the policy's mean entropy
    per group (a scalar, with gradients)."""

    actions: torch.Tensor
    log_prob: torch.Tensor
    entropy: torch.Tensor


def mean_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """The mean over groups (and placements) of each group's entropy; ``log_probs`` [..., D], masked devices
    (-inf) count 0."""
    p = log_probs.exp()
    return -(p * log_probs.masked_fill(p == 0, 0.0)).sum(dim=-1).mean()


def score(log_probs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """[K]: the summed log-probability of each placement of ``actions`` [K, n], given its group log-probabilities
    ``log_probs`` [K, n, D]."""
    return log_probs.gather(2, actions[..., None])[..., 0].sum(dim=1)


def sample(net: GnnPlacerNet, encoding: Encoding, k: int, generator: torch.Generator | None = None) -> Samples:
    """``k`` placements drawn from the policy, with their log-probabilities and entropy."""
    actions = net.draw(encoding, k, generator)
    log_probs = net.group_log_probs(encoding, actions)
    return Samples(actions, score(log_probs, actions), mean_entropy(log_probs))


def greedy(net: GnnPlacerNet, encoding: Encoding) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's likeliest placement [n] int64 and its groups' log-probabilities [n, D] along it."""
    actions = net.draw(encoding, 1, greedy=True)
    return actions[0], net.group_log_probs(encoding, actions)[0]


def likeliest(net: GnnPlacerNet, encoding: Encoding, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Of ``candidates`` [r, n] (e.g. one placement relabelled by the cluster's symmetries), the one the policy
    finds likeliest [n], and its group log-probabilities [n, D] (with gradients)."""
    log_probs = net.group_log_probs(encoding, candidates)
    best = int(torch.argmax(score(log_probs.detach(), candidates)))
    return candidates[best], log_probs[best]
