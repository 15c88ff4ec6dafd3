"""The seed paper's agent: a seq2seq policy trained with REINFORCE (Mirhoseini et al., 2017).

Every update samples K placements from the policy (:mod:`agents.policy`), measures them with one
``evaluate_batch`` call, and takes an Adam step on

    loss = -(1/K) sum_i A_i log p(P_i) - beta * H(p),
    A_i = R(P_i) - B,   R = -sqrt(charged runtime)  (the failing signal, 100 s, for a failed placement)

with B an exponential moving average (decay 0.9) of the rewards of the *successful* samples only.
Gradients are clipped to norm 1.0. Deviations from the paper, all switchable in :class:`Config`:
advantages are divided by an EMA of the successful rewards' spread and clipped to +-5
(``normalize_advantages``; rewards of small graphs differ by 1e-3, which the entropy bonus would
swamp), and logits get Gaussian noise for the first ``noise_updates`` updates (TF's placer).
Off by default, on for warm-started runs (``FINE_TUNING``): self-imitation (``self_imitation``,
``elites``; after Oh et al., ICML 2018, and the cross-entropy step of Post, Gao et al., NeurIPS 2018)
adds ``-w * mean log p(elite)`` over the fastest distinct placements seen so far; an exploration
floor (``explore``) mixes each group's distribution with a uniform one over its allowed devices, so
the policy keeps searching around its elite after it has converged on it; and ``local_moves`` of the
K placements per update are the best so far with 1-4 groups moved where the policy doubts it (they
are evaluated and may become the best, but take no part in the REINFORCE step or its baseline).

* ``train(...)``: train on a benchmark for an evaluation or wall budget, logging to ``out_dir``
  (``log.csv`` and the same scalars under ``tensorboard/``, ``checkpoint.pt``, ``best_placement.json``,
  ``learning_curve.png``); ``resume=True``
  continues from ``out_dir/checkpoint.pt``.
* ``place(problem)``: the harness method (``placement-env run --methods agents.reinforce_seq2seq:place``);
  trains within ``problem.budget`` evaluations through ``problem.evaluate``. ``place_self_imitation``: the
  same with self-imitation and the exploration floor. ``place_warm_start``: the
  same after imitating the best baseline (``--warm-start best``; not in the paper).
* ``python -m agents.reinforce_seq2seq``: the CLI (``--help``); it ends with a table against the
  baselines and writes ``best_placement.pb`` (the placed TF graph).

``evaluator=``: anything with ``.batch(placements [K, n]) -> list[Measurement]`` or such a callable
(e.g. ``placement_env.parallel.ParallelEvaluator(...)``); by default the env's own evaluator.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from agents.outputs import (BEST_JSON, BEST_PB, CURVE, LOG, TENSORBOARD, TensorBoardLog, atomic_write, baseline_table,
                            check_task_arguments, curve_references, export_best, non_negative_float, non_negative_int,
                            plot_curve, positive_float, positive_int, run_dir, write_log)
from agents.policy import Seq2SeqPolicy, group_features
from placement_env.errors import CheckpointMismatchError, PlacementEnvError

CHECKPOINT = "checkpoint.pt"
LOG_COLUMNS = ("update", "evaluations", "wall_s", "mean_reward", "mean_runtime_s", "mean_ok_runtime_s", "success_rate",
               "best_runtime_s", "entropy", "baseline")
DEFAULT_MINUTES = 10.0
# From scratch with self-imitation (place_self_imitation): pull towards the best placement, explore 2 groups.
SELF_IMITATION = {"self_imitation": 1.0, "elites": 1, "explore": 2.0}
# A warm-started run fine-tunes around its teacher: these replace the Config defaults (flags still win). Without
# self-imitation and an exploration floor, lr 3e-3 wrecked the imitation in one update on nmt, and at 1e-4 the
# policy moved too slowly to follow its own improvements. The floor is 1 group, not 2: with 2 (and imitation to
# 0.99) samples on nmt / 4 GPUs strayed 10-27 groups from the best and fine-tuning gained half as much.
# Local moves: the policy's samples stray from its best (its mode lags behind the best by 3-10 groups on nmt /
# 4 GPUs), so runs stalled 7-8% over the expert with faster single-group moves left untried.
FINE_TUNING = {**SELF_IMITATION, "explore": 1.0, "lr": 1e-3, "logits_noise": 0.0, "local_moves": 2}
CHECKPOINT_EVERY = 25  # updates
MOVE_SIZES = torch.tensor([8.0, 4.0, 2.0, 1.0])  # relative odds that a local move changes 1, 2, 3 or 4 groups
CHECKPOINT_FORMAT = 3  # 2: dot-product attention, elites; 3: local moves

EvaluateBatch = Callable[[np.ndarray], list]


@dataclass
class Config:
    """Hyper-parameters (stored in the checkpoint; a resumed run keeps its own)."""

    samples: int = 16  # K placements per update
    hidden: int = 256
    lr: float = 3e-3
    entropy: float = 0.01  # beta, on the entropy of a whole placement (sum over groups, nats)
    baseline_decay: float = 0.9
    grad_clip: float = 1.0
    temperature: float = 1.0
    logits_noise: float = 0.5
    noise_updates: int = 50  # logits noise for this many updates, then none
    explore: float = 0.0  # per placement, the expected number of groups given a uniformly random allowed device
    normalize_advantages: bool = True
    advantage_clip: float = 5.0
    failing_signal: float = 100.0
    warm_start: str | None = None  # a baseline method (or "best") whose placement the policy imitates first
    warm_start_prob: float = 0.999  # ... until it gives that placement this probability per group
    self_imitation: float = 0.0  # weight of -log p(elite) in the loss (0: off, as in the paper)
    elites: int = 4  # the fastest distinct placements seen so far that self-imitation pulls towards
    local_moves: int = 0  # this many (at most K - 1) of the K per update are the best with a few groups moved

    def __post_init__(self) -> None:
        """A clear ValueError for a value out of range (also for a checkpoint's or ``dataclasses.replace``'s)."""
        checks = {  # name -> (accepted, test)
            **{name: ("an integer >= 1", lambda v: _is_int(v) and v >= 1) for name in ("samples", "hidden", "elites")},
            **{name: ("an integer >= 0", lambda v: _is_int(v) and v >= 0) for name in ("local_moves", "noise_updates")},
            **{name: ("a finite number > 0", lambda v: _is_real(v) and v > 0)
               for name in ("lr", "temperature", "grad_clip", "advantage_clip", "failing_signal")},
            **{name: ("a finite number >= 0", lambda v: _is_real(v) and v >= 0)
               for name in ("entropy", "logits_noise", "explore", "self_imitation")},
            **{name: ("a number in [0, 1]", lambda v: _is_real(v) and 0 <= v <= 1)
               for name in ("baseline_decay", "warm_start_prob")},
        }
        for name, (accepted, test) in checks.items():
            if not test(getattr(self, name)):
                raise ValueError(f"Config.{name}={getattr(self, name)!r}; expected {accepted}")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class TrainResult:
    best_placement: np.ndarray | None
    best_runtime_s: float
    history: list[dict[str, float]]
    evaluations: int
    wall_s: float  # over all sessions of a resumed run
    updates: int = 0
    lower_bound_s: float = float("nan")
    out_dir: Path | None = None
    trainer: "Trainer | None" = None  # the trained policy, e.g. to sample more placements


def _batch_function(evaluator: Any) -> EvaluateBatch:
    if hasattr(evaluator, "batch"):
        return evaluator.batch
    if callable(evaluator):
        return evaluator
    raise TypeError(f"evaluator is a {type(evaluator).__name__}; expected an object with .batch(placements) "
                    f"or a callable placements -> list[Measurement]")


def _charged(m: Any, failing_signal: float) -> float:
    if m.ok and math.isfinite(m.runtime_s) and m.runtime_s > 0:
        return float(m.runtime_s)
    return failing_signal


class Trainer:
    """Policy, optimiser, baseline and the record of one (graph, cluster) training run."""

    def __init__(self, features: np.ndarray, allowed: np.ndarray, config: Config, seed: int = 0) -> None:
        self.config = config
        torch.set_flush_denormal(True)  # denormals in the LSTMs slow CPU updates down by 1.5x or more
        self.features = torch.as_tensor(features, dtype=torch.float32)
        self.allowed = torch.as_tensor(np.asarray(allowed, bool))
        torch.manual_seed(seed)
        self.policy = Seq2SeqPolicy(self.features.shape[1], self.allowed.shape[1], hidden=config.hidden)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.lr)
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
        self.moved_from: np.ndarray | None = None  # the best placement the local moves in self.tried were made from
        self.tried: set[bytes] = set()

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
            placements = np.concatenate([placements, self._local_moves(step_log_probs[sampled], moves)])
        measurements = list(evaluate_batch(placements))
        if len(measurements) != k:
            raise RuntimeError(f"the evaluator returned {len(measurements)} measurements for {k} placements")
        self.evaluations += k
        ok_all = np.array([bool(m.ok) for m in measurements])
        charged_all = np.array([_charged(m, cfg.failing_signal) for m in measurements])
        for i in np.flatnonzero(ok_all):
            self.record(float(charged_all[i]), placements[i])
        ok, charged = ok_all[:sampled], charged_all[:sampled]
        rewards = -np.sqrt(charged)
        if ok.any():  # the baseline skips failing samples
            mean, spread = float(rewards[ok].mean()), float(rewards[ok].std())
            d = cfg.baseline_decay
            self.baseline = mean if self.baseline is None else d * self.baseline + (1 - d) * mean
            if ok.sum() > 1:
                self.spread = spread if self.spread is None else d * self.spread + (1 - d) * spread
        baseline = self.baseline if self.baseline is not None else float(rewards.mean())
        advantages = rewards - baseline
        if cfg.normalize_advantages:
            advantages = advantages / max(self.spread or 0.0, 1e-8 + 1e-3 * abs(baseline))
            advantages = np.clip(advantages, -cfg.advantage_clip, cfg.advantage_clip)
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

    def _local_moves(self, best_log_probs: torch.Tensor, count: int) -> np.ndarray:
        """[count, n]: the best placement with 1-4 groups moved (1 half the time, each more half as often).

        The policy guides the moves: half of a group's chance to move is the policy's doubt about the best's
        device there (1 - p, given the best's earlier groups), half is uniform; the new device is drawn half from
        the policy, half uniformly from the group's other allowed devices. Placements already tried around
        this best are drawn again (up to 8 times)."""
        best = self.best_placement
        if not np.array_equal(best, self.moved_from):
            self.moved_from, self.tried = best.copy(), set()
        allowed = self.allowed.numpy()
        others = allowed.copy()
        others[np.arange(len(best)), best] = False
        movable = others.any(axis=1)
        probs = best_log_probs.exp().numpy() * others  # the policy's weight on each other device
        doubt = probs.sum(axis=1)
        weights = movable * (0.5 * doubt / max(doubt.sum(), 1e-12) + 0.5 / max(movable.sum(), 1))
        device_weights = 0.5 * probs / np.maximum(doubt, 1e-12)[:, None] + \
            0.5 * others / np.maximum(others.sum(axis=1), 1)[:, None]
        out = np.repeat(best[None], count, axis=0)
        if not movable.any():
            return out
        weights_t = torch.as_tensor(weights, dtype=torch.float64)
        device_weights_t = torch.as_tensor(device_weights, dtype=torch.float64)
        for row in out:
            for _ in range(8):
                size = int(torch.multinomial(MOVE_SIZES, 1, generator=self.generator)) + 1
                groups = torch.multinomial(weights_t, min(size, int(movable.sum())), generator=self.generator)
                row[:] = best
                row[groups.numpy()] = torch.multinomial(device_weights_t[groups], 1,
                                                        generator=self.generator).squeeze(1).numpy()
                if row.tobytes() not in self.tried:
                    break
            self.tried.add(row.tobytes())
        return out

    def imitate(self, placement: np.ndarray, *, target_prob: float, max_steps: int = 300, lr: float = 3e-3) -> int:
        """Warm start: fit the policy to ``placement`` (teacher forcing, its own Adam) until the geometric mean
        of the per-group probabilities of that placement reaches ``target_prob``; the number of steps taken."""
        actions = torch.as_tensor(np.asarray(placement, np.int64))[None]
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr)
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
        self.policy.eval()
        actions, _, _ = self.policy(self.features, self.allowed, samples=1, greedy=True)
        return actions[0].numpy()

    # ---- checkpoints ----
    def state(self, meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "meta": meta, "config": dataclasses.asdict(self.config),
            "policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
            "baseline": self.baseline, "spread": self.spread, "updates": self.updates,
            "evaluations": self.evaluations, "wall_s": self.wall_s, "history": list(self.history),
            "best_runtime_s": self.best_runtime_s,
            "best_placement": None if self.best_placement is None else self.best_placement.tolist(),
            "elites": [(r, p.tolist()) for r, p in self.elites],
            "moved_from": None if self.moved_from is None else self.moved_from.tolist(), "tried": sorted(self.tried),
            "torch_rng": torch.get_rng_state(), "generator": self.generator.get_state(),
        }

    def load(self, state: dict[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.baseline, self.spread = state["baseline"], state["spread"]
        self.updates, self.evaluations, self.wall_s = state["updates"], state["evaluations"], state["wall_s"]
        self.history = list(state["history"])
        self.best_runtime_s = float(state["best_runtime_s"])
        best = state["best_placement"]
        self.best_placement = None if best is None else np.asarray(best, np.int64)
        self.elites = [(float(r), np.asarray(p, np.int64)) for r, p in state["elites"]]
        self.moved_from = None if state["moved_from"] is None else np.asarray(state["moved_from"], np.int64)
        self.tried = set(state["tried"])
        torch.set_rng_state(state["torch_rng"])
        self.generator.set_state(state["generator"])


# ---- files ----
def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    atomic_write(path, lambda handle: torch.save(state, handle), binary=True)


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)


def default_out_dir(benchmark: str, cluster: str, runtime: str) -> Path:
    return run_dir("reinforce_seq2seq", benchmark, cluster, runtime)


# ---- the training loop ----
WARM_START_CANDIDATES = ("expert", "mincut", "metis", "scotch", "heft", "m_topo", "m_etf")


def warm_start(trainer: Trainer, problem: Any, evaluate_batch: EvaluateBatch) -> dict[str, Any]:
    """Imitate the placement of the baseline ``trainer.config.warm_start`` on ``problem`` ("best": the fastest of
    ``WARM_START_CANDIDATES`` that runs). Each candidate is evaluated once (one evaluation each) and counts
    as a sample of this run. A deviation from the paper, which started from scratch."""
    from placement_env.problem import solve

    method = trainer.config.warm_start
    candidates = WARM_START_CANDIDATES if method == "best" else (method,)
    found: dict[str, tuple[float, np.ndarray]] = {}
    for name in candidates:
        try:
            solution = solve(name, problem)
        except Exception:  # noqa: BLE001 - "best": a baseline that cannot run here (e.g. no Scotch) is skipped
            if method != "best":
                raise
            continue
        placement = np.asarray(solution.placement, np.int64)
        (m,) = evaluate_batch(placement[None])
        trainer.evaluations += 1 + solution.evaluations
        if m.ok:
            found[name] = (float(m.runtime_s), placement)
            trainer.record(float(m.runtime_s), placement)
    if not found:
        raise RuntimeError(f"warm start {method!r}: no placement of {', '.join(candidates)} runs on this cluster")
    teacher = min(found, key=lambda name: found[name][0])
    steps = trainer.imitate(found[teacher][1], target_prob=trainer.config.warm_start_prob)
    return {"method": teacher, "runtime_s": found[teacher][0], "imitation_steps": steps}


def _loop(trainer: Trainer, evaluate_batch: EvaluateBatch, *, budget: int | None, seconds: float | None,
          progress: bool, on_update: Callable[[dict[str, float]], None] | None = None, desc: str = "") -> None:
    """Update until the evaluation budget (total, over resumed sessions) or the session's seconds run out."""
    from tqdm import tqdm

    start = time.monotonic()
    wall0 = trainer.wall_s
    total = budget if budget is not None else (int(seconds) if seconds is not None else None)
    bar = tqdm(total=total, initial=min(trainer.evaluations, budget) if budget is not None else 0, desc=desc,
               unit="eval" if budget is not None else "s", disable=not progress, leave=True)
    try:
        while True:
            elapsed = time.monotonic() - start
            if seconds is not None and elapsed >= seconds:
                break
            k = trainer.config.samples
            if budget is not None:
                k = min(k, budget - trainer.evaluations)
                if k < 1:
                    break
            row = trainer.update(evaluate_batch, samples=k)
            now = time.monotonic() - start
            trainer.wall_s = wall0 + now
            row["wall_s"] = trainer.wall_s
            trainer.history.append(row)
            if on_update is not None:
                on_update(row)
            bar.update(k if budget is not None else (int(now) - bar.n if seconds is not None else 0))
            bar.set_postfix_str(f"best {trainer.best_runtime_s:.4g}s mean {row['mean_runtime_s']:.4g}s "
                                f"ent {row['entropy']:.3f}")
    finally:
        trainer.wall_s = wall0 + (time.monotonic() - start)
        bar.close()


def _check_positive_int(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name}={value!r}; expected a positive integer")


def train(benchmark: str = "nmt", cluster: str = "paper-2gpu", runtime: str = "sim", *, budget: int | None = None,
          seconds: float | None = None, samples: int = 16, seed: int = 0, out_dir: str | os.PathLike | None = None,
          resume: bool = False, evaluator: Any = None, progress: bool = True, config: Config | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, **env_kwargs: Any) -> TrainResult:
    """Train the seq2seq policy on ``benchmark`` / ``cluster`` / ``runtime`` with REINFORCE.

    ``budget``: total runtime evaluations (a resumed run counts those already spent); ``seconds``:
    wall time of this session; with neither, 10 minutes. ``out_dir`` (default
    ``runs/reinforce_seq2seq/<benchmark>-<cluster>-<runtime>``) gets the log, checkpoints (every
    ``checkpoint_every`` updates, at the end, and on KeyboardInterrupt), the best placement and the
    learning curve. ``resume``: continue from ``out_dir/checkpoint.pt`` (which must belong to the
    same benchmark, cluster and runtime; its config is kept).
    """
    from placement_env.env.core import DevicePlacementEnv

    _check_positive_int("budget", budget)
    _check_positive_int("samples", samples, allow_none=False)
    _check_positive_int("checkpoint_every", checkpoint_every, allow_none=False)
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or seconds <= 0):
        raise ValueError(f"seconds={seconds!r}; expected a positive number of seconds")
    if budget is None and seconds is None:
        seconds = DEFAULT_MINUTES * 60
    cluster_name = cluster if isinstance(cluster, str) else getattr(cluster, "name", str(cluster))
    meta = {"benchmark": str(benchmark), "cluster": str(cluster_name), "runtime": str(runtime)}
    out = Path(out_dir) if out_dir is not None else default_out_dir(*meta.values())
    checkpoint_path = out / CHECKPOINT
    state = None
    if resume:
        if not checkpoint_path.exists():
            raise FileNotFoundError(f"resume: no checkpoint at {checkpoint_path}")
        state = load_checkpoint(checkpoint_path)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointMismatchError(
                f"resume: {checkpoint_path} has checkpoint format {state.get('format')!r}, this version reads format "
                f"{CHECKPOINT_FORMAT}; use another --out-dir to start afresh (nothing was changed)")
        theirs = state.get("meta", {})
        if theirs != meta:
            raise CheckpointMismatchError(
                f"resume: {checkpoint_path} belongs to benchmark={theirs.get('benchmark')!r} "
                f"cluster={theirs.get('cluster')!r} runtime={theirs.get('runtime')!r}, not benchmark="
                f"{meta['benchmark']!r} cluster={meta['cluster']!r} runtime={meta['runtime']!r}; "
                f"use another --out-dir or the matching flags (nothing was changed)")
    env = DevicePlacementEnv(benchmark, cluster, runtime, **env_kwargs)
    try:
        task = env.task
        n = env.n_groups
        features = group_features(task.features.fields, n, task.allowed)
        if state is not None:
            cfg = Config(**state["config"])
        else:
            cfg = dataclasses.replace(config or Config(), samples=int(samples),
                                      failing_signal=float(env.failing_signal))
        trainer = Trainer(features, task.allowed, cfg, seed=seed)
        if state is not None:
            if state["policy"]["head.weight"].shape[0] != task.allowed.shape[1] or \
                    state["policy"]["embed.0.weight"].shape[1] != features.shape[1]:
                raise CheckpointMismatchError(f"resume: {checkpoint_path} was made for another graph or cluster shape")
            trainer.load(state)
        evaluate_batch = _batch_function(evaluator) if evaluator is not None else task.evaluator.batch
        if state is None and cfg.warm_start:
            from placement_env.problem import Problem

            start = warm_start(trainer, Problem.from_env(env, seed=seed), evaluate_batch)
            if progress:
                print(f"warm start: {start['method']} ({start['runtime_s']:.4g} s), imitated in "
                      f"{start['imitation_steps']} steps", file=sys.stderr)
        out.mkdir(parents=True, exist_ok=True)
        lower = float(task.lower_bound)

        def checkpoint(final: bool = False) -> None:
            save_checkpoint(checkpoint_path, trainer.state(meta))
            if final:  # while training, rows are appended to the open log instead
                write_log(out / LOG, trainer.history, LOG_COLUMNS)
            if trainer.best_placement is not None:
                record = {**meta, "placement": trainer.best_placement.tolist(), "runtime_s": trainer.best_runtime_s,
                          "lower_bound_s": lower, "evaluations": trainer.evaluations, "updates": trainer.updates}
                atomic_write(out / BEST_JSON, lambda handle: json.dump(record, handle, indent=1))

        if state is not None:  # the log restarts from the checkpoint's history (drops rows logged past it)
            write_log(out / LOG, trainer.history, LOG_COLUMNS)
        board = TensorBoardLog(out / TENSORBOARD, trainer.history)
        log_handle = open(out / LOG, "a" if state is not None else "w", newline="")
        writer = csv.DictWriter(log_handle, fieldnames=LOG_COLUMNS, extrasaction="ignore")
        if state is None:
            writer.writeheader()

        def on_update(row: dict[str, float]) -> None:
            writer.writerow(row)
            log_handle.flush()
            board.write(row)
            if trainer.updates % checkpoint_every == 0:
                checkpoint()

        try:
            _loop(trainer, evaluate_batch, budget=budget, seconds=seconds, progress=progress, on_update=on_update,
                  desc=f"reinforce {meta['benchmark']}")
        finally:  # also on KeyboardInterrupt: keep what was learnt
            log_handle.close()
            board.close()
            checkpoint(final=True)
            plot_curve(out / CURVE, trainer.history, title=f"{meta['benchmark']} on {meta['cluster']} ({runtime})",
                       references={"lower bound": lower})
        return TrainResult(best_placement=trainer.best_placement, best_runtime_s=trainer.best_runtime_s,
                           history=trainer.history, evaluations=trainer.evaluations, wall_s=trainer.wall_s,
                           updates=trainer.updates, lower_bound_s=lower, out_dir=out, trainer=trainer)
    finally:
        env.close()


