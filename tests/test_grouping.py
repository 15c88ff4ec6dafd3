import numpy as np
import pytest

import placement_env as pe
from placement_env.grouping import group_ops
from placement_env.opgraph import CPU_ONLY


@pytest.fixture(scope="module")
def synthetic():
    return pe.load_benchmark("synthetic-tiny")


@pytest.mark.parametrize("max_groups", [1, 2, 7, 40, 10_000])
def test_every_op_in_one_group_and_cap_respected(synthetic, max_groups):
    graph = group_ops(synthetic, max_groups=max_groups)
    assert graph.group.shape == (graph.n_ops,)
    assert 1 <= graph.n_groups <= max_groups
    assert np.bincount(graph.group).min() >= 1  # numbered without gaps
    # groups are numbered by their first op
    firsts = [graph.ops_of_group(g)[0] for g in range(graph.n_groups)]
    assert firsts == sorted(firsts)


def test_hard_components_never_split(synthetic):
    for max_groups in (3, 30, 300):
        graph = group_ops(synthetic, max_groups=max_groups)
        for component in np.unique(graph.colocation):
            assert np.unique(graph.group[graph.colocation == component]).size == 1


def test_deterministic(synthetic):
    a = group_ops(synthetic, max_groups=17)
    b = group_ops(pe.load_benchmark("synthetic-tiny"), max_groups=17)
    assert np.array_equal(a.group, b.group)


def test_heuristics_merge_single_consumers(synthetic):
    graph = group_ops(synthetic, max_groups=synthetic.n_ops)
    grouping = graph.meta["grouping"]
    assert grouping["after_heuristics"] < grouping["colocation_components"]
    data = ~graph.is_control_edge
    consumers = {}
    for s, d in zip(graph.edge_src[data].tolist(), graph.edge_dst[data].tolist()):
        consumers.setdefault(s, set()).add(d)
    single = [(s, next(iter(c))) for s, c in consumers.items() if len(c) == 1]
    joined = sum(graph.group[s] == graph.group[d] for s, d in single)
    assert joined / len(single) > 0.5


def test_device_kinds_are_not_mixed_when_there_is_room(tf1_mlp):
    import tensorflow as tf

    graph_ = tf.Graph()
    with graph_.as_default():
        w = tf.compat.v1.get_variable("w", [64, 64])
        loss = tf.reduce_sum(tf.matmul(tf.ones([32, 64]), w))
        check = tf.raw_ops.Assert(condition=tf.math.is_finite(loss), data=[loss], name="check")
        with tf.control_dependencies([check]):
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    graph = pe.from_tf(graph_, max_groups=4)
    cpu_group = graph.group[graph.index_of("check")]
    assert graph.group_device_mask[cpu_group] == CPU_ONLY
    assert graph.group[graph.index_of("MatMul")] != cpu_group
    assert graph.group_device_mask[graph.group[graph.index_of("MatMul")]] == 0b11


@pytest.mark.parametrize("bad", [0, -3, 2.5, "256", True])
def test_bad_max_groups(synthetic, bad):
    with pytest.raises(ValueError, match="max_groups"):
        group_ops(synthetic, max_groups=bad)
