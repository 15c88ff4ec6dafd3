"""REINFORCE across graphs: one update samples K placements of each of several graphs, measures each graph's
K in one batch, and takes one Adam step on the sum of the graphs' losses.

Per graph: loss = -mean(advantage * log p(placement)) / n_groups - entropy * mean group entropy
+ self_imitation * mean group cross-entropy with the fastest placement the graph's problem has evaluated so
far (``problem.best``, relabelled by the cluster's device symmetry under which the network finds it likeliest:
a best found with two alike GPUs swapped is the same step, and the target should not flip between labellings;
the imitation warm start gives every graph the canonical labelling, so they start alike), with the rewards of
:mod:`.rewards` and per-graph advantages (the graph's samples' rewards minus their mean, over their spread, clipped
to +-``ADVANTAGE_CLIP``: :func:`agents.common.advantages.centred_advantages`); dividing by n_groups keeps a
graph of 1,000 groups from drowning one of 100. Gradients are clipped to norm ``grad_clip``.

Self-imitation (after Oh et al., ICML 2018, as the seq2seq agent's ``--self-imitation``) keeps the policy
centred on the best placement found, so REINFORCE searches around it rather than drifting from the imitation
warm start to a placement that fails (docs/findings.md).

``explore`` and ``local_moves`` (0 in pre-training; :mod:`.harness`'s fine-tuning sets them) search around a
near-deterministic policy as the seq2seq agent's fine-tuning does: samples drawn from a mixture with the uniform
distribution (about ``explore`` groups per placement), and a few placements per update that are the best so far
with 1-4 groups moved (:mod:`agents.common.local_moves`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import torch
from torch.nn import functional

from agents.common.advantages import centred_advantages
from agents.common.local_moves import LocalMoves

from .network import DECODERS, Encoding, GnnPlacerNet
from .policy import greedy, likeliest, sample
from .rewards import rewards
from .task import PlacementTask

ADVANTAGE_CLIP = 5.0  # per-graph advantages, in standard deviations of the graph's rewards in the update


@dataclass(frozen=True)
class Config:
    """The network's shape and the training settings (stored in the checkpoint)."""

    hidden: int = 64
    layers: int = 3
    heads: int = 4
    lr: float = 1e-3
    samples: int = 16  # K placements per graph and update
    graphs_per_update: int = 4
    entropy: float = 0.01
    self_imitation: float = 1.0
    grad_clip: float = 1.0
    decoder: str = "independent"  # see network.DECODERS
    explore: float = 0.0  # per placement, the expected number of groups drawn uniformly (policy.sample)
    local_moves: int = 0  # this many of the K per graph and update are its best placement with 1-4 groups moved

    def __post_init__(self) -> None:
        for name, least in (("hidden", 1), ("heads", 1), ("samples", 1), ("graphs_per_update", 1), ("local_moves", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                accepted = "a positive integer" if least else "an integer >= 0"
                raise ValueError(f"Config.{name}={value!r}; expected {accepted}")
        for name in ("lr", "grad_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Config.{name}={getattr(self, name)!r}; expected a positive number")
        for name in ("entropy", "self_imitation", "explore"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"Config.{name}={getattr(self, name)!r}; expected a number >= 0")
        if self.decoder not in DECODERS:
            raise ValueError(f"Config.decoder={self.decoder!r}; expected one of {', '.join(DECODERS)}")

    def network(self, feature_dim: int) -> GnnPlacerNet:
        return GnnPlacerNet(feature_dim, hidden=self.hidden, layers=self.layers, heads=self.heads,
                            decoder=self.decoder)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GraphStats:
    """One graph's share of an update."""

    task: str
    mean_reward: float
    success_rate: float
    best_runtime_s: float  # of the samples that ran (inf if none)
    entropy: float


class Trainer:
    """The network, its optimiser and the sampling generator."""

    def __init__(self, net: GnnPlacerNet, config: Config, *, seed: int = 0) -> None:
        self.net, self.config = net, config
        self.generator = torch.Generator().manual_seed(int(seed))
        self.movers: dict[str, LocalMoves] = {}  # per task, made at its first local move

    @cached_property
    def optimizer(self) -> torch.optim.Adam:
        """Made at the first update: building an optimiser imports torch's compiler stack (about 2 s), which a
        zero-shot placement never needs."""
        return torch.optim.Adam(self.net.parameters(), lr=self.config.lr)

    def update(self, tasks: Sequence[PlacementTask], samples: int | None = None) -> list[GraphStats]:
        """One REINFORCE step over ``tasks`` (``samples`` placements each, default ``config.samples``, of which
        ``config.local_moves`` are moves around the task's best placement once it has one); the placements are
        evaluated through each task's counted problem. The loss and the statistics are the policy's samples'."""
        k = samples or self.config.samples
        self.optimizer.zero_grad()
        stats = []
        for task in tasks:
            encoding = self.net(task.inputs)
            best = task.problem.best
            moves = min(self.config.local_moves, k - 1) if best is not None else 0
            drawn = sample(self.net, encoding, k - moves, self.generator, explore=self.config.explore)
            placements = drawn.actions.numpy()
            if moves:
                placements = np.concatenate([placements, self._moves(task, encoding, best.placement, moves)])
            measured = task.problem.evaluate_batch(placements)[:k - moves]
            reward = rewards(measured, task.lower_bound, task.capacity)
            advantage = torch.from_numpy(centred_advantages(reward, ADVANTAGE_CLIP)).float()
            loss = -(advantage * drawn.log_prob).mean() / task.inputs.n_groups - self.config.entropy * drawn.entropy
            if best is not None and self.config.self_imitation > 0:
                candidates = torch.from_numpy(task.relabellings(best.placement))
                target, log_probs = likeliest(self.net, encoding, candidates)
                loss = loss + self.config.self_imitation * functional.nll_loss(log_probs, target)
            (loss / len(tasks)).backward()
            ran = [m.runtime_s for m in measured if m.ok]
            stats.append(GraphStats(task.name, float(reward.mean()), len(ran) / len(measured),
                                    min(ran, default=float("inf")), float(drawn.entropy.detach())))
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.config.grad_clip)
        self.optimizer.step()
        return stats

    def _moves(self, task: PlacementTask, encoding: Encoding, best: np.ndarray, count: int) -> np.ndarray:
        """[count, n]: ``best`` with a few groups moved, guided by the policy's probabilities along it."""
        mover = self.movers.setdefault(task.name, LocalMoves(self.generator))
        n_devices = task.problem.cluster.n_devices
        with torch.no_grad():
            log_probs = self.net.group_log_probs(encoding, torch.tensor(best, dtype=torch.long)[None])[0]
        return mover(best, log_probs[:, :n_devices].exp().numpy(), task.problem.allowed, count)

    def greedy(self, task: PlacementTask) -> np.ndarray:
        """The most likely placement of ``task``'s graph (no evaluation)."""
        with torch.no_grad():
            return self.net.draw(self.net(task.inputs), 1, greedy=True)[0].numpy()

    def greedy_with_log_probs(self, task: PlacementTask) -> tuple[np.ndarray, np.ndarray]:
        """The most likely placement of ``task``'s graph, and [n_groups, n_devices] each group's device
        log-probabilities on its cluster along it (-inf where masked); one pass, no evaluation."""
        with torch.no_grad():
            placement, log_probs = greedy(self.net, self.net(task.inputs))
        return placement.numpy(), log_probs[:, :task.problem.cluster.n_devices].numpy()
