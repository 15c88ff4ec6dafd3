"""SB3 agents train on DevicePlacement-v0 and beat the average random placement (slow, run in CI)."""
import gymnasium as gym
import numpy as np
import pytest

import placement_env as pe
from agents.sb3 import policy_placement, train
from placement_env.placements import random_placements

TINY = "DevicePlacement-Tiny-v0"


def _random_mean(env) -> float:
    graph, cluster = env.unwrapped.graph, env.unwrapped.cluster
    results = pe.Evaluator(graph, cluster).batch(random_placements(graph, cluster, 200, 1))
    return float(np.mean([m.runtime_s if m.ok else env.unwrapped.failing_signal for m in results]))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, mode, steps, kwargs", [
    ("PPO", "oneshot", 1280, {}),
    ("A2C", "oneshot", 1280, {}),
    ("MaskablePPO", "sequential", 512 * 60, {"dense_reward": True}),
])
def test_agent_beats_random_placements(algorithm, mode, steps, kwargs):
    env = gym.make(TINY, mode=mode, **kwargs)
    result = train(TINY, algorithm=algorithm, seconds=240, total_timesteps=steps, seed=0, mode=mode, **kwargs)
    assert result.env_steps >= steps and len(result.episode_runtimes) >= steps // env.unwrapped.n_groups // 2
    _, info = policy_placement(result.model, env)
    random_mean = _random_mean(env)
    assert info["ok"] and info["charged_runtime_s"] < random_mean, (info["charged_runtime_s"], random_mean)
    early, late = np.mean(result.episode_runtimes[:10]), np.mean(result.episode_runtimes[-10:])
    assert late < early


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="algorithm='DQN'; expected one of 'PPO', 'A2C', 'MaskablePPO'"):
        train(TINY, algorithm="DQN")
