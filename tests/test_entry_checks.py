"""Every argument is checked where it enters: the Python API (Problem, evaluate, solve), the env's keywords,
cluster JSON files and dicts, graph import and benchmark names. Each bad value is a specific error whose
message names the value and what is accepted."""
from __future__ import annotations

import json
import re
import tracemalloc

import gymnasium as gym
import numpy as np
import pytest

import placement_env as pe
from placement_env import ArgumentError, ClusterConfigError, GraphImportError, UnknownBenchmarkError
from placement_env.cluster import Cluster, Device, Link, Topology, cluster_from_spec
from placement_env.cluster.checks import MAX_DEVICES, MAX_SWITCHES
from placement_env.cluster.schema import MAX_FILE_BYTES
from placement_env.env import DevicePlacementEnv

TINY = "DevicePlacement-Tiny-v0"


@pytest.fixture(scope="module")
def graph():
    return pe.load_benchmark("rnnlm-tiny", max_groups=8)


@pytest.fixture(scope="module")
def cluster():
    return pe.load_cluster("paper-2gpu")


def small_cluster() -> dict:
    """A valid two-device cluster in the JSON form, fresh for each edit."""
    return {"name": "small", "devices": [
        {"name": "cpu:0", "kind": "CPU", "peak_flops": 1e12, "memory_bandwidth": 6.8e10, "memory_bytes": 2**36,
         "concurrency": 8},
        {"name": "gpu:0", "kind": "GPU", "peak_flops": 4e12, "memory_bandwidth": 2.4e11, "memory_bytes": 2**34,
         "concurrency": 1, "compute_efficiency": 0.5, "op_overhead_s": 5e-6}],
        "default_link": {"bandwidth": 12e9, "latency": 1e-5}}


# ---- Problem, solve, evaluate ----------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [-1, "x", 1.5, True, float("inf")])
def test_a_problem_refuses_a_bad_budget(graph, cluster, budget):
    expected = re.escape(f"budget={budget!r}; expected None (unlimited) or an integer >= 0")
    with pytest.raises(ArgumentError, match=expected):
        pe.Problem.make(graph, cluster, budget=budget)
    with pytest.raises(ArgumentError, match="budget="):
        pe.Problem(graph, cluster, pe.Evaluator(graph, cluster), budget=budget)


def test_a_problem_keeps_valid_budgets_and_seeds(graph, cluster):
    assert pe.Problem.make(graph, cluster, budget=0).budget == 0
    assert pe.Problem.make(graph, cluster, budget=np.int64(7), seed=np.int64(3)).budget == 7
    assert pe.Problem.make(graph, cluster).budget is None
    same = [pe.Problem.make(graph, cluster, seed=5).rng.integers(1 << 30) for _ in range(2)]
    assert same[0] == same[1] == np.random.default_rng(5).integers(1 << 30)


@pytest.mark.parametrize("seed", [-1, "x", 1.0, None])
def test_a_problem_refuses_a_bad_seed(graph, cluster, seed):
    with pytest.raises(ArgumentError, match=re.escape(f"seed={seed!r}; expected an integer >= 0")):
        pe.Problem.make(graph, cluster, seed=seed)


def test_a_problem_refuses_what_is_not_a_graph_cluster_rng_or_env(graph, cluster):
    with pytest.raises(ArgumentError, match=r"graph='rnnlm-tiny'; expected an OpGraph"):
        pe.Problem.make("rnnlm-tiny", cluster)
    with pytest.raises(ArgumentError, match=r"cluster='paper-2gpu'; expected a Cluster"):
        pe.Problem.make(graph, "paper-2gpu")
    with pytest.raises(ArgumentError, match="rng=0; expected a numpy.random.Generator"):
        pe.Problem(graph, cluster, pe.Evaluator(graph, cluster), rng=0)
    with pytest.raises(ArgumentError, match="evaluator=3; expected an Evaluator or a callable"):
        pe.Problem(graph, cluster, 3)
    with pytest.raises(ArgumentError, match="env='nmt'; expected a DevicePlacementEnv"):
        pe.Problem.from_env("nmt")


def test_solve_and_resolve_method_refuse_bad_arguments(graph, cluster):
    problem = pe.Problem.make(graph, cluster)
    with pytest.raises(ArgumentError, match="problem='x'; expected a Problem"):
        pe.solve("single_gpu", "x")
    with pytest.raises(ArgumentError, match="method=3; expected a method name"):
        pe.solve(3, problem)
    with pytest.raises(ArgumentError, match="name=5; expected None or a str"):
        pe.solve("single_gpu", problem, name=5)
    with pytest.raises(ArgumentError, match=r"method=\['expert'\]; expected a method name, 'module:callable'"):
        pe.resolve_method(["expert"])
    with pytest.raises(pe.UnknownMethodError, match="unknown method 'expertt'"):
        pe.resolve_method("expertt")


