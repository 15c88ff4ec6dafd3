"""Graphs with ops that act outside the training step are refused before any measured worker sees them."""
import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env.runtime.measured import MeasuredRuntime
from placement_env.runtime.side_effects import side_effect_nodes


def _step_that_writes(path):
    """A TF1 training step that also writes ``path`` and prints, every step."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.random.uniform([8, 16], name="x")
        w = tf.compat.v1.get_variable("w", [16, 4])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        write = tf.io.write_file(str(path), tf.strings.as_string(loss), name="leak")
        shown = tf.compat.v1.Print(loss, [loss], name="shout")
        with tf.control_dependencies([write, shown]):
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        tf.compat.v1.add_to_collection("train_op", train)
        tf.compat.v1.global_variables_initializer()
    return graph


def test_a_graph_that_writes_a_file_is_refused_before_any_worker_starts(tmp_path, local2):
    target = tmp_path / "written_by_the_graph.txt"
    graph = pe.from_tf(_step_that_writes(target))
    runtime = MeasuredRuntime(local2, timeout_s=60)
    try:
        with pytest.raises(pe.SideEffectOpError, match=r"'leak' \(WriteFile: writes host files\).*'shout' "
                                                         r"\(Print: prints\).*isolates the network only") as error:
            runtime.measure(graph, np.zeros(graph.n_groups, dtype=int))
        assert {(name, op) for name, op, _ in error.value.ops} == {("leak", "WriteFile"), ("shout", "Print")}
        assert not target.exists()
        assert runtime._workers is None or not runtime._workers.running  # nothing was started or sent
    finally:
        runtime.close()


def test_ops_inside_library_functions_and_file_reads_are_found():
    graph = tf.Graph()
    with graph.as_default():
        @tf.function
        def save(value):
            tf.io.write_file("/tmp/never-written", tf.strings.as_string(value))
            return value + 1.0

        save(tf.constant(1.0))
        tf.io.read_file("/etc/hostname", name="peek")
    found = side_effect_nodes(graph.as_graph_def().SerializeToString())
    assert ("peek", "ReadFile", "reads host files") in found
    assert any(name.endswith("/WriteFile") and op == "WriteFile" for name, op, _ in found), found


@pytest.mark.parametrize("name", ["rnnlm-tiny", "synthetic-tiny"])
def test_benchmarks_have_no_ops_that_act_outside_the_step(name):
    assert side_effect_nodes(pe.load_benchmark(name).graph_def) == ()
