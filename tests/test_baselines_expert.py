"""The expert placement: valid, and where its documented rules put each model part."""
import re

import numpy as np
import pytest

import placement_env as pe
from baselines.expert import EXPERT_BENCHMARKS, _balanced_chunks, _layer_gpu, block_gpus, expert, forward_scope
from placement_env import METHODS, NoExpertPlacementError, Problem, resolve_method, solve

BLOCKS = pe.benchmark_blocks("inception_v3")

GIB = 2 ** 30
CLUSTERS = ("paper-2gpu", "paper-4gpu")
TINY = ("rnnlm-tiny", "nmt-tiny", "inception_v3-tiny")


@pytest.fixture(scope="module")
def graphs():
    return {name: pe.load_benchmark(name) for name in TINY}


def _problem(graph, cluster, benchmark=None):
    return Problem.make(graph, pe.load_cluster(cluster), benchmark=benchmark or graph.name)


def _gpus(cluster):
    return [d for d, device in enumerate(cluster.devices) if device.kind == "GPU"]


def _scope(op_name: str) -> str:
    """The forward scope an op belongs to, written independently of baselines.expert."""
    name = re.sub(r"^gradients/", "", op_name)
    name = re.sub(r"^train_step/update_", "", name)
    parts = name.split("/")
    return "/".join(parts[:2]) if parts[0] in ("encoder", "decoder") else parts[0]


def _flops_share(graph, placement, n_devices):
    """{scope: fraction of the scope's FLOPs on each device}, forward + gradient + update ops."""
    device = placement[graph.group]
    totals = {}
    for name, d, f in zip(graph.op_names.astype(str), device, graph.flops):
        totals.setdefault(_scope(name), np.zeros(n_devices))[d] += f
    return {k: v / v.sum() for k, v in totals.items() if v.sum() > 0}


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name", TINY)
def test_expert_placement_is_valid(graphs, name, cluster):
    problem = _problem(graphs[name], cluster)
    placement = expert(problem)
    assert placement.shape == (graphs[name].n_groups,)
    assert np.issubdtype(placement.dtype, np.integer)
    assert problem.allowed[np.arange(len(placement)), placement].all()
    # Nothing that a GPU can run is left on the CPU.
    gpus = _gpus(problem.cluster)
    gpu_capable = problem.allowed[:, gpus].any(axis=1)
    assert np.isin(placement[gpu_capable], gpus).all()
    m = pe.evaluate(problem.graph, problem.cluster, placement)
    assert m.ok, m.message


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name", ["rnnlm-tiny", "nmt-tiny"])
def test_lstm_layers_one_per_gpu_attention_and_softmax_last(graphs, name, cluster):
    problem = _problem(graphs[name], cluster)
    placement = expert(problem)
    gpus = _gpus(problem.cluster)
    share = _flops_share(problem.graph, placement, problem.cluster.n_devices)
    stacks = [""] if name.startswith("rnnlm") else ["encoder/", "decoder/"]
    for stack in stacks:
        layer_gpus = []
        for k in range(2):
            gpu = gpus[k % len(gpus)]
            assert share[f"{stack}lstm_{k}"][gpu] > 0.9, (stack, k, share[f"{stack}lstm_{k}"])
            layer_gpus.append(gpu)
        assert len(set(layer_gpus)) == 2  # the two layers on different GPUs
    heads = ["softmax", "loss"] + (["attention"] if name.startswith("nmt") else [])
    for scope in heads:
        assert share[scope][gpus[-1]] > 0.9, (scope, share[scope])
    # The forward embedding lookup goes with the first layer (GPU 0).
    first = [i for i, n in enumerate(problem.graph.op_names.astype(str))
             if re.match(r"^(encoder/)?embedding/lookup/gather$", n)]
    assert first and all(placement[problem.graph.group[i]] == gpus[0] for i in first)
    # The CPU holds nothing.
    assert not np.isin(placement, [d for d in range(problem.cluster.n_devices) if d not in gpus]).any()