def test_a_batch_of_placements_is_one_two_dimensional_array(graph, cluster):
    problem = pe.Problem.make(graph, cluster, budget=3)
    with pytest.raises(pe.InvalidPlacementError, match=r"placements has shape \(8,\); expected \(k, 8\)"):
        problem.evaluate_batch(np.zeros(graph.n_groups, np.int64))  # one placement, not a batch of 8
    with pytest.raises(pe.InvalidPlacementError, match="placements are not one array"):
        problem.evaluate_batch([[0] * 8, [0] * 7])
    assert problem.evaluations == 0
    assert len(problem.evaluate_batch(np.zeros((2, graph.n_groups), np.int64))) == 2


@pytest.mark.parametrize("runtime", ["simm", ["sim"], None, 1])
def test_evaluate_refuses_an_unknown_runtime(graph, cluster, runtime):
    expected = re.escape(f"runtime={runtime!r}; expected one of 'sim', 'grappler', 'measured'")
    with pytest.raises(ArgumentError, match=expected):
        pe.evaluate(graph, cluster, np.zeros(graph.n_groups, np.int64), runtime=runtime)


def test_evaluate_refuses_a_schedule_that_is_not_a_bool_and_bad_costs(graph, cluster):
    placement = np.zeros(graph.n_groups, np.int64)
    with pytest.raises(ArgumentError, match="schedule='no'; expected True or False"):
        pe.evaluate(graph, cluster, placement, schedule="no")
    assert pe.evaluate(graph, cluster, placement, schedule=np.False_).schedule is None
    costs = np.ones((graph.n_ops, cluster.n_devices))
    costs[3, 1] = np.nan
    with pytest.raises(ArgumentError, match=rf"costs\[3, 1\] = nan \(op '{graph.op_names[3]}' on gpu:0\); expected"):
        pe.evaluate(graph, cluster, placement, costs=costs)
    with pytest.raises(ArgumentError, match="costs of type list are not numbers"):
        pe.evaluate(graph, cluster, placement, costs=[["a"]])
    with pytest.raises(ArgumentError, match="measured_options=3; expected a dict"):
        pe.Evaluator(graph, cluster, "measured", measured_options=3)


# ---- the env's keywords ------------------------------------------------------------------------------
@pytest.mark.parametrize("keyword, value, extra", [
    ("dense_reward", "no", {"mode": "sequential"}),
    ("dense_reward", 1, {"mode": "sequential"}),
    ("graph_observation", "yes", {}),
    ("graph_observation", None, {}),
])
def test_env_booleans_must_be_booleans(keyword, value, extra):
    with pytest.raises(ArgumentError, match=re.escape(f"{keyword}={value!r}; expected True or False")):
        gym.make(TINY, **{keyword: value}, **extra)


def test_env_takes_numpy_booleans():
    env = gym.make(TINY, mode="sequential", dense_reward=np.True_, graph_observation=np.False_).unwrapped
    assert env.dense_reward is True and env.edge_slots is None


@pytest.mark.parametrize("keyword, value, match", [
    ("max_groups", 0, "max_groups=0; expected an integer >= 1"),
    ("max_groups", "8", "max_groups='8'; expected an integer >= 1"),
    ("max_groups", 8.0, "max_groups=8.0; expected an integer >= 1"),
    ("max_groups", True, "max_groups=True; expected an integer >= 1"),
    ("failing_signal", float("nan"), r"failing_signal=nan; expected a finite number of seconds > 0 \(default 100\)"),
    ("failing_signal", float("inf"), "failing_signal=inf; expected a finite number of seconds > 0"),
    ("failing_signal", 0, "failing_signal=0; expected a finite number of seconds > 0"),
    ("failing_signal", "100", "failing_signal='100'; expected"),
    ("mode", 3, "mode=3; expected one of 'oneshot', 'sequential', 'improve'"),
    ("runtime", ["sim"], r"runtime=\['sim'\]; expected one of"),
    ("reward", 3, "reward=3; expected one of 'neg_sqrt_runtime'"),
    ("evaluator", 3, "evaluator=3; expected None or a callable"),
    ("measured_options", [], r"measured_options=\[\]; expected a dict with keys from"),
])
def test_env_keywords_out_of_range_or_of_the_wrong_type(keyword, value, match):
    with pytest.raises(ArgumentError, match=match):
        gym.make(TINY, **{keyword: value})


