"""SB3 agents train on DevicePlacement-v0 and beat the average random placement (slow, run in CI)."""
import gymnasium as gym
import numpy as np
import pytest

import placement_env as pe
from agents.sb3 import batch_action_distribution, policy_placement, train
from placement_env.errors import BudgetExhausted
from placement_env.placement import random_placements
from tf_helpers import tensorboard_scalars

TINY = "DevicePlacement-Tiny-v0"


def _random_mean(env) -> float:
    graph, cluster = env.unwrapped.graph, env.unwrapped.cluster
    results = pe.Evaluator(graph, cluster).batch(random_placements(graph, cluster, 200, 1))
    return float(np.mean([m.runtime_s if m.ok else env.unwrapped.failing_signal for m in results]))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, mode, steps, kwargs", [
    ("PPO", "oneshot", 1280, {}),
    ("A2C", "oneshot", 1280, {}),
    ("MaskablePPO", "sequential", 512 * 20, {"dense_reward": True}),
])
def test_agent_beats_random_placements(algorithm, mode, steps, kwargs):
    env = gym.make(TINY, mode=mode, **kwargs)
    # the step count ends the run; the wall limit is only a backstop. MaskablePPO's 10,240 steps (about 100 episodes):
    # its policy's placement 1.22 ms against 2.33 ms for random ones, the last ten episodes 1.51 ms against 2.36 ms
    result = train(TINY, algorithm=algorithm, seconds=600, total_timesteps=steps, seed=0, mode=mode, **kwargs)
    assert result.env_steps >= steps and len(result.episode_runtimes) >= steps // env.unwrapped.n_groups // 2
    _, info = policy_placement(result.model, env)
    random_mean = _random_mean(env)
    assert info["ok"] and info["charged_runtime_s"] < random_mean, (info["charged_runtime_s"], random_mean)
    early, late = np.mean(result.episode_runtimes[:10]), np.mean(result.episode_runtimes[-10:])
    assert late < early


def test_training_leaves_torch_distribution_checks_as_they_were():
    import torch

    try:
        for default in (False, True):
            torch.distributions.Distribution.set_default_validate_args(default)
            train(TINY, algorithm="PPO", seconds=None, total_timesteps=64)
            assert torch.distributions.Distribution._validate_args is default
    finally:
        torch.distributions.Distribution.set_default_validate_args(True)


def test_batched_action_distribution_is_sb3s_bit_for_bit():
    import torch
    from stable_baselines3.common.distributions import CategoricalDistribution, MultiCategoricalDistribution
    from types import SimpleNamespace

    for batch, dims, choices in [(1, 105, 3), (64, 10, 9)]:
        sb3 = MultiCategoricalDistribution([choices] * dims)
        policy = SimpleNamespace(action_dist=MultiCategoricalDistribution([choices] * dims))
        batch_action_distribution(policy)
        batched = policy.action_dist
        assert type(batched) is not MultiCategoricalDistribution and isinstance(batched, MultiCategoricalDistribution)
        logits = torch.randn(batch, dims * choices, requires_grad=True)
        torch.manual_seed(3)
        expected = sb3.proba_distribution(logits).sample()
        torch.manual_seed(3)
        drawn = batched.proba_distribution(logits).sample()
        assert torch.equal(drawn, expected) and drawn.shape == (batch, dims)
        assert torch.equal(batched.mode(), sb3.mode())
        expected_loss = (sb3.log_prob(expected.float()) + sb3.entropy()).sum()
        loss = (batched.log_prob(expected.float()) + batched.entropy()).sum()
        assert torch.equal(loss, expected_loss)
        assert torch.equal(torch.autograd.grad(loss, logits)[0], torch.autograd.grad(expected_loss, logits)[0])
    # dimensions of different widths, and other distributions, stay SB3's own
    for dist in (MultiCategoricalDistribution([2, 3]), CategoricalDistribution(4)):
        policy = SimpleNamespace(action_dist=dist)
        batch_action_distribution(policy)
        assert policy.action_dist is dist


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="algorithm='DQN'; expected one of 'PPO', 'A2C', 'MaskablePPO'"):
        train(TINY, algorithm="DQN")


