"""The REINFORCE learner of one (graph, cluster) run: :class:`Trainer` holds the policy, its optimiser, the
reward baseline and the record of the run (best placement, elites, history).

``Trainer.update`` is one step of the algorithm: sample K placements, evaluate them in one batch, and take an
Adam step on

    loss = -(1/K) sum_i A_i log p(P_i) - beta * H(p) [- w * mean log p(elite)],
    A_i = R(P_i) - B,   R = -sqrt(charged runtime)  (the failing signal for a failed placement)

with B an exponential moving average of the rewards of the successful samples only. The trainer also makes
the local moves around the best placement, imitates a given placement (warm start), and gives its state for
a checkpoint.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import torch

from agents.common.advantages import moving_average, normalised
from agents.common.local_moves import LocalMoves
from placement_env import REWARDS, RewardContext, charged_runtime, raise_on_infrastructure_failure

from .config import Config
from .policy import Seq2SeqPolicy

EvaluateBatch = Callable[[np.ndarray], list]
REWARD = REWARDS["neg_sqrt_runtime"]  # the paper's R = -sqrt(charged runtime)
MAX_IMITATION_STEPS = 300  # the warm start stops imitating after this many steps, target probability or not
# the keys of an update's log row, in the CSV log's column order
LOG_COLUMNS = ("update", "evaluations", "wall_s", "mean_reward", "mean_runtime_s", "mean_ok_runtime_s", "success_rate",
               "best_runtime_s", "entropy", "baseline")


def batch_function(evaluator: Any) -> EvaluateBatch:
    """``evaluator.batch`` for an object that has one, else ``evaluator`` itself if it is callable."""
    if hasattr(evaluator, "batch"):
        return evaluator.batch
    if callable(evaluator):
        return evaluator
    raise TypeError(f"evaluator is a {type(evaluator).__name__}; expected an object with .batch(placements) "
                    f"or a callable placements -> list[Measurement]")


class Trainer:
    """Policy, optimiser, baseline and the record of one (graph, cluster) training run."""

    def __init__(self, features: np.ndarray, allowed: np.ndarray, config: Config, seed: int = 0) -> None:
        self.config = config
        torch.set_flush_denormal(True)  # denormal floats in the LSTMs make CPU updates slower (docs/findings.md)
        self.features = torch.as_tensor(features, dtype=torch.float32)
        self.allowed = torch.as_tensor(np.asarray(allowed, bool))
        torch.manual_seed(seed)
        self.policy = Seq2SeqPolicy(self.features.shape[1], self.allowed.shape[1], hidden=config.hidden)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr, foreach=True)
        self.generator = torch.Generator().manual_seed(seed + 1)
        self.baseline: float | None = None
        self.spread: float | None = None
        self.updates = 0
        self.evaluations = 0
        self.wall_s = 0.0
        self.history: list[dict[str, float]] = []
        self.best_runtime_s = float("inf")
        self.best_placement: np.ndarray | None = None
        self.elites: list[tuple[float, np.ndarray]] = []  # (runtime, placement), fastest first, distinct
        self.mover = LocalMoves(self.generator)

    def record(self, runtime_s: float, placement: np.ndarray) -> None:
        """Note a successful placement: the best so far and the elites."""
        if runtime_s < self.best_runtime_s:
            self.best_runtime_s, self.best_placement = float(runtime_s), placement.copy()
        if len(self.elites) >= self.config.elites and runtime_s >= self.elites[-1][0]:
            return
        if any(np.array_equal(placement, p) for _, p in self.elites):
            return
        self.elites.append((float(runtime_s), placement.copy()))
        self.elites.sort(key=lambda e: e[0])
        del self.elites[self.config.elites:]

    def update(self, evaluate_batch: EvaluateBatch, samples: int | None = None) -> dict[str, float]:
        """Sample, evaluate, take one REINFORCE step; the log row of this update (its statistics are of the
        policy's own samples, not of the local moves)."""
        cfg = self.config
        k = samples or cfg.samples
        moves = min(cfg.local_moves, k - 1) if self.best_placement is not None else 0
        sampled = k - moves
        noise = cfg.logits_noise if self.updates < cfg.noise_updates else 0.0
        self.policy.train()
        given = [self.best_placement] if moves else []  # scored for its per-group distributions
        n_elites = len(self.elites) if cfg.self_imitation > 0 else 0
        given += [p for _, p in self.elites[:n_elites]]
        actions, log_prob, entropy, step_log_probs = self.policy.decode(
            self.features, self.allowed, samples=sampled,
            actions=torch.as_tensor(np.stack(given), dtype=torch.long) if given else None,
            temperature=cfg.temperature, noise_std=noise, explore=min(cfg.explore / len(self.features), 0.5),
            generator=self.generator)
        elite_log_prob = log_prob[len(log_prob) - n_elites:]
        log_prob, entropy = log_prob[:sampled], entropy[:sampled]
        placements = actions[:sampled].numpy()
        if moves:
            around = self.mover(self.best_placement, step_log_probs[sampled].exp().numpy(), self.allowed.numpy(),
                                moves)
            placements = np.concatenate([placements, around])
        measurements = list(evaluate_batch(placements))
        if len(measurements) != k:
            raise RuntimeError(f"the evaluator returned {len(measurements)} measurements for {k} placements")
        raise_on_infrastructure_failure(*measurements)  # no verdict on the placements: learn nothing from them
        self.evaluations += k
        ok_all = np.array([bool(m.ok) for m in measurements])
        charged_all = np.array([charged_runtime(m, cfg.failing_signal) for m in measurements])
        for i in np.flatnonzero(ok_all):
            self.record(float(charged_all[i]), placements[i])
        ok, charged = ok_all[:sampled], charged_all[:sampled]
        context = RewardContext(failing_signal_s=cfg.failing_signal)
        rewards = np.array([REWARD(m, context) for m in measurements[:sampled]])
        advantages, baseline = self._advantages(rewards, ok)
        n = self.features.shape[0]
        loss = -(torch.as_tensor(advantages, dtype=torch.float32) * log_prob).mean() - cfg.entropy * entropy.mean()
        if n_elites:
            loss = loss - cfg.self_imitation * elite_log_prob.mean()
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.updates += 1
        return {
            "update": self.updates, "evaluations": self.evaluations, "wall_s": self.wall_s,
            "mean_reward": float(rewards.mean()), "mean_runtime_s": float(charged.mean()),
            "mean_ok_runtime_s": float(charged[ok].mean()) if ok.any() else float("nan"),
            "success_rate": float(ok.mean()), "best_runtime_s": self.best_runtime_s,
            "entropy": float(entropy.mean().item() / n), "baseline": baseline,
        }

    def _advantages(self, rewards: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, float]:
        """The samples' advantages over the baseline, and the baseline. The baseline and the spread (the
        normaliser) are moving averages over the successful samples only; with ``normalize_advantages`` the
        advantages are divided by the spread (at least 1e-3 of the baseline) and clipped."""
        cfg = self.config
        if ok.any():  # the baseline skips failing samples
            self.baseline = moving_average(self.baseline, float(rewards[ok].mean()), cfg.baseline_decay)
            if ok.sum() > 1:
                self.spread = moving_average(self.spread, float(rewards[ok].std()), cfg.baseline_decay)
        baseline = self.baseline if self.baseline is not None else float(rewards.mean())
        advantages = rewards - baseline
        if cfg.normalize_advantages:
            advantages = normalised(advantages, max(self.spread or 0.0, 1e-8 + 1e-3 * abs(baseline)),
                                    cfg.advantage_clip)
        return advantages, baseline

    def imitate(self, placement: np.ndarray, *, target_prob: float, max_steps: int = MAX_IMITATION_STEPS,
                lr: float = 3e-3) -> int:
        """Warm start: fit the policy to ``placement`` (teacher forcing, its own Adam) until the geometric mean
        of the per-group probabilities of that placement reaches ``target_prob``; the number of steps taken."""
        actions = torch.as_tensor(np.asarray(placement, np.int64))[None]
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr, foreach=True)
        n = self.features.shape[0]
        self.policy.train()
        for step in range(1, max_steps + 1):
            _, log_prob, _ = self.policy(self.features, self.allowed, actions=actions)
            per_group = log_prob[0] / n
            if float(per_group.detach().exp()) >= target_prob:
                return step - 1
            optimizer.zero_grad()
            (-per_group).backward()
            torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.grad_clip)
            optimizer.step()
        return max_steps

    @torch.no_grad()
    def greedy(self) -> np.ndarray:
        """The policy's most likely placement (each group's most likely device, given the earlier groups')."""
        self.policy.eval()
        actions, _, _ = self.policy(self.features, self.allowed, samples=1, greedy=True)
        return actions[0].numpy()

    def state(self) -> dict[str, Any]:
        """Everything :meth:`load` needs to continue this run exactly (config, weights, optimiser, record, RNGs)."""
        return {
            "config": dataclasses.asdict(self.config),
            "policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
            "baseline": self.baseline, "spread": self.spread, "updates": self.updates,
            "evaluations": self.evaluations, "wall_s": self.wall_s, "history": list(self.history),
            "best_runtime_s": self.best_runtime_s,
            "best_placement": None if self.best_placement is None else self.best_placement.tolist(),
            "elites": [(r, p.tolist()) for r, p in self.elites],
            "moved_from": None if self.mover.moved_from is None else self.mover.moved_from.tolist(),
            "tried": sorted(self.mover.tried),
            "torch_rng": torch.get_rng_state(), "generator": self.generator.get_state(),
        }

    def load(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state` (the config is the constructor's: a resumed run builds it from the state,
        and so are the optimiser's hyper-parameters; of the optimiser only its state per parameter is read)."""
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict({"state": state["optimizer"]["state"],
                                        "param_groups": self.optimizer.state_dict()["param_groups"]})
        self.baseline, self.spread = state["baseline"], state["spread"]
        self.updates, self.evaluations, self.wall_s = state["updates"], state["evaluations"], state["wall_s"]
        self.history = list(state["history"])
        self.best_runtime_s = float(state["best_runtime_s"])
        best = state["best_placement"]
        self.best_placement = None if best is None else np.asarray(best, np.int64)
        self.elites = [(float(r), np.asarray(p, np.int64)) for r, p in state["elites"]]
        moved_from = state["moved_from"]
        self.mover.moved_from = None if moved_from is None else np.asarray(moved_from, np.int64)
        self.mover.tried = set(state["tried"])
        torch.set_rng_state(state["torch_rng"])
        self.generator.set_state(state["generator"])
