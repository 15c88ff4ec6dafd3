"""Measured workers run only ops on the allowlist of a training step's ops, and an op let past it still
cannot reach the host's files: the workers' only writable place is a private tmpfs, and the host's tree
is not in their root."""
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env.runtime.allowlist import (ALLOWLIST_FILE, NOT_LISTED, allowlist, check_allow_ops,
                                             refuse_unlisted_ops, unlisted_nodes)
from placement_env.runtime.measured import MeasuredRuntime
from tf_helpers import needs_netns

REPOSITORY = Path(__file__).resolve().parents[1]


def _training_step(extra, name="step"):
    """A TF1 training step whose train op also depends on the ops ``extra(loss)`` returns."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.random.uniform([8, 16], name="x")
        w = tf.compat.v1.get_variable("w", [16, 4])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        with tf.control_dependencies(extra(loss)):
            train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        tf.compat.v1.add_to_collection("train_op", train)
        tf.compat.v1.global_variables_initializer()
    return pe.from_tf(graph)


def _writes_and_prints(path):
    return lambda loss: [tf.io.write_file(str(path), tf.constant("x"), name="leak"),
                         tf.compat.v1.Print(loss, [loss], name="shout")]


def _writes(path):
    return lambda loss: [tf.io.write_file(str(path), tf.constant("x"))]


def _reads(path):
    """The file's length checked by an Assert (stateful, so the read is not pruned as an unused stateless op)."""
    return lambda loss: [tf.debugging.assert_non_negative(tf.strings.length(tf.io.read_file(str(path))))]


def _hidden_dataset_graph(inner):
    """A graph that runs the dataset ``inner`` from its serialised graph in a string constant (DatasetFromGraph)."""
    serialized = tf.raw_ops.DatasetToGraphV2(input_dataset=inner._variant_tensor).numpy()
    graph = tf.Graph()
    with graph.as_default():
        hidden = tf.constant(serialized, name="innocent_string")
        variant = tf.raw_ops.DatasetFromGraph(graph_def=hidden, name="run_hidden")
        tf.raw_ops.DatasetCardinality(input_dataset=variant, name="touch")
    return graph.as_graph_def().SerializeToString()


def test_a_graph_that_writes_a_file_is_refused_before_any_worker_starts(tmp_path, local2):
    target = tmp_path / "written_by_the_graph.txt"
    graph = _training_step(_writes_and_prints(target))
    runtime = MeasuredRuntime(local2, timeout_s=60)
    try:
        with pytest.raises(pe.SideEffectOpError, match=r"'leak' \(WriteFile: host files\).*'shout' "
                                                         r"\(Print: summaries and printing\).*allow_ops") as error:
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
    found = unlisted_nodes(graph.as_graph_def().SerializeToString())
    assert ("peek", "ReadFile", "host files") in found
    assert any(name.endswith("/WriteFile") and op == "WriteFile" for name, op, _ in found), found


def test_hidden_dataset_write_and_read_are_refused(tmp_path):
    cache = _hidden_dataset_graph(tf.data.Dataset.range(3).cache(str(tmp_path / "cache")))
    with pytest.raises(pe.SideEffectOpError, match=r"'run_hidden' \(DatasetFromGraph: datasets\)"):
        refuse_unlisted_ops(cache)
    # even with DatasetFromGraph trusted by name, the graph it carries is checked like the outer one
    inner = {op: why for name, op, why in unlisted_nodes(cache, frozenset({"DatasetFromGraph"}))
             if name.startswith("run_hidden/")}
    assert inner.get("CacheDatasetV2") == "datasets", inner
    (tmp_path / "lines.txt").write_text("secret\n")
    text = _hidden_dataset_graph(tf.data.TextLineDataset(str(tmp_path / "lines.txt")))
    with pytest.raises(pe.SideEffectOpError, match="DatasetFromGraph"):
        refuse_unlisted_ops(text)
    inner_ops = {op for name, op, _ in unlisted_nodes(text, frozenset({"DatasetFromGraph"}))}
    assert "TextLineDataset" in inner_ops
    assert not list(tmp_path.glob("cache*"))  # nothing ran


def test_vocabulary_file_sampler_is_refused():
    graph = tf.Graph()
    with graph.as_default():
        classes = tf.constant([[1]], dtype=tf.int64)
        tf.raw_ops.FixedUnigramCandidateSampler(true_classes=classes, num_true=1, num_sampled=2, unique=True,
                                                range_max=10, vocab_file="/etc/passwd", name="sampler")
    found = unlisted_nodes(graph.as_graph_def().SerializeToString())
    assert ("sampler", "FixedUnigramCandidateSampler", "host files") in found


