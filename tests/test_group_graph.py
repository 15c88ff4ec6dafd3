"""The core's group graph (placement_env.groupgraph): one builder for every method that reads a grouped graph."""
import numpy as np
import pytest

import placement_env as pe
from placement_env.costs import OpCosts
from placement_env.evaluation import costs_for
from test_simulated import make_graph


@pytest.fixture(scope="module")
def tiny():
    graph, cluster = pe.load_benchmark("rnnlm-tiny"), pe.load_cluster("paper-2gpu")
    return graph, cluster, costs_for(graph, cluster)


def group_edges_by_loop(graph):
    """{(src group, dst group): (bytes, some tensor crosses)} from the op edges one at a time."""
    sent: dict[tuple[int, int], set[int]] = {}
    for src, dst, output in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_src_output.tolist()):
        a, b = int(graph.group[src]), int(graph.group[dst])
        if a != b:
            tensors = sent.setdefault((a, b), set())
            if output >= 0:
                tensors.add(int(graph.output_ptr[src]) + output)
    data = {pair for pair, _ in sent.items()
            if any(graph.group[s] == pair[0] and graph.group[d] == pair[1] and o >= 0
                   for s, d, o in zip(graph.edge_src, graph.edge_dst, graph.edge_src_output))}
    return {pair: (sum(int(graph.output_bytes[t]) for t in tensors), pair in data)
            for pair, tensors in sorted(sent.items())}


def test_edges_count_each_tensor_once_per_destination_group(tiny):
    graph, cluster, costs = tiny
    groups = pe.group_graph(graph, cluster, costs)
    expected = group_edges_by_loop(graph)
    assert list(zip(groups.src.tolist(), groups.dst.tolist())) == list(expected)
    assert groups.bytes.tolist() == [volume for volume, _ in expected.values()]
    assert groups.data.tolist() == [data for _, data in expected.values()]
    assert groups.n_edges == 278 and groups.data.sum() == 149
    for array in (groups.src, groups.dst, groups.bytes, groups.data, groups.seconds, groups.output_bytes):
        assert not array.flags.writeable


def test_per_group_seconds_and_bytes(tiny):
    graph, cluster, costs = tiny
    groups = pe.group_graph(graph, cluster, costs)
    for g in (0, 5, graph.n_groups - 1):
        ops = graph.ops_of_group(g)
        np.testing.assert_allclose(groups.seconds[g], costs.seconds[ops].sum(axis=0))
        assert groups.output_bytes[g] == graph.op_output_bytes[ops].sum()
        assert groups.resident_bytes[g] == graph.persistent_bytes[ops].sum()
    assert (groups.memory_bytes == groups.resident_bytes + groups.output_bytes).all()
    assert groups.device_kinds == ("CPU", "GPU", "GPU") and groups.n_devices == 3
    np.testing.assert_array_equal(groups.kind_seconds("GPU"), groups.seconds[:, 1])
    np.testing.assert_array_equal(groups.kind_seconds("CPU"), groups.seconds[:, 0])
    gpus_only = pe.Cluster(name="gpus", devices=cluster.devices[1:], bandwidth=cluster.bandwidth[1:, 1:],
                           latency=cluster.latency[1:, 1:])
    assert pe.group_graph(graph, gpus_only, costs.seconds[:, 1:]).kind_seconds("CPU") is None


def test_undirected_view_is_symmetric_with_summed_bytes():
    # groups 0 -> 1 (107 bytes), 0 -> 2 (control only), 1 <-> 2 (8 bytes each way)
    graph = make_graph(6, [(0, 2, 0, 100), (0, 3, 0, 100), (0, 3, 1, 7), (1, 4, -1, 0), (3, 4, 0, 8), (4, 5, 0, 8)],
                       outputs=[[100, 7], [8], [8], [8], [8], [8]], group=np.array([0, 0, 1, 1, 2, 1]))
    cluster = pe.load_cluster("paper-2gpu")
    undirected = pe.group_graph(graph, cluster, np.zeros((6, 3))).undirected
    assert undirected.n_groups == 3
    assert undirected.indptr.tolist() == [0, 2, 4, 6]
    assert undirected.indices.tolist() == [1, 2, 0, 2, 0, 1]
    assert undirected.bytes.tolist() == [107, 0, 107, 16, 0, 16]
    assert undirected.edges.tolist() == [1, 1, 1, 2, 1, 2]


def test_built_once_per_graph_cluster_and_costs(tiny):
    graph, cluster, costs = tiny
    assert pe.group_graph(graph, cluster, costs) is pe.group_graph(graph, cluster, costs)
    assert pe.group_graph(graph, cluster, costs.seconds) is pe.group_graph(graph, cluster, costs.seconds)
    other = OpCosts(seconds=costs.seconds * 2, source="doubled")
    doubled = pe.group_graph(graph, cluster, other)
    np.testing.assert_allclose(doubled.seconds, 2 * pe.group_graph(graph, cluster, costs).seconds)
    writable = np.array(costs.seconds)  # may change after the call: built afresh each time
    assert pe.group_graph(graph, cluster, writable) is not pe.group_graph(graph, cluster, writable)


def test_bad_input_is_a_clear_error(tiny):
    graph, cluster, costs = tiny
    with pytest.raises(pe.ArgumentError, match=r"costs: float64 array of shape \(3, 3\); expected OpCosts or finite"):
        pe.group_graph(graph, cluster, np.zeros((3, 3)))
    bad = np.array(costs.seconds)
    bad[0, 0] = np.nan
    with pytest.raises(pe.ArgumentError, match="expected OpCosts or finite seconds >= 0"):
        pe.group_graph(graph, cluster, bad)
    with pytest.raises(pe.ArgumentError, match="graph is a str; expected an OpGraph"):
        pe.group_graph("rnnlm-tiny", cluster, costs)
    with pytest.raises(pe.ArgumentError, match="cluster is a str; expected a Cluster"):
        pe.group_graph(graph, "paper-2gpu", costs)


def test_methods_read_the_same_group_graph(tiny):
    """The features, the partitioners and the list schedulers see the group graph's numbers."""
    from baselines import list_scheduling, partition

    graph, cluster, costs = tiny
    problem = pe.Problem.make(graph, cluster)
    groups = pe.group_graph(graph, cluster, problem.costs)
    dag = list_scheduling.group_dag(problem)
    np.testing.assert_array_equal(dag.seconds, groups.seconds)
    np.testing.assert_array_equal(dag.memory, groups.memory_bytes)
    assert sum(b.sum() for b in dag.source_bytes) == groups.bytes.sum()
    source = partition.source_graph(problem)
    np.testing.assert_array_equal(source.adjncy, groups.undirected.indices)
    fields = pe.graph_features(graph, cluster, costs.seconds, graph.n_groups).fields
    largest = float(cluster.memory_bytes.max())
    np.testing.assert_allclose(fields["memory"][:, 1], groups.output_bytes / largest, rtol=1e-6)
    top_in = np.where(fields["neighbours"][:, 0] > 0, np.round(fields["neighbours"][:, 0] * graph.n_groups) - 1, -1)
    for g in np.flatnonzero(top_in >= 0)[:20]:  # the heaviest sender to each group, counted once per tensor
        sent = groups.bytes[(groups.dst == g) & groups.data]
        assert fields["neighbour_bytes"][g, 0] == pytest.approx(np.log10(1 + sent.max()) / 12, rel=1e-6)