def test_env_keywords_that_depend_on_the_mode_or_the_graph():
    with pytest.raises(ArgumentError, match="improve_steps=0; expected an integer >= 1"):
        gym.make(TINY, mode="improve", improve_steps=0)
    with pytest.raises(ArgumentError, match="improve_steps='3'; expected an integer >= 1"):
        gym.make(TINY, mode="improve", improve_steps="3")
    with pytest.raises(ArgumentError, match="improve_steps=3 is for mode='improve', not 'oneshot'"):
        gym.make(TINY, improve_steps=3)
    pad_to = "pad_to=70000; expected an integer >= the graph.s 105 groups and <= 65,536"
    with pytest.raises(ArgumentError, match=pad_to):
        gym.make(TINY, pad_to=70_000)
    with pytest.raises(ArgumentError, match=r"pad_to=200.0; expected an integer"):
        gym.make(TINY, pad_to=200.0)
    with pytest.raises(ArgumentError, match=r"pad_edges=2000000; expected an integer >= the graph's \d+ group-graph "
                                            "edges and <= 1,048,576"):
        gym.make(TINY, graph_observation=True, pad_edges=2_000_000)
    assert gym.make(TINY, pad_to=np.int64(200)).unwrapped.slots == 200


def test_env_actions_of_a_time_dtype_or_ragged_are_refused():
    env = gym.make(TINY).unwrapped
    env.reset(seed=0)
    with pytest.raises(pe.InvalidActionError, match="dtype timedelta64"):
        env.step(np.zeros(env.slots, "m8[s]"))
    seq = gym.make(TINY, mode="sequential").unwrapped
    seq.reset(seed=0)
    with pytest.raises(pe.InvalidActionError, match="action is not one array"):
        seq.step([[0], [0, 1]])


def test_rewards_and_features_check_their_fields(graph, cluster):
    with pytest.raises(ArgumentError, match=r"uses_reference='no' \(of Reward\); expected True or False"):
        pe.Reward("r", lambda runtime, reference: -runtime, uses_reference="no")
    with pytest.raises(ArgumentError, match=r"range=\(1.0, 0.0\) \(of Reward\); expected a tuple \(low, high\)"):
        pe.Reward("r", lambda runtime, reference: -runtime, range=(1.0, 0.0))
    seconds = np.ones((graph.n_ops, cluster.n_devices))
    with pytest.raises(ArgumentError, match=r"slots=4; expected an integer >= graph 'rnnlm-tiny''s 8 groups"):
        pe.graph_features(graph, cluster, seconds, 4)
    with pytest.raises(ArgumentError, match=r"op_seconds: float64 array of shape \(3, 3\); expected finite seconds"):
        pe.graph_features(graph, cluster, np.ones((3, 3)), 8)
    with pytest.raises(ArgumentError, match="edge_slots='x'; expected an integer >= 0"):
        pe.graph_features(graph, cluster, seconds, 8, edge_slots="x")


# ---- cluster files and fields ------------------------------------------------------------------------
def test_a_binary_cluster_file_is_named_as_not_utf8_json(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ClusterConfigError, match=r"cluster\.json: not UTF-8 JSON text \(byte 128 is 0x80\)"):
        pe.load_cluster(str(path))


def test_a_directory_is_named_as_one(tmp_path):
    with pytest.raises(ClusterConfigError, match=rf"{tmp_path}: is a directory; expected a cluster \.json file"):
        pe.load_cluster(str(tmp_path))
    with pytest.raises(ClusterConfigError, match="is a directory"):
        Cluster.load_json(tmp_path)


def test_a_cluster_file_past_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written, and nothing must be read
    with pytest.raises(ClusterConfigError, match=rf"huge\.json: {MAX_FILE_BYTES + 1:,} bytes; a cluster JSON file has "
                                                 rf"at most {MAX_FILE_BYTES:,} bytes \(64 MiB\)"):
        pe.load_cluster(str(path))


