"""List-scheduling baselines: HEFT, m-TOPO, m-ETF (baselines.list_scheduling)."""
import time
from types import SimpleNamespace

import numpy as np
import pytest

import placement_env as pe
from baselines import list_scheduling as ls
from placement_env.costs import OpCosts
from placement_env.problem import Problem, solve
from test_simulated import make_graph
from baselines.simple import single_gpu

METHODS = {"heft": ls.heft, "m_topo": ls.m_topo, "m_etf": ls.m_etf}


@pytest.fixture(scope="module")
def graphs():
    return {name: pe.load_benchmark(name) for name in ("rnnlm-tiny", "inception_v3-tiny", "synthetic-tiny")}


@pytest.mark.parametrize("cluster_name", ["paper-2gpu", "paper-4gpu"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_valid_placements(graphs, cluster_name, method):
    cluster = pe.load_cluster(cluster_name)
    for name, graph in graphs.items():
        problem = Problem.make(graph, cluster)
        placement = METHODS[method](problem)
        assert placement.shape == (graph.n_groups,) and placement.dtype == np.int64, name
        assert problem.allowed[np.arange(graph.n_groups), placement].all(), name
        assert problem.evaluations == 0  # cost-model heuristics spend no runtime evaluations
        assert pe.evaluate(graph, cluster, placement).ok, name
        solution = solve(method, Problem.make(graph, cluster))  # through the registry
        np.testing.assert_array_equal(solution.placement, placement)  # and deterministic


def test_respects_allowed_devices(graphs):
    """A group with no GPU kernel is never put on a GPU."""
    graph, cluster = graphs["rnnlm-tiny"], pe.load_cluster("paper-2gpu")
    problem = Problem.make(graph, cluster)
    allowed = problem.allowed.copy()
    allowed[::3, 1:] = False  # every third group: CPU only
    stub = SimpleNamespace(graph=graph, cluster=cluster, costs=problem.costs, allowed=allowed)
    for method in METHODS.values():
        placement = method(stub)
        assert allowed[np.arange(graph.n_groups), placement].all()
        assert (placement[::3] == 0).all() and (placement > 0).any()


def _small_gpus(graph, cluster_name, fraction):
    """``cluster_name`` with GPUs holding ``fraction`` of the graph's single-GPU peak memory."""
    cluster = pe.load_cluster(cluster_name)
    peak = pe.evaluate(graph, cluster, single_gpu(Problem.make(graph, cluster))).peak_bytes.max()
    spec = cluster.to_dict()
    for device in spec["devices"]:
        if device["kind"] == "GPU":
            device["memory_bytes"] = int(peak * fraction)
    return pe.load_cluster(spec)


@pytest.mark.parametrize("cluster_name", ["paper-2gpu", "paper-4gpu"])
@pytest.mark.parametrize("method", ["m_topo", "m_etf"])
def test_memory_aware_methods_fit_small_gpus(graphs, cluster_name, method):
    for name in ("rnnlm-tiny", "inception_v3-tiny"):
        graph = graphs[name]
        cluster = _small_gpus(graph, cluster_name, 0.6)
        problem = Problem.make(graph, cluster)
        assert pe.evaluate(graph, cluster, single_gpu(problem)).failure == "oom"
        placement = METHODS[method](problem)
        assert np.unique(placement).size > 1, name  # spread
        measurement = pe.evaluate(graph, cluster, placement)
        assert measurement.ok, (name, measurement.failure)
        assert (measurement.peak_bytes <= cluster.memory_bytes).all()


def test_memory_ledger_bounds_simulated_peak(graphs):
    """What the memory rule charges each device is never below the simulator's peak there."""
    cluster = pe.load_cluster("paper-4gpu")
    for graph in graphs.values():
        problem = Problem.make(graph, cluster)
        dag = ls.group_dag(problem)
        for method in METHODS.values():
            placement = method(problem)
            ledger = ls._MemoryLedger(dag)
            for g in range(graph.n_groups):
                ledger.place(g, int(placement[g]))
            peak = pe.evaluate(graph, cluster, placement).peak_bytes
            assert (peak <= ledger.used + 1).all()


def _problem_of(graph, seconds=1.0):
    """A problem of ``graph`` on paper-2gpu with every op costing ``seconds`` on every device, the CPU not
    allowed."""
    cluster = pe.load_cluster("paper-2gpu")
    allowed = np.zeros((graph.n_groups, cluster.n_devices), bool)
    allowed[:, 1:] = True
    costs = OpCosts(seconds=np.full((graph.n_ops, cluster.n_devices), seconds), source="test")
    return SimpleNamespace(graph=graph, cluster=cluster, costs=costs, allowed=allowed)


def _chains_problem(n_chains=2, length=4, seconds=1.0, nbytes=1000):
    """``n_chains`` independent chains of ``length`` ops, each op its own group, equal cost on the
    two GPUs of paper-2gpu (the CPU is not allowed)."""
    n = n_chains * length
    edges = [(c * length + i, c * length + i + 1, 0, nbytes) for c in range(n_chains) for i in range(length - 1)]
    return _problem_of(make_graph(n, edges, outputs=[[nbytes]] * n), seconds)


@pytest.mark.parametrize("method", ["heft", "m_etf"])
def test_independent_chains_split_across_devices(method):
    problem = _chains_problem()
    placement = METHODS[method](problem)
    chains = placement.reshape(2, 4)
    assert (chains == chains[:, :1]).all()  # each chain stays on one device
    assert set(chains[:, 0]) == {1, 2}  # the two chains on different GPUs


def test_group_dag_drops_back_edges_and_dedupes_copies():
    # groups: op 0 -> 0, ops 1, 2 -> 1, op 3 -> 2, op 4 -> 0; op 0's output is read by both ops of group 1, and
    # a control edge 3 -> 4 goes from group 2 back to group 0
    graph = make_graph(5, [(0, 1, 0, 1000), (0, 2, 0, 1000), (2, 3, 0, 1000), (3, 4, -1, 0)],
                       outputs=[[1000]] * 5, group=np.array([0, 1, 1, 2, 0]))
    dag = ls.group_dag(_problem_of(graph))
    assert [p.tolist() for p in dag.preds] == [[], [0], [1]]
    assert dag.pred_bytes[1].tolist() == [1000.0]  # op 0's output sent once to group 1
    assert dag.sources[0].tolist() == [2] and dag.source_bytes[0].tolist() == [0.0]  # control edge
    assert dag.memory.tolist() == [2000.0, 2000.0, 1000.0]  # each group's outputs (no resident bytes)


@pytest.mark.slow
def test_fast_on_nmt():
    graph, cluster = pe.load_benchmark("nmt"), pe.load_cluster("paper-4gpu")
    problem = Problem.make(graph, cluster)
    problem.costs  # the analytical costs are not the scheduler's time
    for name, method in METHODS.items():
        start = time.perf_counter()
        placement = method(problem)
        wall = time.perf_counter() - start
        print(f"{name} on nmt ({graph.n_groups} groups): {wall * 1e3:.1f} ms")
        assert placement.shape == (graph.n_groups,)
        assert wall < 5.0  # typically tens of milliseconds
