"""Stable-Baselines3 agents on DevicePlacement-v0: PPO or A2C (oneshot) and MaskablePPO (any mode).

``train(...)`` trains for a wall-clock budget or a number of env steps (optionally continuing a saved
model) and returns the model, the learning curve (episode rewards, runtimes and success in order) and
the best placement it saw. ``policy_placement`` reads the trained policy's deterministic placement.

``python -m agents.sb3`` is the command line, with the conventions and outputs of
``python -m agents.reinforce_seq2seq``: ``log.csv`` and ``tensorboard/`` (plus SB3's own ``sb3_log/progress.csv``),
``model.zip`` (also on Ctrl-C), ``--resume``,
``best_placement.json`` / ``.pb``, ``learning_curve.png`` and the table against the baselines.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from agents.common.arguments import (add_threads_argument, add_timeout_argument, check_out_dir, check_task_arguments,
                              measured_options, positive_float, positive_int)
from agents.common.report import baseline_table, curve_references, plot_curve
from agents.common.run_files import (BEST_JSON, CURVE, LOG, TENSORBOARD, TensorBoardLog, export_written_best, read_log,
                                     run_dir, write_json, write_log)
from agents.common.torch_threads import HARNESS_THREADS, start_command
from placement_env import RUNTIMES, InfrastructureError
from placement_env.env import MODES

ALGORITHMS = ("PPO", "A2C", "MaskablePPO")
PER_GROUP_FIELDS = ("group_mask", "op_types", "output_shapes", "neighbour_bytes", "compute", "memory", "position",
                    "placement", "current")


@dataclass
class TrainingResult:
    model: Any
    episode_rewards: list[float] = field(default_factory=list)
    episode_runtimes: list[float] = field(default_factory=list)  # charged runtime (failing signal on failure)
    episode_ok: list[bool] = field(default_factory=list)
    best_runtime_s: float = float("inf")
    best_placement: np.ndarray | None = None
    env_steps: int = 0
    wall_s: float = 0.0


def group_features_extractor():
    """SB3 features extractor for the env's Dict observation (built lazily: torch is optional).

    Every group's fields (op types, shapes, neighbour bytes, compute, memory, position, and in the
    step-wise modes its placement and whether it is current) go through one shared MLP; the
    result is the flattened per-group embeddings (so a head can still tell groups apart) plus a
    masked mean over groups and the flattened device features.
    """
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class GroupFeatures(BaseFeaturesExtractor):
        def __init__(self, observation_space, group_dim: int = 8, hidden: int = 64) -> None:
            fields = [k for k in PER_GROUP_FIELDS if k in observation_space.spaces]
            slots = observation_space["group_mask"].shape[0]
            widths = [int(np.prod(observation_space[k].shape[1:])) for k in fields]
            devices = int(np.prod(observation_space["devices"].shape))
            extra = int(np.prod(observation_space["efficiency"].shape)) if "efficiency" in observation_space.spaces else 0
            super().__init__(observation_space, slots * group_dim + group_dim + devices + extra)
            self.fields, self.slots = fields, slots
            self.group_mlp = torch.nn.Sequential(torch.nn.Linear(sum(widths), hidden), torch.nn.ReLU(),
                                                 torch.nn.Linear(hidden, group_dim), torch.nn.ReLU())

        def forward(self, observations):
            per_group = torch.cat([observations[k].reshape(observations[k].shape[0], self.slots, -1)
                                   for k in self.fields], dim=2)
            embedded = self.group_mlp(per_group)
            mask = observations["group_mask"].unsqueeze(2)
            pooled = (embedded * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            parts = [embedded.flatten(1), pooled, observations["devices"].flatten(1)]
            if "efficiency" in observations:
                parts.append(observations["efficiency"])
            return torch.cat(parts, dim=1)

    return GroupFeatures


def batch_action_distribution(policy: Any) -> None:
    """Make ``policy`` (an SB3 actor-critic policy) draw a ``MultiDiscrete`` action in one batched call.

    SB3's ``MultiCategoricalDistribution`` builds one ``Categorical`` per action dimension and samples them one
    after another, slow on the env's oneshot action (one dimension per group slot, every one over the same
    devices; docs/findings.md). When every dimension has the same number of choices, the policy's
    distribution is swapped for one ``Categorical`` over a ``[batch, dimensions, choices]`` view of the same logits.
    Its samples, log-probabilities, entropies and gradients are the ones SB3's would give, bit for bit: the
    samples are drawn in SB3's order (dimension by dimension, each over the batch) from the same random stream.
    Other policies and action spaces are left as they are.
    """
    from stable_baselines3.common.distributions import MultiCategoricalDistribution

    dist = policy.action_dist
    if type(dist) is MultiCategoricalDistribution and len(set(dist.action_dims)) == 1:
        policy.action_dist = _same_width_multi_categorical()(list(dist.action_dims))


@functools.cache
def _same_width_multi_categorical():
    """The class :func:`batch_action_distribution` installs (built lazily: torch is optional)."""
    import torch
    from stable_baselines3.common.distributions import MultiCategoricalDistribution
    from torch.distributions import Categorical

    class SameWidthMultiCategorical(MultiCategoricalDistribution):
        def proba_distribution(self, action_logits):
            batch = action_logits.shape[0]
            self.batched = Categorical(logits=action_logits.view(batch, len(self.action_dims), self.action_dims[0]))
            return self

        def log_prob(self, actions):
            return self.batched.log_prob(actions.long()).sum(dim=1)

        def entropy(self):
            return self.batched.entropy().sum(dim=1)

        def sample(self):
            probs = self.batched.probs
            batch, dims, choices = probs.shape
            # dimension-major rows: torch.multinomial draws them in SB3's order from the generator
            rows = probs.transpose(0, 1).reshape(dims * batch, choices)
            return torch.multinomial(rows, 1, True).view(dims, batch).T

        def mode(self):
            return torch.argmax(self.batched.probs, dim=2)

    return SameWidthMultiCategorical


def _callback(result: TrainingResult, deadline: float | None, progress: Any = None):
    from stable_baselines3.common.callbacks import BaseCallback

    class Record(BaseCallback):
        """Records finished episodes and stops at the wall-clock deadline."""

        def _on_step(self) -> bool:
            for info, done in zip(self.locals["infos"], self.locals["dones"]):
                if done and "charged_runtime_s" in info:
                    result.episode_runtimes.append(float(info["charged_runtime_s"]))
                    result.episode_rewards.append(float(info.get("episode", {}).get("r", np.nan)))
                    result.episode_ok.append(bool(info["ok"]))
                    if info["ok"] and info["runtime_s"] < result.best_runtime_s:
                        result.best_runtime_s = float(info["runtime_s"])
                        result.best_placement = np.array(info["placement"])
                    if progress is not None:
                        progress.update(1)
                        progress.set_postfix_str(f"best {result.best_runtime_s:.4g}s")
            return deadline is None or time.monotonic() < deadline

    return Record()


def make_env(env_id: str = "DevicePlacement-v0", **env_kwargs: Any) -> gym.Env:
    """The env wrapped for SB3 (episode statistics in ``info["episode"]``)."""
    from stable_baselines3.common.monitor import Monitor

    return Monitor(gym.make(env_id, **env_kwargs))


def scale_rewards_by_reference(env: gym.Env) -> gym.Env:
    """In episodes of several steps (``sequential``, ``improve``), what SB3 learns from: the env's rewards over the
    magnitude of the reference placement's reward, so a return is of order one whatever the graph's step time.

    Why: with the default reward, -sqrt(seconds), a step's reward on a graph that runs in milliseconds is a change of
    about 1e-4, far below the value head's first outputs (of order 0.1), whose errors then drown the advantages; the
    value of a multi-step episode's states takes many updates to fit at that scale. (A oneshot episode's value is one
    number, which the head fits at once; its rewards stay as they are.) The episode statistics SB3's ``Monitor``
    records, and so the learning curves, keep the env's own rewards.
    """
    if env.unwrapped.mode == "oneshot":
        return env
    unwrapped = env.unwrapped
    reference = unwrapped.reference()[1]
    scale = abs(unwrapped.reward(reference, unwrapped.reward_context()))
    if not math.isfinite(scale) or scale == 0.0:
        return env
    return gym.wrappers.TransformReward(env, lambda reward: reward / scale)


def _algorithm_class(algorithm: str) -> Any:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; expected one of {', '.join(map(repr, ALGORITHMS))}")
    if algorithm == "PPO":
        from stable_baselines3 import PPO as Algorithm
    elif algorithm == "A2C":
        from stable_baselines3 import A2C as Algorithm
    else:
        from sb3_contrib import MaskablePPO as Algorithm
    return Algorithm


@contextmanager
def _without_distribution_checks():
    """torch.distributions' argument checks off inside (or in the function it decorates), back as they were after.

    SB3 builds one ``Categorical`` per group for every observation it acts on or learns from, and checking
    every logit and sample takes a large share of a training run's time (docs/findings.md); SB3's logits and
    actions are valid by construction, so the results are the same without the checks.
    """
    import torch

    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(previous)


@_without_distribution_checks()
def train(env_id: str = "DevicePlacement-v0", *, algorithm: str = "PPO", seconds: float | None = 120.0,
          total_timesteps: int = 10**9, seed: int = 0, policy_kwargs: dict | None = None,
          algorithm_kwargs: dict | None = None, resume_from: str | Path | None = None, progress: Any = None,
          log_dir: str | Path | None = None, **env_kwargs: Any) -> TrainingResult:
    """Train ``algorithm`` on ``gym.make(env_id, **env_kwargs)`` for ``seconds`` (or ``total_timesteps``).

    ``resume_from``: a saved ``model.zip`` to continue (its hyper-parameters are kept); ``progress``: a
    tqdm bar advanced once per finished episode; ``log_dir``: where SB3 writes its own ``progress.csv``
    (losses, entropy; default: nowhere). On KeyboardInterrupt the partly trained model is kept
    in ``result.model`` when the exception is raised (``exc.result``), as it is on InfrastructureError (the
    measuring machinery failed on every retry).
    """
    Algorithm = _algorithm_class(algorithm)
    env = scale_rewards_by_reference(make_env(env_id, **env_kwargs))
    oneshot = env.unwrapped.mode == "oneshot"
    defaults = dict(n_steps=64 if oneshot else 512, learning_rate=3e-3 if oneshot else 1e-3,
                    gamma=1.0, ent_coef=0.0, seed=seed, verbose=0, device="cpu")
    if algorithm == "A2C":
        # Adam and normalised advantages: A2C's RMSprop on raw advantages hardly learns here (docs/findings.md).
        defaults.update(n_steps=16 if oneshot else 64, use_rms_prop=False, normalize_advantage=True)
    else:
        defaults["batch_size"] = 64
    if policy_kwargs is None:
        policy_kwargs = {"features_extractor_class": group_features_extractor()}
    if resume_from is not None:
        model = Algorithm.load(str(resume_from), env=env, device="cpu")
    else:
        model = Algorithm("MultiInputPolicy", env, policy_kwargs=policy_kwargs,
                          **{**defaults, **(algorithm_kwargs or {})})
    batch_action_distribution(model.policy)
    from stable_baselines3.common.logger import Logger, configure

    # without a logger SB3 makes a /tmp/SB3-<date> folder per run
    model.set_logger(configure(str(log_dir), ["csv"]) if log_dir is not None else Logger(None, []))
    result = TrainingResult(model=model)
    start = time.monotonic()
    deadline = None if seconds is None else start + seconds
    try:
        model.learn(total_timesteps=total_timesteps, callback=_callback(result, deadline, progress),
                    reset_num_timesteps=resume_from is None)
    except (KeyboardInterrupt, InfrastructureError) as stop:
        stop.result = result
        raise
    finally:
        result.env_steps, result.wall_s = int(model.num_timesteps), time.monotonic() - start
        env.close()
    return result


def policy_placement(model: Any, env: gym.Env) -> tuple[np.ndarray, dict]:
    """Roll out the policy deterministically for one episode; the final placement and info."""
    obs, _ = env.reset(seed=0)
    unwrapped = env.unwrapped
    while True:
        kwargs = {"action_masks": unwrapped.action_masks()} if "Maskable" in type(model).__name__ else {}
        action, _ = model.predict(obs, deterministic=True, **kwargs)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return np.array(info["placement"]), info


# ---- command line ----
MODEL = "model.zip"
RUN = "run.json"
LOG_COLUMNS = ("episodes", "evaluations", "mean_runtime_s", "mean_ok_runtime_s", "success_rate", "best_runtime_s")
EPISODES_PER_ROW = 16
DEFAULT_MINUTES = 10.0


def log_rows(result: TrainingResult, previous: Sequence[dict[str, float]] = ()) -> list[dict[str, float]]:
    """The CSV log: one row per ``EPISODES_PER_ROW`` episodes, continuing ``previous`` rows (a resumed run)."""
    rows = [dict(row) for row in previous]
    done = int(rows[-1]["episodes"]) if rows else 0
    best = float(rows[-1]["best_runtime_s"]) if rows else math.inf
    runtimes, ok = np.asarray(result.episode_runtimes), np.asarray(result.episode_ok, bool)
    for start in range(0, len(runtimes), EPISODES_PER_ROW):
        chunk, chunk_ok = runtimes[start:start + EPISODES_PER_ROW], ok[start:start + EPISODES_PER_ROW]
        if chunk_ok.any():
            best = min(best, float(chunk[chunk_ok].min()))
        rows.append({"episodes": done + start + len(chunk), "evaluations": done + start + len(chunk),
                     "mean_runtime_s": float(chunk.mean()),
                     "mean_ok_runtime_s": float(chunk[chunk_ok].mean()) if chunk_ok.any() else math.nan,
                     "success_rate": float(chunk_ok.mean()), "best_runtime_s": best})
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents.sb3",
                                     description="Train a Stable-Baselines3 agent on DevicePlacement-v0 and compare "
                                                 "its best placement with the baselines.")
    parser.add_argument("--algorithm", default="PPO", choices=ALGORITHMS, help="(default: PPO)")
    parser.add_argument("--mode", default=None, choices=MODES,
                        help="env mode (default: oneshot for PPO/A2C, sequential for MaskablePPO)")
    parser.add_argument("--benchmark", default="nmt", help="benchmark name (default: nmt)")
    parser.add_argument("--cluster", default="paper-2gpu", help="cluster name or spec (default: paper-2gpu)")
    parser.add_argument("--runtime", default="sim", choices=RUNTIMES, help="runtime (default: sim)")
    add_timeout_argument(parser)
    parser.add_argument("--steps", type=positive_int, default=None, help="stop after this many env steps")
    parser.add_argument("--minutes", type=positive_float, default=None,
                        help=f"wall budget of this session in minutes (default: {DEFAULT_MINUTES:g} if no --steps)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--out-dir", default=None,
                        help="output folder (default: runs/sb3/<algorithm>-<benchmark>-<cluster>-<runtime>)")
    parser.add_argument("--resume", action="store_true", help="continue OUT_DIR/model.zip")
    add_threads_argument(parser, default=HARNESS_THREADS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-baselines", action="store_true", help="skip the baseline table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    check_task_arguments(parser, args)
    options = measured_options(parser, args)
    check_out_dir(parser, args)
    start_command(args.threads)
    mode = args.mode or ("sequential" if args.algorithm == "MaskablePPO" else "oneshot")
    if mode != "oneshot" and args.algorithm != "MaskablePPO":
        parser.error(f"argument --mode: {args.algorithm} trains on mode 'oneshot' only; use --algorithm MaskablePPO "
                     f"for {mode!r}")
    meta = {"algorithm": args.algorithm, "mode": mode, "benchmark": args.benchmark, "cluster": args.cluster,
            "runtime": args.runtime}
    out = Path(args.out_dir) if args.out_dir else run_dir("sb3", args.algorithm, args.benchmark, args.cluster,
                                                          args.runtime)
    previous: list[dict[str, float]] = []
    if args.resume:
        if not (out / MODEL).exists():
            print(f"error: resume: no model at {out / MODEL}", file=sys.stderr)
            return 2
        theirs = json.loads((out / RUN).read_text()) if (out / RUN).exists() else {}
        if theirs != meta:
            print(f"error: resume: {out / MODEL} belongs to {theirs}, not {meta}; use another --out-dir or the "
                  f"matching flags (nothing was changed)", file=sys.stderr)
            return 2
        previous = read_log(out / LOG, counts=("episodes", "evaluations"))
    seconds = args.minutes * 60 if args.minutes is not None else (None if args.steps else DEFAULT_MINUTES * 60)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / RUN, meta)
    bar = tqdm(desc=f"{args.algorithm} {args.benchmark}", unit="episode", disable=args.no_progress)
    stopped = ""  # why training ended early: the model and log are still written
    try:
        result = train("placement_env:DevicePlacement-v0", algorithm=args.algorithm, seconds=seconds,
                       total_timesteps=args.steps or 10**9, seed=args.seed, progress=bar,
                       resume_from=out / MODEL if args.resume else None, log_dir=out / "sb3_log",
                       benchmark=args.benchmark,
                       cluster=args.cluster, runtime=args.runtime, mode=mode, measured_options=options)
    except KeyboardInterrupt as interrupt:
        result, stopped = interrupt.result, "interrupted"
    except InfrastructureError as error:
        result, stopped = error.result, f"error: {error}"
    finally:
        bar.close()
    result.model.save(str(out / MODEL.removesuffix(".zip")))  # SB3 appends .zip
    rows = log_rows(result, previous)
    write_log(out / LOG, rows, LOG_COLUMNS)
    TensorBoardLog(out / TENSORBOARD, rows).close()
    best = rows[-1]["best_runtime_s"] if rows else math.inf
    if result.best_placement is not None and result.best_runtime_s <= best:
        record = {**meta, "placement": result.best_placement.tolist(), "runtime_s": result.best_runtime_s,
                  "episodes": int(rows[-1]["episodes"])}
        write_json(out / BEST_JSON, record)
    title = f"{args.algorithm} on {args.benchmark} / {args.cluster} ({args.runtime})"
    references: dict[str, float] = {}
    if stopped:
        print(f"\n{stopped}; model and log written to {out}", file=sys.stderr)
        plot_curve(out / CURVE, rows, title=title)
        return 130 if stopped == "interrupted" else 2
    print(f"\n{result.env_steps} env steps, {len(result.episode_runtimes)} episodes, "
          f"{result.wall_s:.0f} s; best {best:.4f} s; outputs in {out}")
    if not args.no_baselines:
        table, values = baseline_table(args.benchmark, args.cluster, args.runtime, best, ours_label=args.algorithm,
                                       search_budget=int(rows[-1]["evaluations"]) if rows else 0,
                                       progress=not args.no_progress, measured_options=options)
        print()
        print(table)
        references = curve_references(values)
    plot_curve(out / CURVE, rows, title=title, references=references)
    exported = export_written_best(args.benchmark, args.cluster, out)
    if exported is not None:
        print(exported)
    return 0


if __name__ == "__main__":
    sys.exit(main())