def test_forty_thousand_devices_are_refused_before_any_matrix(tmp_path):
    device = small_cluster()["devices"][1]
    data = {"name": "big", "devices": [{**device, "name": f"gpu:{i}"} for i in range(40_000)],
            "default_link": {"bandwidth": 1e10, "latency": 1e-5}}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    tracemalloc.start()
    try:
        with pytest.raises(ClusterConfigError, match="big.json: devices: 40,000 devices; a cluster has at most 1,024"):
            pe.load_cluster(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**28  # the JSON's objects only, not the 12 GB link matrices
    devices = tuple(Device(f"gpu:{i}", "GPU", 1e12, 1e11, 2**30, 1, f"/device:GPU:{i}") for i in range(MAX_DEVICES + 1))
    with pytest.raises(ClusterConfigError, match="devices: 1,025 devices; a cluster has at most 1,024"):
        Cluster("big", devices, np.ones((2, 2)), np.ones((2, 2)))


@pytest.mark.parametrize("where, key, value, rule", [
    ("device", "peak_flops", 1e308, "a positive number of FLOP/s >= 1,000 and <= 1e18"),
    ("device", "peak_flops", 1.0, "a positive number of FLOP/s >= 1,000 and <= 1e18"),
    ("device", "memory_bandwidth", 1e17, "a positive number of bytes/s >= 1,000 and <= 1e16"),
    ("device", "memory_bytes", 2**51, "a positive whole number of bytes >= 1 and <= 1,125,899,906,842,624"),
    ("device", "memory_bytes", 10**400, "a positive whole number of bytes"),
    ("device", "concurrency", 5000, "a positive integer (ops that run at once) >= 1 and <= 4,096"),
    ("device", "op_overhead_s", 61.0, "a finite number of seconds >= 0 and <= 60"),
    ("device", "compute_efficiency", 1e-5, "a fraction >= 0.0001 and <= 1"),
    ("device", "memory_efficiency", 1.5, "a fraction >= 0.0001 and <= 1"),
    ("device", "op_share", float("nan"), "a fraction >= 0.0001 and <= 1"),
    ("default_link", "bandwidth", float("inf"), "a positive number of bytes/s >= 1,000 and <= 1e16"),
    ("default_link", "latency", 3600.0, "a finite number of seconds >= 0 and <= 60"),
    ("cluster", "transfer_overhead_s", -1e-6, "a finite number of seconds >= 0 and <= 60"),
    ("cluster", "host_transfer", {"per_tensor_s": 1e-4, "bandwidth": 10.0}, "a positive number of bytes/s >= 1,000"),
])
def test_every_numeric_cluster_field_has_a_stated_physical_range(where, key, value, rule):
    data = small_cluster()
    if where == "cluster" and key == "host_transfer":
        data["devices"][1]["kind"] = "CPU"
    target = {"device": data["devices"][1], "default_link": data["default_link"], "cluster": data}[where]
    target[key] = value
    with pytest.raises(ClusterConfigError) as info:
        pe.load_cluster(data)
    assert rule in str(info.value) and key in str(info.value), str(info.value)


def test_links_and_topologies_are_in_range_and_bounded():
    data = small_cluster()
    data["links"] = [{"src": "cpu:0", "dst": "gpu:0", "latency": 1e9}]
    with pytest.raises(ClusterConfigError, match=r"links\[0\].latency = 1000000000.0 .*<= 60"):
        pe.load_cluster(data)
    data["links"] = [{"src": ["cpu:0"], "dst": "gpu:0"}]
    with pytest.raises(ClusterConfigError, match=r'links\[0\].src = \["cpu:0"\]: must be the name of a device'):
        pe.load_cluster(data)
    data["links"] = [{"src": "cpu:0", "dst": "gpu:0", "bidirectional": "yes"}]
    with pytest.raises(ClusterConfigError, match=r'links\[0\].bidirectional = "yes" .*: must be True or False'):
        pe.load_cluster(data)
    with pytest.raises(ClusterConfigError, match="link.bandwidth = 1e\\+?20 .*<= 1e16"):
        Link("a", "b", 1e20)
    with pytest.raises(ClusterConfigError, match=f"topology.switches: {MAX_SWITCHES + 1:,} switches; a topology has"):
        Topology(tuple(f"s{i}" for i in range(MAX_SWITCHES + 1)), ())
    with pytest.raises(ClusterConfigError, match="topology.links = 3: must be a list of Link"):
        Topology((), 3)


def test_cluster_json_that_python_cannot_hold_is_a_config_error():
    with pytest.raises(ClusterConfigError, match="not valid JSON: nested too deeply"):
        Cluster.from_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ClusterConfigError, match="not valid JSON: .*digits"):
        Cluster.from_json('{"name": "x", "devices": ' + "9" * 5000 + "}")
    with pytest.raises(ClusterConfigError, match="cluster JSON = 3: must be a str of JSON text"):
        Cluster.from_json(3)


