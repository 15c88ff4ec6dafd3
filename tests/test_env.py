"""DevicePlacement-v0: registration, spaces, modes, rewards, masks, bad input, render, vector use."""
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import placement_env as pe
from placement_env.env import env_ids
from placement_env.env.features import CATEGORY_NAMES, op_category

TINY = "DevicePlacement-Tiny-v0"


def _make(**kwargs):
    return gym.make(TINY, **kwargs).unwrapped


@pytest.mark.parametrize("mode", ["oneshot", "sequential", "improve"])
def test_gymnasium_and_sb3_checkers_pass(mode):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = _make(mode=mode)
    check_env(env)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SB3 only suggests flattening the 2-D fields
        sb3_check_env(env)


@pytest.mark.slow
def test_checkers_pass_on_the_default_env():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("DevicePlacement-v0").unwrapped
    assert env.graph.name == "nmt" and env.cluster.name == "k80-2gpu" and env.runtime == "sim"
    check_env(env)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sb3_check_env(env)


def test_registration_ids_and_module_prefix():
    ids = env_ids()
    assert len([i for i in ids if i.endswith("GPU-v0")]) == 6
    assert len([i for i in ids if i.endswith("GPU-Ideal-v0")]) == 6
    for env_id in ids:
        assert env_id in gym.registry
    assert gym.registry["DevicePlacement-Measured-v0"].nondeterministic
    assert not gym.registry["DevicePlacement-v0"].nondeterministic
    env = gym.make("placement_env:DevicePlacement-Tiny-v0")
    assert env.unwrapped.graph.name == "rnnlm-tiny"
    assert gym.registry["DevicePlacement-NMT-4GPU-v0"].kwargs == {"benchmark": "nmt", "cluster": "k80-4gpu"}
    assert gym.registry["DevicePlacement-NMT-4GPU-Ideal-v0"].kwargs == {"benchmark": "nmt", "cluster": "paper-4gpu"}


def test_oneshot_step_reward_and_info():
    env = _make()
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["n_groups"] == env.n_groups
    action = np.where(env.allowed[:, 1], 1, 0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated and info["ok"]
    expected = pe.evaluate(env.graph, env.cluster, action)
    assert info["runtime_s"] == expected.runtime_s
    assert reward == pytest.approx(-np.sqrt(expected.runtime_s))
    assert info["sim_lower_bound_s"] <= info["runtime_s"]
    assert info["peak_bytes"].shape == (3,) and info["busy_s"].shape == (3,)
    np.testing.assert_array_equal(info["placement"], action)


@pytest.mark.parametrize("reward, check", [
    ("neg_runtime", lambda r, t, ref: r == pytest.approx(-t)),
    ("speedup", lambda r, t, ref: r == pytest.approx(ref / t)),
])
def test_other_rewards(reward, check):
    env = _make(reward=reward)
    env.reset(seed=0)
    reference = env.reference()[1].runtime_s
    _, r, _, _, info = env.step(np.full(env.slots, 2))
    assert check(r, info["runtime_s"], reference)


def test_reward_objects_and_callables():
    from placement_env.env.rewards import REWARDS, Reward

    assert REWARDS["neg_sqrt_runtime"].range == (-np.inf, 0.0) and not REWARDS["neg_sqrt_runtime"].uses_reference
    env = _make(reward=lambda runtime_s, reference_s: reference_s - runtime_s)
    env.reset(seed=0)
    reference = env.reference()[1].runtime_s
    _, r, _, _, info = env.step(np.full(env.slots, 2))
    assert env.unwrapped.reward.name == "<lambda>" and r == pytest.approx(reference - info["runtime_s"])
    halved = Reward("half", lambda runtime_s, reference_s: -runtime_s / 2, (-np.inf, 0.0))
    env = _make(reward=halved)
    env.reset(seed=0)
    _, r, _, _, info = env.step(np.full(env.slots, 2))
    assert r == pytest.approx(-info["runtime_s"] / 2)
    with pytest.raises(ValueError, match="reward='nope'; expected one of 'neg_sqrt_runtime'.*or a callable"):
        _make(reward="nope")


def test_a_reward_of_the_measurement_sees_what_the_env_knows():
    seen = []

    def over_bound(measurement, context):
        seen.append((measurement, context))
        return -measurement.runtime_s / context.lower_bound_s if measurement.ok else -context.failing_signal_s

    env = _make(reward=pe.Reward("over_bound", over_bound, (-np.inf, 0.0), takes="measurement"), failing_signal=30.0)
    env.reset(seed=0)
    _, r, _, _, info = env.step(np.full(env.slots, 2))
    measurement, context = seen[-1]
    assert isinstance(measurement, pe.Measurement) and measurement.runtime_s == info["runtime_s"]
    assert context.lower_bound_s == info["sim_lower_bound_s"] and context.failing_signal_s == 30.0
    np.testing.assert_array_equal(context.capacity_bytes, env.cluster.memory_bytes)
    assert context.reference_s == 1.0  # uses_reference is False: the reference is not measured
    assert r == pytest.approx(-info["runtime_s"] / info["sim_lower_bound_s"])
    speedup = _make(reward="speedup")
    speedup.reset(seed=0)
    reference = speedup.reference()[1].runtime_s
    assert speedup.reward_context().reference_s == reference
    assert speedup.reward(measurement, speedup.reward_context()) == pytest.approx(reference / measurement.runtime_s)


def test_rewards_take_a_measurement_and_a_context():
    from placement_env.env.rewards import REWARDS

    env = _make()
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.full(env.slots, 2))
    measurement = env._last
    failed = pe.Measurement(runtime_s=float("nan"), ok=False, failure="oom", placement=measurement.placement,
                            runtime="sim")
    assert REWARDS["neg_runtime"](measurement) == -measurement.runtime_s
    assert REWARDS["neg_runtime"](failed) == -100.0  # the default failing signal
    assert REWARDS["neg_runtime"](failed, pe.RewardContext(failing_signal_s=7.0)) == -7.0
    assert REWARDS["speedup"](measurement, pe.RewardContext(reference_s=2.0)) == 2.0 / measurement.runtime_s
    with pytest.raises(pe.ArgumentError, match=r"measurement=2.0 \(of Reward 'speedup'\); expected a Measurement"):
        REWARDS["speedup"](2.0, 1.0)
    with pytest.raises(pe.ArgumentError, match=r"context=1.0 \(of Reward 'speedup'\); expected None or a RewardContext"):
        REWARDS["speedup"](measurement, 1.0)
    with pytest.raises(pe.ArgumentError, match=r"takes='runtime_s' \(of Reward\); expected one of 'runtime', "
                                               "'measurement'"):
        pe.Reward("r", lambda runtime, reference: -runtime, takes="runtime_s")