def place(problem: Any, *, samples: int = 16, seconds: float | None = None, config: Config | None = None,
          default_budget: int = 2000) -> np.ndarray:
    """Harness method: train within ``problem.budget`` evaluations (``default_budget`` if unlimited) through
    ``problem.evaluate``; return the best placement seen (the greedy one if nothing ran)."""
    from placement_env.env.features import graph_features

    graph, cluster = problem.graph, problem.cluster
    fields = graph_features(graph, cluster, problem.costs.seconds, graph.n_groups).fields
    allowed = problem.allowed
    budget = problem.budget if problem.budget is not None else default_budget
    budget = int(min(budget, problem.evaluations + problem.budget_left))
    k = max(1, min(samples, budget // 8)) if budget >= 2 else 1  # small budgets: more, smaller updates
    seed = int(problem.rng.integers(2**31 - 1))
    cfg = dataclasses.replace(config or Config(), samples=k)
    trainer = Trainer(group_features(fields, graph.n_groups, allowed), allowed, cfg, seed=seed)
    trainer.evaluations = problem.evaluations

    def evaluate_batch(placements: np.ndarray) -> list:
        return [problem.evaluate(p) for p in placements]

    if cfg.warm_start:
        warm_start(trainer, problem, evaluate_batch)
        trainer.evaluations = problem.evaluations

    _loop(trainer, evaluate_batch, budget=budget, seconds=seconds, progress=False)
    if trainer.best_placement is not None:
        return trainer.best_placement
    if problem.best is not None:
        return np.asarray(problem.best.placement)
    return trainer.greedy()


def place_warm_start(problem: Any) -> np.ndarray:
    """Harness method: :func:`place` after imitating the best of ``WARM_START_CANDIDATES`` (their evaluations
    count against the budget), fine-tuned with ``FINE_TUNING``."""
    return place(problem, config=Config(warm_start="best", **FINE_TUNING))


def place_self_imitation(problem: Any) -> np.ndarray:
    """Harness method: :func:`place` from scratch (as in the paper) with ``SELF_IMITATION``."""
    return place(problem, config=Config(**SELF_IMITATION))


# ---- CLI ----
def _parser() -> argparse.ArgumentParser:
    from placement_env.parallel import BACKENDS
    from placement_env.evaluation import RUNTIMES

    parser = argparse.ArgumentParser(
        prog="python -m agents.reinforce_seq2seq",
        description="Train the paper's seq2seq placement policy with REINFORCE and compare it with the baselines.")
    parser.add_argument("--benchmark", default="nmt", help="benchmark name (default: nmt)")
    parser.add_argument("--cluster", default="paper-2gpu", help="cluster name or spec (default: paper-2gpu)")
    parser.add_argument("--runtime", default="sim", choices=RUNTIMES, help="runtime (default: sim)")
    parser.add_argument("--budget", type=positive_int, default=None,
                        help="stop after this many runtime evaluations in total (default: none)")
    parser.add_argument("--minutes", type=positive_float, default=None,
                        help=f"wall budget of this session in minutes (default: {DEFAULT_MINUTES:g} if no --budget)")
    parser.add_argument("--samples", type=positive_int, default=16, help="placements per update, K (default: 16)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--out-dir", default=None,
                        help="output folder (default: runs/reinforce_seq2seq/<benchmark>-<cluster>-<runtime>)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT_DIR/checkpoint.pt")
    tuned = ", or {:g} with --warm-start".format
    parser.add_argument("--lr", type=positive_float, default=None,
                        help=f"Adam learning rate (default: {Config.lr:g}{tuned(FINE_TUNING['lr'])})")
    parser.add_argument("--self-imitation", type=non_negative_float, default=None, metavar="WEIGHT",
                        help="weight of the log-probability of the elite placements in the loss (default: "
                             f"{Config.self_imitation:g}, as in the paper{tuned(FINE_TUNING['self_imitation'])})")
    parser.add_argument("--elites", type=positive_int, default=None,
                        help=f"fastest distinct placements self-imitation pulls towards (default: {Config.elites}"
                             f"{tuned(FINE_TUNING['elites'])})")
    parser.add_argument("--explore", type=non_negative_float, default=None, metavar="GROUPS",
                        help="per sampled placement, the expected number of groups put on a uniformly random device "
                             f"(default: {Config.explore:g}{tuned(FINE_TUNING['explore'])})")
    parser.add_argument("--local-moves", type=non_negative_int, default=None, metavar="PLACEMENTS",
                        help="of the K placements per update, how many are the best so far with 1-4 groups moved, "
                             f"guided by the policy (default: {Config.local_moves}{tuned(FINE_TUNING['local_moves'])})")
    parser.add_argument("--warm-start", default=None, metavar="METHOD",
                        help="first imitate this baseline's placement ('best': the fastest of "
                             f"{', '.join(WARM_START_CANDIDATES)}); default: none, from scratch as in the paper")
    parser.add_argument("--entropy", type=non_negative_float, default=Config.entropy,
                        help=f"entropy bonus ({Config.entropy:g})")
    parser.add_argument("--hidden", type=positive_int, default=Config.hidden, help=f"LSTM size ({Config.hidden})")
    parser.add_argument("--backend", default="local", choices=("local",) + BACKENDS,
                        help="where the K samples of an update are evaluated: in this process (local), on worker "
                             "processes (process) or on Ray actors (ray) (default: local)")
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="worker processes or Ray actors for --backend process|ray (default: 2)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster address (host:port, ray://host:port or auto); implies --backend ray")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-baselines", action="store_true", help="skip the baseline table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.hidden % 2:
        parser.error(f"argument --hidden: expected an even number, got {args.hidden}")
    check_task_arguments(parser, args)
    seconds = args.minutes * 60 if args.minutes is not None else (None if args.budget else DEFAULT_MINUTES * 60)
    if args.warm_start is not None and args.warm_start != "best":
        from placement_env.problem import METHODS

        if args.warm_start not in METHODS:
            parser.error(f"argument --warm-start: unknown method {args.warm_start!r}; choose from best, "
                         f"{', '.join(METHODS)}")
    flags = {name: getattr(args, name) for name in ("lr", "self_imitation", "elites", "explore", "local_moves")}
    config = Config(**{**(FINE_TUNING if args.warm_start else {}), **{k: v for k, v in flags.items() if v is not None},
                       "entropy": args.entropy, "hidden": args.hidden, "warm_start": args.warm_start})

    def interrupted(signum: int, frame: Any) -> None:  # SIGTERM (e.g. timeout) ends like Ctrl-C: checkpoint kept
        raise KeyboardInterrupt

    import signal

    signal.signal(signal.SIGTERM, interrupted)
    out = Path(args.out_dir) if args.out_dir else default_out_dir(args.benchmark, args.cluster, args.runtime)
    backend = "ray" if args.ray_address else args.backend
    if args.ray_address and args.backend == "process":
        parser.error("argument --ray-address: needs --backend ray (or no --backend), not --backend process")
    evaluator = None
    try:
        if backend != "local":
            from placement_env.parallel import ParallelEvaluator

            evaluator = ParallelEvaluator(args.benchmark, args.cluster, args.runtime, backend=backend,
                                          workers=args.workers, address=args.ray_address)
        result = train(args.benchmark, args.cluster, args.runtime, budget=args.budget, seconds=seconds,
                       samples=args.samples, seed=args.seed, out_dir=out, resume=args.resume,
                       progress=not args.no_progress, config=config, evaluator=evaluator)
    except (CheckpointMismatchError, FileNotFoundError, PlacementEnvError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; checkpoint and log written to {out}", file=sys.stderr)
        return 130
    finally:
        if evaluator is not None:
            evaluator.close()
    print(f"\n{result.updates} updates, {result.evaluations} evaluations, {result.wall_s:.0f} s; "
          f"best {result.best_runtime_s:.4f} s; outputs in {out}")
    if not args.no_baselines:
        table, values = baseline_table(args.benchmark, args.cluster, args.runtime, result.best_runtime_s)
        print()
        print(table)
        plot_curve(out / CURVE, result.history, title=f"{args.benchmark} on {args.cluster} ({args.runtime})",
                   references=curve_references(values))
    if result.best_placement is not None:
        print(export_best(args.benchmark, args.cluster, result.best_placement, out / BEST_PB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
