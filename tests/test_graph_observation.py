"""graph_observation=True: the group graph as a padded edge list in the env's Dict observation."""
import importlib.util
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import placement_env as pe
from test_group_graph import group_edges_by_loop
from test_simulated import make_graph

TINY = "DevicePlacement-Tiny-v0"
EDGE_FIELDS = ("edge_index", "edge_bytes", "edge_mask")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sb3_graph_extractor.py"


def _make(**kwargs):
    return gym.make(TINY, **kwargs).unwrapped


def test_off_by_default():
    env = _make()
    obs, _ = env.reset(seed=0)
    assert env.edge_slots is None
    assert not set(EDGE_FIELDS) & set(obs) and not set(EDGE_FIELDS) & set(env.observation_space.spaces)


@pytest.mark.parametrize("mode", ["oneshot", "sequential", "improve"])
def test_gymnasium_and_sb3_checkers_pass(mode):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = _make(mode=mode, graph_observation=True)
    assert set(EDGE_FIELDS) <= set(env.observation_space.spaces)
    check_env(env)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SB3 only suggests flattening the 2-D fields
        sb3_check_env(env)


def test_fields_match_the_group_graph_on_rnnlm_tiny():
    env = _make(graph_observation=True, pad_to=110, pad_edges=300)
    obs, _ = env.reset(seed=0)
    expected = {pair: volume for pair, (volume, _) in group_edges_by_loop(env.graph).items()}
    n = len(expected)
    assert n == 278 and env.edge_slots == 300  # 149 pairs with tensors, the rest dependencies only
    space = env.observation_space
    assert space["edge_index"].shape == (300, 2) and space["edge_index"].dtype == np.int64
    assert space["edge_index"].low.min() == 0 and space["edge_index"].high.max() == 109  # the group slots
    for key in ("edge_bytes", "edge_mask"):
        assert space[key].shape == (300,) and space[key].dtype == np.float32
    assert space.contains(obs)
    assert [tuple(row) for row in obs["edge_index"][:n].tolist()] == list(expected)
    volume = np.array(list(expected.values()), float)
    np.testing.assert_allclose(obs["edge_bytes"][:n], np.log10(1 + volume) / 12, rtol=1e-6)
    assert (volume == 0).sum() == n - 149 and (obs["edge_bytes"][:n][volume == 0] == 0).all()
    np.testing.assert_array_equal(obs["edge_mask"], np.r_[np.ones(n), np.zeros(300 - n)])
    assert not obs["edge_index"][n:].any() and not obs["edge_bytes"][n:].any()
    after, *_ = env.step(np.zeros(110, dtype=np.int64))
    np.testing.assert_array_equal(after["edge_index"], obs["edge_index"])
    assert _make(graph_observation=True).edge_slots == n  # by default: the first graph's edges


def test_tensors_count_once_per_destination_group_and_edges_are_directed():
    # groups: {0, 1} -> 0, {2, 3, 5} -> 1, {4} -> 2
    graph = make_graph(6, [
        (0, 1, 0, 100),                  # inside group 0: no edge
        (0, 2, 0, 100), (0, 3, 0, 100),  # one tensor read by two ops of group 1: 100 bytes once
        (0, 3, 1, 7),                    # another tensor of op 0: +7
        (1, 4, -1, 0),                   # a control edge: a dependency with no bytes
        (3, 4, 0, 8), (4, 5, 0, 8),      # groups 1 and 2 feed each other
    ], outputs=[[100, 7], [8], [8], [8], [8], [8]], group=np.array([0, 0, 1, 1, 2, 1]))
    cluster = pe.load_cluster("paper-2gpu")
    groups = pe.group_graph(graph, cluster, np.zeros((6, cluster.n_devices)))
    src, dst, volume = groups.src, groups.dst, groups.bytes
    assert list(zip(src.tolist(), dst.tolist(), volume.tolist())) == [(0, 1, 107), (0, 2, 0), (1, 2, 8), (2, 1, 8)]
    assert src.dtype == dst.dtype == volume.dtype == np.int64
    assert groups.data.tolist() == [True, False, True, True]


def test_switching_benchmark_keeps_the_edge_slots():
    env = _make(benchmark="synthetic-tiny", pad_to=200, graph_observation=True, pad_edges=600)
    obs, info = env.reset(options={"benchmark": "rnnlm-tiny"})
    assert info["benchmark"] == "rnnlm-tiny" and obs["edge_mask"].sum() == 278
    assert env.observation_space.contains(obs)
    small = _make(benchmark="rnnlm-tiny", pad_to=200, graph_observation=True, pad_edges=278)
    with pytest.raises(ValueError, match=r"'nmt-tiny' has 525 group-graph edges.*pad_edges >= 525"):
        small.reset(options={"benchmark": "nmt-tiny"})
    obs, _ = small.reset(seed=0)  # still usable
    assert obs["edge_mask"].sum() == 278


def test_bad_keywords_are_clear_errors():
    with pytest.raises(ValueError, match="pad_edges=10 is for graph_observation=True"):
        _make(pad_edges=10)
    with pytest.raises(ValueError, match="graph_observation='yes'; expected True or False"):
        _make(graph_observation="yes")
    with pytest.raises(ValueError, match="pad_edges=10; expected an integer >= the graph's 278 group-graph edges"):
        _make(graph_observation=True, pad_edges=10)


def _example():
    spec = importlib.util.spec_from_file_location("sb3_graph_extractor", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_example_extractor_passes_messages_along_the_edges():
    import torch

    example = _example()
    env = _make(graph_observation=True)
    extractor = example.GroupGraphExtractor(env.observation_space)
    obs, _ = env.reset(seed=0)
    batch = {key: torch.as_tensor(value, dtype=torch.float32).unsqueeze(0) for key, value in obs.items()}
    features = extractor(batch)
    assert features.shape == (1, extractor.features_dim)
    without_edges = extractor({**batch, "edge_mask": torch.zeros_like(batch["edge_mask"])})
    assert not torch.allclose(features, without_edges)


def test_example_trains_ppo(capsys):
    assert _example().main(["--timesteps", "64"]) == 0
    assert "64 steps, 64 episodes" in capsys.readouterr().out