def test_failed_placement_gets_the_failing_signal():
    small = pe.load_cluster("paper-2gpu").to_dict()
    for device in small["devices"]:
        device["memory_bytes"] = 4096
    env = _make(cluster=small, failing_signal=25.0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(np.zeros(env.slots, dtype=np.int64))
    assert terminated and not info["ok"] and info["failure"] == "oom" and "needs" in info["message"]
    assert info["charged_runtime_s"] == 25.0 and reward == pytest.approx(-5.0)


def test_unmasked_no_kernel_action_is_a_failure_not_a_crash(tiny):
    from dataclasses import replace

    mask = np.array(tiny.device_mask)
    mask[tiny.ops_of_group(7)[0]] = 0b01  # one op of group 7 has no GPU kernel
    env = _make(benchmark=replace(tiny, device_mask=mask))
    env.reset(seed=0)
    grid = env.action_masks().reshape(env.slots, 3)
    assert not grid[7, 1:].any() and grid[7, 0] and grid[8].all()
    _, reward, _, _, info = env.step(np.ones(env.slots, dtype=np.int64))
    assert not info["ok"] and info["failure"] == "no_kernel" and reward == pytest.approx(-10.0)
    assert "group 7" in info["message"]


def test_sequential_episode_places_groups_in_order():
    env = _make(mode="sequential")
    obs, _ = env.reset(seed=0)
    assert obs["current"][0] == 1 and obs["placement"].sum() == 0
    rewards = []
    for step in range(env.n_groups):
        assert env.action_masks().shape == (3,)
        obs, reward, terminated, _, info = env.step(step % 2)
        rewards.append(reward)
        assert terminated == (step == env.n_groups - 1)
        if not terminated:
            assert obs["placement"].sum() == step + 1 and obs["current"][step + 1] == 1
    assert all(r == 0 for r in rewards[:-1]) and rewards[-1] < 0
    np.testing.assert_array_equal(info["placement"], np.arange(env.n_groups) % 2)


def test_sequential_dense_rewards_sum_to_the_gain_over_the_reference():
    env = _make(mode="sequential", dense_reward=True)
    env.reset(seed=0)
    reference = env.reference()[1].runtime_s
    total = 0.0
    for step in range(env.n_groups):
        _, reward, terminated, _, info = env.step(1 + step % 2)
        total += reward
    assert terminated
    assert total == pytest.approx(-np.sqrt(info["runtime_s"]) + np.sqrt(reference))


def test_dense_rewards_and_efficiency_each_use_one_runtime_with_grappler():
    """Dense rewards come from the env's runtime at every step, so they add up to R(final) - R(reference)
    in that runtime; efficiency compares the simulator's bound with the simulator's runtime (grappler's
    step times are on another scale: they would pin it at 1)."""
    env = _make(mode="sequential", dense_reward=True, runtime="grappler")
    env.reset(seed=0)
    reference = env.reference()[1]
    assert reference.runtime == "grappler"
    total = 0.0
    for step in range(env.n_groups):
        _, reward, terminated, _, info = env.step(1 + step % 2)
        total += reward
    assert terminated and info["runtime"] == "grappler"
    assert total == pytest.approx(-np.sqrt(info["runtime_s"]) + np.sqrt(reference.runtime_s))

    env = _make(mode="improve", improve_steps=2, runtime="grappler")
    obs, info = env.reset(seed=0)
    simulated = env._task.sim(info["placement"]).runtime_s
    assert info["sim_lower_bound_s"] == env._task.sim.lower_bound() and "lower_bound_s" not in info
    assert obs["efficiency"][0] == pytest.approx(info["sim_lower_bound_s"] / simulated, rel=1e-6)
    assert obs["efficiency"][0] < 1
    _, _, _, _, info = env.step(2)
    moved = env._task.sim(info["placement"]).runtime_s
    assert env._observation()["efficiency"][0] == pytest.approx(info["sim_lower_bound_s"] / moved, rel=1e-6)


def test_improve_mode_moves_one_group_per_step():
    env = _make(mode="improve", improve_steps=5)
    obs, info = env.reset(seed=0)
    start = info["placement"].copy()
    np.testing.assert_array_equal(start, env.reference()[0])
    assert obs["placement"].sum() == env.n_groups and 0 < obs["efficiency"][0] <= 1
    previous = info["runtime_s"]
    for step in range(5):
        _, reward, terminated, _, info = env.step(2)
        assert reward == pytest.approx(-np.sqrt(info["runtime_s"]) + np.sqrt(previous))
        previous = info["runtime_s"]
        assert terminated == (step == 4)
    assert (info["placement"] != start).sum() <= 5 and np.all(info["placement"][:5] == 2)
    env.reset(options={"placement": np.ones(env.n_groups, dtype=np.int64)})
    assert env._placement[: env.n_groups].tolist() == [1] * env.n_groups


def test_reset_can_switch_benchmark_within_the_slots():
    env = _make(benchmark="synthetic-tiny", pad_to=200)
    obs, info = env.reset(options={"benchmark": "rnnlm-tiny"})
    assert info["benchmark"] == "rnnlm-tiny" and obs["group_mask"].sum() == env.n_groups
    assert env.observation_space.contains(obs)
    _, _, _, _, info = env.step(np.ones(200, dtype=np.int64))
    assert info["benchmark"] == "rnnlm-tiny" and info["placement"].shape == (env.n_groups,)
    small = _make(benchmark="synthetic-tiny")
    with pytest.raises(ValueError, match="pad_to >= "):
        small.reset(options={"benchmark": "rnnlm-tiny"} if small.slots < 105 else {"benchmark": "nmt-tiny"})


@pytest.mark.parametrize("action, error", [
    (np.zeros(3, dtype=np.int64), "shape \\(3,\\); expected \\(105,\\)"),
    (np.zeros(105), "dtype float64; expected integers"),
    (np.full(105, 3), "uses device 3; this cluster has devices 0..2"),
    (np.full(105, -1), "uses device -1"),
])
def test_bad_actions_are_specific_errors(action, error):
    env = _make()
    env.reset(seed=0)
    with pytest.raises(pe.InvalidActionError, match=error):
        env.step(action)
    env.step(np.zeros(105, dtype=np.int64))  # the env is still usable


def test_bad_discrete_action():
    env = _make(mode="sequential")
    env.reset(seed=0)
    with pytest.raises(pe.InvalidActionError, match="single device index"):
        env.step(np.array([0, 1]))
    with pytest.raises(pe.InvalidActionError, match="dtype"):
        env.step(1.0)


def test_step_before_reset_and_after_the_end():
    env = _make()
    with pytest.raises(ResetNeeded, match="before step"):
        env.step(np.zeros(105, dtype=np.int64))
    env.reset(seed=0)
    env.step(np.zeros(105, dtype=np.int64))
    with pytest.raises(ResetNeeded, match="episode has ended"):
        env.step(np.zeros(105, dtype=np.int64))


def test_bad_options_and_kwargs():
    env = _make()
    with pytest.raises(ValueError, match="unknown reset option\\(s\\) 'seed_graph'; accepted: 'benchmark', 'placement'"):
        env.reset(options={"seed_graph": 1})
    with pytest.raises(ValueError, match="is for mode='improve'"):
        env.reset(options={"placement": np.zeros(105, dtype=np.int64)})
    with pytest.raises(ValueError, match="mode='greedy'; expected one of 'oneshot', 'sequential', 'improve'"):
        _make(mode="greedy")
    with pytest.raises(ValueError, match="reward='fast'; expected one of 'neg_sqrt_runtime'"):
        _make(reward="fast")
    with pytest.raises(ValueError, match="runtime='real'"):
        _make(runtime="real")
    with pytest.raises(ValueError, match="failing_signal=-1"):
        _make(failing_signal=-1)
    with pytest.raises(pe.UnknownBenchmarkError, match="rnnlm-tiny"):
        _make(benchmark="rnnlm-tinyy")
    with pytest.raises(pe.UnknownClusterError, match="paper-2gpu"):
        _make(cluster="paper-3gpu")


def test_action_masks_oneshot_layout():
    env = _make(pad_to=110)
    mask = env.action_masks()
    assert mask.shape == (110 * 3,) and mask.dtype == bool
    grid = mask.reshape(110, 3)
    np.testing.assert_array_equal(grid[:105], env.allowed)
    assert grid[105:, 0].all() and not grid[105:, 1:].any()


def test_observation_fields_are_normalised():
    env = _make(mode="improve")
    obs, _ = env.reset(seed=0)
    for key, space in env.observation_space.spaces.items():
        assert obs[key].dtype == np.float32 and space.contains(obs[key]), key
    assert np.allclose(obs["op_types"].sum(axis=1), 1.0)
    assert obs["compute"][:, 1].sum() == pytest.approx(1.0, rel=1e-5)
    assert (obs["neighbours"] > 0).any() and (obs["output_shapes"] > 0).any()
    assert op_category("MatMul") == CATEGORY_NAMES.index("matmul")
    assert op_category("SomethingNew") == len(CATEGORY_NAMES) - 1


def test_render_modes():
    env = _make(render_mode="rgb_array")
    env.reset(seed=0)
    env.step(np.ones(105, dtype=np.int64))
    image = env.render()
    assert image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8 and image.std() > 0
    text = _make(render_mode="ansi")
    text.reset(seed=0)
    text.step(np.ones(105, dtype=np.int64))
    table = text.render()
    assert "gpu:0" in table and "cpu:0" in table


def test_works_under_async_vector_env():
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(TINY) for _ in range(2)])
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["group_mask"].shape == (2, 105)
        _, rewards, terminated, _, infos = envs.step(np.ones((2, 105), dtype=np.int64))
        assert rewards.shape == (2,) and terminated.all() and np.all(rewards < 0)
    finally:
        envs.close()