def test_cluster_from_spec_checks_its_keywords_before_connecting():
    with pytest.raises(ClusterConfigError, match='probe = "no": must be True or False'):
        cluster_from_spec({"worker": ["localhost:1"]}, probe="no")
    with pytest.raises(ClusterConfigError, match="timeout_s = 0: must be a finite number of seconds > 0"):
        cluster_from_spec({"worker": ["localhost:1"]}, timeout_s=0, probe=False)
    with pytest.raises(ClusterConfigError, match=r'job = \["worker"\]: must be a job of the cluster spec'):
        cluster_from_spec({"worker": ["localhost:1"]}, job=["worker"], probe=False)


# ---- graph import and benchmark names ----------------------------------------------------------------
def test_from_tf_names_a_missing_input_and_a_repeated_node():
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="a", op="NoOp").input.append("^missing")
    with pytest.raises(GraphImportError, match="node 'a' \\(NoOp\\) has input '\\^missing', but the GraphDef has no "
                                               "node named 'missing'"):
        pe.from_tf(graph_def)
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="a", op="NoOp")
    graph_def.node.add(name="a", op="NoOp")
    with pytest.raises(GraphImportError, match="two nodes named 'a'"):
        pe.from_tf(graph_def)


def test_from_tf_says_a_directory_is_one_and_what_it_reads(tmp_path):
    with pytest.raises(GraphImportError, match=r"is a directory; from_tf reads a file: a GraphDef \(\.pb, or \.pbtxt "
                                               r"as text\) or a MetaGraphDef \(\.meta\)"):
        pe.from_tf(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"")
    with pytest.raises(GraphImportError, match="it holds a SavedModel, which from_tf does not read"):
        pe.from_tf(str(tmp_path))


@pytest.mark.parametrize("keyword, value, match", [
    ("unknown_dim", 0, r"unknown_dim=0; expected None or an integer >= 1"),
    ("unknown_dim", 2.0, r"unknown_dim=2.0; expected None or an integer >= 1"),
    ("fetches", "train_op", r"fetches='train_op'; expected None or a list of op names"),
    ("name", 3, "name=3; expected None or a str"),
    ("init_op", 3, "init_op=3; expected None or a str"),
])
def test_from_tf_keywords(keyword, value, match):
    with pytest.raises(ArgumentError, match=match):
        pe.from_tf(b"", **{keyword: value})


@pytest.mark.parametrize("name, reason", [
    ("rnnlm-batch0", "batch 0 is not >= 1"),
    ("random_cnn:3-batch0", "batch 0 is not >= 1"),
    ("gpt2-batchx", "the batch 'x' after '-batch' is not a whole number N >= 1"),
    ("gpt2-tiny-batch4", "'gpt2-tiny' has no batch variant; gpt2's names are gpt2, gpt2-tiny, gpt2-batch<N>"),
    ("synthetic:-1", "the seed '-1' is not a whole number >= 0"),
    ("nmt-huge", "'nmt-huge' is not one of nmt's names; nmt's names are nmt, nmt-tiny, nmt-deep, nmt-batch<N>"),
    ("resnet", "'resnet' is not a model \\(did you mean 'resnet50'\\?\\)"),
])
def test_a_bad_benchmark_name_says_which_part_breaks_the_grammar(name, reason):
    grammar = r"<model>-batch<N> \(a model above at paper scale with batch N >= 1"
    with pytest.raises(UnknownBenchmarkError, match=rf"unknown benchmark '{name}': {reason}\. Names: .*{grammar}"):
        pe.load_benchmark(name)


def test_load_benchmark_use_cache_is_a_bool():
    with pytest.raises(ArgumentError, match="use_cache='no'; expected True or False"):
        pe.load_benchmark("rnnlm-tiny", use_cache="no")


def test_an_env_made_directly_checks_the_same_keywords():
    with pytest.raises(ArgumentError, match="dense_reward='no'; expected True or False"):
        DevicePlacementEnv("rnnlm-tiny", mode="sequential", dense_reward="no")
    with pytest.raises(ArgumentError, match="render_mode='rgb'; expected None or one of 'rgb_array', 'ansi'"):
        DevicePlacementEnv("rnnlm-tiny", render_mode="rgb")


def test_symmetries_take_a_cluster_and_integer_placements():
    symmetries = pe.device_symmetries(pe.load_cluster("k80-2gpu"))
    with pytest.raises(ArgumentError, match=r"placement=array\(\[1.7, 0. \]\); expected a 1-D integer array of devices 0..2"):
        pe.canonical_placement(np.array([1.7, 0.0]), symmetries)
    assert pe.canonical_placement(np.array([2, 0], np.uint8), symmetries).tolist() == [1, 0]
    with pytest.raises(ArgumentError, match="cluster='k80-2gpu'; expected a Cluster"):
        pe.device_symmetries("k80-2gpu")