def test_gradient_ops_follow_their_forward_scope(graphs):
    graph = graphs["nmt-tiny"]
    placement = expert(_problem(graph, "paper-2gpu"))
    names = graph.op_names.astype(str)
    device_of = dict(zip(names, placement[graph.group]))
    checked = 0
    for name in names:
        match = re.match(r"^gradients/((?:encoder|decoder)/lstm_\d/t\d+)/gates_matmul_grad/MatMul$", name)
        if match:
            assert device_of[name] == device_of[f"{match.group(1)}/gates_matmul"], name
            checked += 1
    assert checked >= 4
    assert forward_scope("gradients/softmax/matmul_grad/MatMul_1") == "softmax/matmul/MatMul_1"
    assert forward_scope("gradients/MaxPool_3a_3x3_grad/MaxPoolGrad") == "MaxPool_3a_3x3/MaxPoolGrad"
    assert forward_scope("train_step/update_encoder/lstm_0/kernel/ResourceApplyMomentum") == \
        "encoder/lstm_0/kernel/ResourceApplyMomentum"


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_inception_blocks_in_order_on_non_decreasing_gpus(graphs, cluster):
    problem = _problem(graphs["inception_v3-tiny"], cluster)
    gpus = _gpus(problem.cluster)
    by_block = block_gpus(problem)
    assert list(by_block) == list(BLOCKS)
    ordinals = [by_block[b] for b in BLOCKS]
    assert ordinals == sorted(ordinals)
    assert ordinals[0] == 0 and by_block["Logits"] == by_block["loss"] == len(gpus) - 1
    assert by_block["inputs"] == by_block["MaxPool_5a_3x3"] == by_block["Mixed_5b"]  # stem with the first block

    # What the groups actually got: each block's majority device (by FLOPs) is non-decreasing too.
    placement = expert(problem)
    share = _flops_share(problem.graph, placement, problem.cluster.n_devices)
    placed = [int(np.argmax(share[b])) for b in BLOCKS if b in share]
    assert all(d in gpus for d in placed)
    assert placed == sorted(placed)
    assert placed[0] == gpus[0] and placed[-1] == gpus[-1]


