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


@pytest.mark.parametrize("max_groups", [1, 3, 256])
def test_variables_past_a_gib_keep_groups_of_their_own(max_groups):
    """Two embedding tables of just over 1 GiB (LARGE_VARIABLES), read by cheap gathers into one sum: by FLOPs alone
    both would join the sum's group; they stay apart unless only one group is allowed."""
    import tensorflow as tf

    from placement_env.grouping import LARGE_VARIABLES

    rows = LARGE_VARIABLES // 4 + 1
    graph_ = tf.Graph()
    with graph_.as_default():
        ids = tf.zeros([8], tf.int32)
        tables = [tf.compat.v1.get_variable(f"table_{k}", [rows, 1]) for k in range(2)]
        small = tf.compat.v1.get_variable("small", [16, 1])
        total = tf.add_n([tf.gather(t, ids) for t in (*tables, small)], name="total")
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(total))
    graph = pe.from_tf(graph_, max_groups=max_groups)
    groups = {graph.group[graph.index_of(name)] for name in ("table_0", "table_1")}
    assert len(groups) == (1 if max_groups == 1 else 2)
    assert graph.n_groups <= max_groups
