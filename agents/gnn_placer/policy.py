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


def exploration_weight(explore: float, n_groups: int) -> float:
    """Each group's weight of the uniform distribution in the sampling mixture: ``explore`` groups per placement on
    average, at most half of each group's draws."""
    return min(explore / max(n_groups, 1), 0.5)


def mixture(log_probs: torch.Tensor, weight: float) -> torch.Tensor:
    """Log-probabilities [..., D] of (1 - ``weight``) x the policy's ``log_probs`` [..., D] + ``weight`` x the
    uniform distribution over each group's allowed devices (those with a finite log-probability)."""
    allowed = torch.isfinite(log_probs)
    uniform = allowed / allowed.sum(dim=-1, keepdim=True)
    mixed = (1 - weight) * log_probs.exp() + weight * uniform
    return torch.log(mixed.clamp_min(1e-30)).masked_fill(~allowed, float("-inf"))  # clamped: no 0 / 0 gradient


def sample(net: GnnPlacerNet, encoding: Encoding, k: int, generator: torch.Generator | None = None, *,
           explore: float = 0.0) -> Samples:
    """``k`` placements drawn from the policy, with their log-probabilities and the policy's entropy. With
    ``explore`` > 0 they are drawn from its mixture with the uniform distribution over each group's allowed
    devices (:func:`exploration_weight`), and ``log_prob`` is the mixture's, the distribution they came from."""
    n = encoding.logits.shape[0]
    weight = exploration_weight(explore, n)
    override = None
    if weight > 0:  # per group, whether the uniform draw replaces the policy's, and that draw
        explored = torch.rand((k, n), generator=generator) < weight
        uniform = torch.multinomial(torch.isfinite(encoding.logits).double(), k, replacement=True,
                                    generator=generator).T
        override = torch.where(explored, uniform, -1)
    actions = net.draw(encoding, k, generator, override=override)
    log_probs = net.group_log_probs(encoding, actions)
    scored = mixture(log_probs, weight) if weight > 0 else log_probs
    return Samples(actions, score(scored, actions), mean_entropy(log_probs))


def greedy(net: GnnPlacerNet, encoding: Encoding) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's likeliest placement [n] int64 and its groups' log-probabilities [n, D] along it."""
    actions = net.draw(encoding, 1, greedy=True)
    return actions[0], net.group_log_probs(encoding, actions)[0]


SCORING_CHUNK = 1024  # placements scored at once by a sequential decoder: [chunk, n, D, head width] floats


def log_likelihoods(net: GnnPlacerNet, encoding: Encoding, placements: torch.Tensor) -> torch.Tensor:
    """[r]: the summed log-probability of each of ``placements`` [r, n], without gradients. An independent decoder
    gives every placement the same group log-probabilities, computed once; a sequential one scores
    ``SCORING_CHUNK`` placements at a time, so memory stays bounded for the 40,320 relabellings of an 8-GPU
    machine."""
    with torch.no_grad():
        if net.decodes_independently:
            log_probs = net.group_log_probs(encoding, placements[:1])
            return score(log_probs.expand(placements.shape[0], -1, -1), placements)
        return torch.cat([score(net.group_log_probs(encoding, part), part) for part in placements.split(SCORING_CHUNK)])


def likeliest(net: GnnPlacerNet, encoding: Encoding, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Of ``candidates`` [r, n] (e.g. one placement relabelled by the cluster's symmetries), the one the policy
    finds likeliest [n], and its group log-probabilities [n, D] (with gradients, computed for it alone)."""
    best = int(torch.argmax(log_likelihoods(net, encoding, candidates)))
    return candidates[best], net.group_log_probs(encoding, candidates[best:best + 1])[0]
