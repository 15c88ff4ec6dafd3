"""Stable-Baselines3 agents on DevicePlacement-v0: PPO or A2C (oneshot) and MaskablePPO (any mode).

``train(...)`` trains for a wall-clock budget or a number of env steps and returns the model,
the learning curve (episode rewards and runtimes in order) and the best placement it saw.
``evaluate_policy_placement`` reads the trained policy's deterministic placement.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

ALGORITHMS = ("PPO", "A2C", "MaskablePPO")
PER_GROUP_FIELDS = ("group_mask", "op_types", "output_shapes", "neighbour_bytes", "compute", "memory", "position",
                    "placement", "current")


@dataclass
class TrainingResult:
    model: Any
    episode_rewards: list[float] = field(default_factory=list)
    episode_runtimes: list[float] = field(default_factory=list)  # charged runtime (failing signal on failure)
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


def _callback(result: TrainingResult, deadline: float | None):
    from stable_baselines3.common.callbacks import BaseCallback

    class Record(BaseCallback):
        """Records finished episodes and stops at the wall-clock deadline."""

        def _on_step(self) -> bool:
            for info, done in zip(self.locals["infos"], self.locals["dones"]):
                if done and "charged_runtime_s" in info:
                    result.episode_runtimes.append(float(info["charged_runtime_s"]))
                    result.episode_rewards.append(float(info.get("episode", {}).get("r", np.nan)))
                    if info["charged_runtime_s"] < result.best_runtime_s:
                        result.best_runtime_s = float(info["charged_runtime_s"])
                        result.best_placement = np.array(info["placement"])
            return deadline is None or time.monotonic() < deadline

    return Record()


def make_env(env_id: str = "DevicePlacement-v0", **env_kwargs: Any) -> gym.Env:
    """The env wrapped for SB3 (episode statistics in ``info["episode"]``)."""
    from stable_baselines3.common.monitor import Monitor

    return Monitor(gym.make(env_id, **env_kwargs))


def train(env_id: str = "DevicePlacement-v0", *, algorithm: str = "PPO", seconds: float | None = 120.0,
          total_timesteps: int = 10**9, seed: int = 0, policy_kwargs: dict | None = None,
          algorithm_kwargs: dict | None = None, **env_kwargs: Any) -> TrainingResult:
    """Train ``algorithm`` on ``gym.make(env_id, **env_kwargs)`` for ``seconds`` (or ``total_timesteps``)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; expected one of {', '.join(map(repr, ALGORITHMS))}")
    if algorithm == "PPO":
        from stable_baselines3 import PPO as Algorithm
    elif algorithm == "A2C":
        from stable_baselines3 import A2C as Algorithm
    else:
        from sb3_contrib import MaskablePPO as Algorithm
    env = make_env(env_id, **env_kwargs)
    oneshot = env.unwrapped.mode == "oneshot"
    defaults = dict(n_steps=64 if oneshot else 512, learning_rate=3e-3 if oneshot else 1e-3,
                    gamma=1.0, ent_coef=0.0, seed=seed, verbose=0, device="cpu")
    if algorithm == "A2C":
        # Adam and normalised advantages: with RMSprop and raw advantages A2C barely moved in 1,280 steps.
        defaults.update(n_steps=16 if oneshot else 64, use_rms_prop=False, normalize_advantage=True)
    else:
        defaults["batch_size"] = 64
    if policy_kwargs is None:
        policy_kwargs = {"features_extractor_class": group_features_extractor()}
    model = Algorithm("MultiInputPolicy", env, policy_kwargs=policy_kwargs, **{**defaults, **(algorithm_kwargs or {})})
    result = TrainingResult(model=model)
    start = time.monotonic()
    deadline = None if seconds is None else start + seconds
    model.learn(total_timesteps=total_timesteps, callback=_callback(result, deadline))
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