def test_more_lstm_layers_than_gpus_go_in_contiguous_blocks():
    assert [_layer_gpu(k, 8, 4) for k in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [_layer_gpu(k, 2, n) for n in (1, 2, 4) for k in range(2)] == [0, 0, 0, 1, 0, 1]  # as k mod n
    graph = pe.load_benchmark("nmt-tiny", layers=4)
    problem = _problem(graph, "paper-2gpu")
    gpus = _gpus(problem.cluster)
    share = _flops_share(graph, expert(problem), problem.cluster.n_devices)
    for stack in ("encoder", "decoder"):
        placed = [int(np.argmax(share[f"{stack}/lstm_{k}"])) for k in range(4)]
        assert placed == [gpus[0], gpus[0], gpus[1], gpus[1]], stack


def test_balanced_chunks():
    part = _balanced_chunks(np.array([5.0, 1, 1, 1, 1, 1, 5]), 3)
    assert part.tolist() == [0, 1, 1, 1, 1, 1, 2]
    part = _balanced_chunks(np.ones(10), 4)
    assert part.tolist() == sorted(part.tolist()) and set(part.tolist()) == {0, 1, 2, 3}
    assert np.bincount(part).max() == 3
    assert _balanced_chunks(np.ones(2), 4).tolist() == [0, 3]


@pytest.mark.parametrize("benchmark", ["synthetic-tiny", "synthetic:3", "my_graph", ""])
def test_unknown_benchmark_raises_a_clear_error(benchmark):
    graph = pe.load_benchmark("synthetic-tiny")
    problem = Problem.make(graph, pe.load_cluster("paper-2gpu"))
    problem.benchmark = benchmark
    with pytest.raises(NoExpertPlacementError) as info:
        expert(problem)
    assert isinstance(info.value, pe.PlacementEnvError)
    message = str(info.value)
    assert repr(benchmark) in message
    assert all(name in message for name in EXPERT_BENCHMARKS)


def test_a_graph_without_the_models_scopes_raises():
    graph = pe.load_benchmark("synthetic-tiny")
    for benchmark in ("rnnlm", "nmt-tiny", "inception_v3", "dlrm"):
        with pytest.raises(NoExpertPlacementError, match="not the"):
            expert(_problem(graph, "paper-2gpu", benchmark=benchmark))


@pytest.mark.parametrize("cluster_name", ["k80-2gpu", "k80-4gpu"])
def test_dlrm_expert_shards_the_tables_greedily_and_keeps_the_dense_part_on_gpu_0(cluster_name):
    """Each table whole on one GPU, largest first onto the GPU whose tables hold the fewest bytes so far; the MLPs,
    the interaction and the loss on GPU 0. At paper scale that fits both K80 machines (16.1 GiB of tables) and runs
    within 2% of one die with unlimited memory."""
    graph, cluster = pe.load_benchmark("dlrm"), pe.load_cluster(cluster_name)
    placement = expert(_problem(graph, cluster_name, benchmark="dlrm"))
    gpus = _gpus(cluster)
    rows = np.array(pe.benchmarks.dlrm.PAPER["table_rows"])
    expected, load = {}, np.zeros(len(gpus))
    for k in np.argsort(-rows, kind="stable"):
        expected[k] = int(np.argmin(load))
        load[expected[k]] += rows[k]
    for k in np.flatnonzero(rows * 128 * 4 > GIB):  # the tables with groups of their own
        group = graph.group[graph.index_of(f"table_{k}/embeddings")]
        assert placement[group] == gpus[expected[k]], k
    for name in ("bottom_mlp/layer_0/matmul", "interaction/dots", "top_mlp/layer_4/matmul", "loss/mean_xent"):
        assert placement[graph.group[graph.index_of(name)]] == gpus[0], name
    evaluator = pe.Evaluator(graph, cluster, "sim")
    sharded, one_die = evaluator.batch(np.stack([placement, np.full(graph.n_groups, gpus[0])]))
    assert sharded.ok and one_die.failure == "oom"
    assert sharded.runtime_s < 1.02 * one_die.runtime_s


def test_cpu_only_groups_go_to_the_cpu(graphs, monkeypatch):
    problem = _problem(graphs["rnnlm-tiny"], "paper-2gpu")
    allowed = problem.allowed.copy()
    cpu_only = [0, 5]
    allowed[cpu_only, 1:] = False
    monkeypatch.setattr(Problem, "allowed", property(lambda self: allowed))
    placement = expert(problem)
    assert placement[cpu_only].tolist() == [0, 0]
    assert (placement[np.setdiff1d(np.arange(len(placement)), cpu_only)] > 0).all()


def test_expert_is_a_registered_method(graphs):
    assert METHODS["expert"] == "baselines.expert:expert"
    assert resolve_method("expert") is expert
    solution = solve("expert", _problem(graphs["nmt-tiny"], "paper-4gpu"))
    assert solution.evaluations == 0 and len(solution.placement) == graphs["nmt-tiny"].n_groups


@pytest.mark.slow
@pytest.mark.parametrize("cluster_name", ["paper-2gpu", "paper-4gpu"])
def test_paper_nmt_expert_fits_where_one_gpu_does_not(cluster_name):
    """Single-GPU NMT is out of memory on a 12 GiB GPU; the expert spreads it over the GPUs and runs."""
    graph = pe.load_benchmark("nmt")
    cluster = pe.load_cluster(cluster_name)
    problem = Problem.make(graph, cluster, benchmark="nmt")
    single = pe.evaluate(graph, cluster, resolve_method("single_gpu")(problem))
    m = pe.evaluate(graph, cluster, expert(problem))
    assert not single.ok and single.failure == "oom"
    assert m.ok, (m.failure, m.message, (m.peak_bytes / GIB).round(2).tolist())
    assert m.peak_bytes.max() < single.peak_bytes.max()
    assert (m.peak_bytes[_gpus(cluster)[:2]] > 0).all()