def test_cli_writes_outputs_resumes_and_refuses_other_runs(tmp_path, capsys):
    from agents.sb3 import main

    args = ["--benchmark", "rnnlm-tiny", "--steps", "128", "--out-dir", str(tmp_path), "--no-progress",
            "--threads", "1"]  # two torch threads (the default) beside the other test process wait on each other
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| **PPO**" in out and "| expert" in out and "lower bound" in out
    for name in ("model.zip", "log.csv", "best_placement.json", "best_placement.pb", "learning_curve.png"):
        assert (tmp_path / name).exists(), name
    first = (tmp_path / "log.csv").read_text().splitlines()
    assert main(args + ["--resume", "--no-baselines"]) == 0
    resumed = (tmp_path / "log.csv").read_text().splitlines()
    assert resumed[: len(first)] == first and len(resumed) > len(first)
    assert int(float(resumed[-1].split(",")[0])) == 256  # episodes count on across the resume
    steps = [step for step, _ in tensorboard_scalars(tmp_path / "tensorboard")["best_runtime_s"]]
    assert steps == [int(line.split(",")[1]) for line in resumed[1:]]  # every log row once, after the resume too
    model = (tmp_path / "model.zip").read_bytes()
    assert main(["--benchmark", "nmt-tiny", "--steps", "64", "--out-dir", str(tmp_path), "--resume",
                 "--no-progress"]) == 2
    assert "rnnlm-tiny" in capsys.readouterr().err
    assert (tmp_path / "model.zip").read_bytes() == model


@pytest.mark.parametrize("argv, message", [
    (["--algorithm", "DQN"], "--algorithm"),
    (["--algorithm", "PPO", "--mode", "sequential"], "--mode"),
    (["--steps", "0"], "--steps"),
    (["--benchmark", "no-such-model"], "--benchmark"),
    (["--cluster", "no-such-cluster"], "--cluster"),
    (["--timeout", "5"], "argument --timeout: is for --runtime measured, not --runtime sim"),
    (["--runtime", "measured", "--timeout", "0"], "argument --timeout: expected a positive number"),
    (["--out-dir", __file__], f"argument --out-dir: {__file__} is a file; give a folder"),
    (["--out-dir", f"{__file__}/run"], "is a file, so nothing can be made under it"),
])
def test_cli_bad_values(argv, message, capsys):
    from agents.sb3 import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("method", ["agents.sb3_harness:place_ppo", "agents.sb3_harness:place_a2c"])
def test_harness_methods_spend_exactly_the_problems_budget(method):
    graph, cluster = pe.load_benchmark("rnnlm-tiny"), pe.load_cluster("paper-2gpu")
    problem = pe.Problem.make(graph, cluster, benchmark="rnnlm-tiny", budget=70, seed=0)
    solution = pe.solve(method, problem)
    assert problem.evaluations == 70 and solution.evaluations == 70  # references and episodes, all counted
    assert np.array_equal(solution.placement, problem.best.placement)


def test_an_env_given_an_evaluator_charges_it_and_serves_only_its_graph():
    graph, cluster = pe.load_benchmark("rnnlm-tiny"), pe.load_cluster("paper-2gpu")
    problem = pe.Problem.make(graph, cluster, budget=5)
    env = gym.make("DevicePlacement-v0", benchmark=graph, cluster=cluster, evaluator=problem.evaluator)
    env.reset(seed=0)
    env.step(env.action_space.sample())
    assert problem.evaluations >= 1
    with pytest.raises(ValueError, match="serves only the graph"):
        env.reset(options={"benchmark": "nmt-tiny"})
    with pytest.raises(BudgetExhausted):
        for _ in range(6):
            env.reset()
            env.step(env.action_space.sample())
    with pytest.raises(ValueError, match="evaluator="):
        gym.make("DevicePlacement-v0", benchmark=graph, cluster=cluster, evaluator=3)
    env.close()