def test_a_call_that_names_a_bare_op_is_checked():
    graph = tf.Graph()
    with graph.as_default():
        tf.constant("x", name="contents")
    graph_def = graph.as_graph_def()
    call = graph_def.node.add(name="call", op="StatefulPartitionedCall")
    call.input.extend(["contents", "contents"])
    call.attr["f"].func.name = "WriteFile"
    found = unlisted_nodes(graph_def.SerializeToString())
    assert ("call (calls it in attribute 'f')", "WriteFile", "host files") in found


def test_unknown_ops_are_refused_as_not_listed():
    graph = tf.Graph()
    with graph.as_default():
        tf.strings.upper(tf.constant("a"), name="shout_text")
    assert unlisted_nodes(graph.as_graph_def().SerializeToString()) == (("shout_text", "StringUpper", NOT_LISTED),)


@pytest.mark.parametrize("bad, message", [("WriteFile", "not one string"), ([3], "not an op type name"),
                                          (["NoSuchOp"], "not a TF op"), (None, "collection")])
def test_allow_ops_must_name_registered_op_types(bad, message):
    with pytest.raises(ValueError, match=message):
        check_allow_ops(bad)
    assert check_allow_ops(["WriteFile"]) == frozenset({"WriteFile"})


def test_the_shipped_allowlist_is_what_the_registry_gives():
    """The file is derived from this TF's op registry (``python -m experiments.op_allowlist --write``);
    a TF that registers or moves ops fails here until the file is derived again and reviewed."""
    from experiments.op_allowlist import derive, registered_ops

    shipped = json.loads(ALLOWLIST_FILE.read_text())
    derived = derive()
    assert shipped["allowed"] == derived["allowed"] and shipped["refused"] == derived["refused"]
    allowed, refused = allowlist()
    assert not set(allowed) & set(refused)
    assert set(allowed) | set(refused) <= set(registered_ops())
    for never in ("WriteFile", "ReadFile", "PrintV2", "PyFunc", "DatasetFromGraph", "FixedUnigramCandidateSampler",
                  "ImmutableConst", "SaveV2", "RestoreV2", "InitializeTableFromTextFileV2", "Abort", "RemoteCall"):
        assert never in refused and never not in allowed


def test_no_allowed_op_names_a_file_or_an_address():
    from tensorflow.python.framework import op_def_registry

    allowed, _ = allowlist()
    words = {"file", "filename", "filepath", "path", "dir", "directory", "url", "urls", "address", "pattern"}
    for op in allowed:
        definition = op_def_registry.get(op)
        names = [a.name for a in definition.attr] + [a.name for a in definition.input_arg]
        assert not [n for n in names if words & set(n.lower().split("_"))], (op, names)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in pe.benchmark_names() if n.endswith("-tiny")])
def test_every_op_of_the_benchmarks_is_allowed(name):
    """A new op type in a benchmark that the allowlist does not classify fails here."""
    assert unlisted_nodes(pe.load_benchmark(name).graph_def) == ()


# ---- the second layer: what an op let past the allowlist can reach ----

@pytest.mark.slow
@needs_netns
def test_ops_let_past_the_allowlist_cannot_touch_host_files(tmp_path):
    in_tmp = tmp_path / "escaped.txt"  # under the host's /tmp: the workers' /tmp is their own tmpfs
    in_repository = REPOSITORY / "tests" / f"escaped-{tmp_path.name}.txt"  # the workers' root is read-only
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    cluster = pe.load_cluster("local:1")
    with MeasuredRuntime(cluster, timeout_s=120, retries=0, allow_ops=("WriteFile", "ReadFile", "StringLength")) as runtime:
        def measure(extra):
            graph = _training_step(extra)
            return runtime.measure(graph, np.zeros(graph.n_groups, dtype=int))

        inside = measure(_writes(in_tmp))
        assert inside.ok, inside.message  # written to the private tmpfs, which the host never sees
        hello = runtime.workers.hello
        assert hello["filesystem"]["writable"] == ["/tmp"] and not hello["filesystem"]["host_files"]
        read_only = measure(_writes(in_repository))
        assert not read_only.ok and "read-only" in read_only.message.lower(), read_only
        for path in (secret, "/etc/passwd"):
            unread = measure(_reads(path))
            assert not unread.ok and "no such file" in unread.message.lower(), unread.message
            assert "host secret" not in unread.message and "root:" not in unread.message
    assert not in_tmp.exists() and not in_repository.exists()