def test_works_under_sb3_subproc_vec_env():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    envs = SubprocVecEnv([lambda: gym.make("placement_env:" + TINY) for _ in range(2)])  # fresh interpreters
    try:
        envs.reset()
        _, rewards, dones, infos = envs.step(np.ones((2, 105), dtype=np.int64))
        assert dones.all() and np.all(rewards < 0) and infos[0]["ok"]
    finally:
        envs.close()


@pytest.mark.slow
def test_measured_env_charges_nothing_for_a_failed_machinery():
    import os
    import signal

    env = gym.make(TINY, cluster="local:2", runtime="measured",
                   measured_options={"steps": 4, "warmup": 1, "retries": 0, "timeout_s": 30}).unwrapped
    assert env.spec.nondeterministic  # any env measuring real runs says so
    try:
        placement = np.arange(env.slots) % 2
        env.reset(seed=0)
        _, _, _, _, info = env.step(placement)
        assert info["ok"] and info["runtime"] == "measured", info["message"]
        workers = env.evaluator._measured.workers
        stopped = workers.worker_pids[1]
        os.kill(stopped, signal.SIGSTOP)
        env.reset()
        with pytest.raises(pe.InfrastructureError, match=f"pid {stopped} is stopped.*nothing was charged"):
            env.step(placement)  # not a reward of the failing signal: the placement is not to blame
        _, reward, terminated, _, info = env.step(placement)  # the same episode, on fresh workers
        assert terminated and info["ok"] and reward > -1.0, info["message"]
    finally:
        env.close()


def test_reset_options_that_are_not_a_dict_are_a_clear_error():
    env = _make()
    with pytest.raises(ValueError, match="reset options = 'x'; expected None or a dict with keys from 'benchmark'"):
        env.reset(options="x")
