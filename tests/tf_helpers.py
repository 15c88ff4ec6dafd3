"""Helpers for tests that look at the TF side of an imported OpGraph."""
import os

import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe


def tf_graph_of(graph: pe.OpGraph) -> tf.Graph:
    """The TF graph an OpGraph carries, imported into a fresh tf.Graph."""
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(graph.graph_def)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return tf_graph


def run_step(graph: pe.OpGraph, steps: int = 2) -> None:
    """Execute the imported GraphDef on its own: initialise, then run the step."""
    feed = {f"{f['name']}:0": np.zeros(f["shape"], f["dtype"]) for f in graph.feeds}
    with tf.compat.v1.Session(graph=tf_graph_of(graph)) as session:
        session.run(graph.init_op)
        for _ in range(steps):
            session.run(graph.train_op, feed)


def assert_hard_constraints(graph: pe.OpGraph) -> None:
    """Every `_class` loc:@ target and every resource/ref producer shares its consumer's group."""
    ops = {op.name: op for op in tf_graph_of(graph).get_operations()}
    names = graph.op_names.tolist()
    index = {name: i for i, name in enumerate(names)}
    for i, name in enumerate(names):
        op = ops[name]
        try:
            classes = op.get_attr("_class")
        except ValueError:
            classes = []
        for target in classes:
            j = index.get(target.decode()[len("loc:@"):])
            if j is not None:
                assert graph.group[j] == graph.group[i], (name, target)
        for tensor in op.inputs:
            if tensor.dtype.base_dtype == tf.resource or tensor.dtype._is_ref_dtype:
                assert graph.group[index[tensor.op.name]] == graph.group[i], (name, tensor.name)
    assert np.bincount(graph.group).min() >= 1 and len(graph.group) == graph.n_ops


def _netns_allowed() -> bool:
    from placement_env.runtime.workers import unshare_command

    return bool(unshare_command()[0])


needs_netns = pytest.mark.skipif(not _netns_allowed(), reason="no private namespaces and root for workers (unshare) on this machine")


def live_processes_where(field: int, value: int) -> list[int]:
    """Pids of live processes whose /proc stat field (1 = parent pid, 2 = process group) is ``value``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[field]) == value and fields[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found


def child_pids(pid: int) -> list[int]:
    """Pids of the live children of ``pid``."""
    return live_processes_where(1, pid)


def tensorboard_scalars(directory):
    """{tag: [(step, value), ...]} from the event files in ``directory``."""
    scalars = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return scalars
