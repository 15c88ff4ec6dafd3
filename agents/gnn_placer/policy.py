"""Sampling and scoring placements from the network's masked logits: one categorical choice per group."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Samples:
    """``actions`` [K, n] int64, their summed ``log_prob`` [K] (with gradients) and the policy's mean entropy
    per group (a scalar, with gradients)."""

    actions: torch.Tensor
    log_prob: torch.Tensor
    entropy: torch.Tensor


def group_log_probs(logits: torch.Tensor) -> torch.Tensor:
    """[n, D] log-probabilities of the masked ``logits`` (-inf where masked)."""
    if not bool(torch.isfinite(logits).any(dim=1).all()):
        raise ValueError("some group has no allowed device")
    return torch.log_softmax(logits, dim=1)


def mean_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """The mean over groups of each group's entropy (masked devices count 0)."""
    p = log_probs.exp()
    return -(p * log_probs.masked_fill(p == 0, 0.0)).sum(dim=1).mean()


def sample(logits: torch.Tensor, k: int, generator: torch.Generator | None = None) -> Samples:
    """``k`` placements drawn from ``logits`` [n, D], each group independently."""
    if k < 1:
        raise ValueError(f"k={k!r}; expected at least one sample")
    log_probs = group_log_probs(logits)
    actions = torch.multinomial(log_probs.detach().exp(), k, replacement=True, generator=generator).T  # [k, n]
    return Samples(actions, score(log_probs, actions), mean_entropy(log_probs))


def score(log_probs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """[K]: the summed log-probability of each placement of ``actions`` [K, n]."""
    return log_probs.gather(1, actions.T).sum(dim=0)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """[n] int64: the most likely allowed device of every group."""
    return group_log_probs(logits).argmax(dim=1)
