"""Exporting a placement as a pinned TF graph, and applying one to a user's graph in memory."""
import warnings

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

import placement_env as pe
from placement_env import InvalidPlacementError
from placement_env.cluster import Cluster, Device
from placement_env.tf_import.export import (GraphMismatchError, apply_placement, export_placed_graph,
                                            op_tf_devices, placed_graph_def)


def spec(device: str) -> tf.DeviceSpec:
    return tf.DeviceSpec.from_string(device)


def parse(data: bytes) -> tf.compat.v1.GraphDef:
    return tf.compat.v1.GraphDef.FromString(data)


def valid_placement(graph, cluster, seed=0):
    """A random placement that puts every group on a device kind it has kernels for."""
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, cluster.n_devices, graph.n_groups)
    cpu = next(i for i, d in enumerate(cluster.devices) if d.kind == "CPU")
    placement[(graph.group_device_mask & 0b10) == 0] = cpu
    return placement


def expected_device(graph, cluster, placement, name):
    return cluster.devices[placement[graph.group[graph.index_of(name)]]].tf_device


def test_every_node_of_the_step_gets_its_groups_device(tiny, paper2):
    placement = valid_placement(tiny, paper2)
    graph_def = parse(placed_graph_def(tiny, paper2, placement))
    nodes = {node.name: node for node in graph_def.node}
    assert set(tiny.op_names.tolist()) <= set(nodes)
    for name in tiny.op_names.tolist():
        assert nodes[name].device == expected_device(tiny, paper2, placement, name), name
    tf_devices = {d.tf_device for d in paper2.devices}
    assert all(node.device in tf_devices for node in graph_def.node)  # no node is left unplaced
    assert op_tf_devices(tiny, paper2, placement).tolist() == [nodes[n].device for n in tiny.op_names.tolist()]


def test_initialisers_follow_their_variable_and_the_rest_goes_to_the_cpu(tiny, paper2):
    placement = np.full(tiny.n_groups, 2)  # every group on gpu:1
    nodes = {n.name: n for n in parse(placed_graph_def(tiny, paper2, placement)).node}
    gpu1, cpu = paper2.devices[2].tf_device, paper2.devices[0].tf_device
    variables = [n for n, t in zip(tiny.op_names.tolist(), tiny.op_types.tolist()) if t == "VarHandleOp"]
    assert variables
    for variable in variables:
        assert nodes[f"{variable}/Assign"].device == gpu1  # resource consumer: with its variable
        assert nodes[f"{variable}/IsInitialized/VarIsInitializedOp"].device == gpu1
    colocated = [n for n in nodes.values()
                 if n.name not in set(tiny.op_names.tolist()) and "_class" in n.attr]
    assert colocated and all(n.device == gpu1 for n in colocated)
    assert nodes[tiny.init_op].device == cpu  # nothing ties the init NoOp to a device: the host
    # co-location attributes are kept
    assert any("_class" in n.attr for n in nodes.values())


def test_serialisation_is_deterministic_and_leaves_the_opgraph_alone(tiny, paper2):
    placement = valid_placement(tiny, paper2, seed=3)
    before = tiny.graph_def
    assert placed_graph_def(tiny, paper2, placement) == placed_graph_def(tiny, paper2, placement.tolist())
    assert tiny.graph_def == before
    other = valid_placement(tiny, paper2, seed=4)
    assert placed_graph_def(tiny, paper2, other) != placed_graph_def(tiny, paper2, placement)


def test_invalid_placement_is_rejected(tiny, paper2):
    with pytest.raises(InvalidPlacementError):
        placed_graph_def(tiny, paper2, np.zeros(tiny.n_groups + 1, int))
    with pytest.raises(InvalidPlacementError):
        placed_graph_def(tiny, paper2, np.full(tiny.n_groups, 3))


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_export_writes_binary_or_text_by_suffix(tiny, paper2, tmp_path, suffix):
    placement = valid_placement(tiny, paper2, seed=1)
    path = export_placed_graph(tiny, paper2, placement, tmp_path / "sub" / f"placed{suffix}")
    assert path == tmp_path / "sub" / f"placed{suffix}" and path.is_file()
    data = path.read_bytes()
    if suffix == ".pb":
        graph_def = parse(data)
    else:
        graph_def = text_format.Parse(data.decode(), tf.compat.v1.GraphDef())
    assert graph_def.SerializeToString(deterministic=True) == placed_graph_def(tiny, paper2, placement)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    assert {op.name for op in tf_graph.get_operations()} == {n.name for n in graph_def.node}


@pytest.mark.parametrize("name", ["placed.txt", "placed", "placed.pb.gz"])
def test_export_rejects_an_unknown_suffix(tiny, paper2, tmp_path, name):
    with pytest.raises(ValueError, match=r"\.pb, \.pbtxt") as info:
        export_placed_graph(tiny, paper2, np.zeros(tiny.n_groups, int), tmp_path / name)
    suffix = name.rpartition(".")[2] if "." in name else ""
    assert repr(f".{suffix}" if suffix else "") in str(info.value)
    assert not (tmp_path / name).exists()


def test_reimported_graph_reads_back_the_devices_of_a_worker_cluster(tiny):
    cluster = pe.load_cluster("local:2")  # /job:worker/replica:0/task:{0,1}/device:CPU:0
    placement = np.arange(tiny.n_groups) % 2
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(parse(placed_graph_def(tiny, cluster, placement)), name="")
    ops = {op.name: op for op in tf_graph.get_operations()}
    for name in tiny.op_names.tolist():
        assert spec(ops[name].device) == spec(expected_device(tiny, cluster, placement, name)), name
    assert {spec(op.device).task for op in ops.values()} == {0, 1}


def test_exported_graph_runs_with_soft_placement(tiny, paper2):
    """On a machine without two GPUs, soft placement maps the pins onto what exists: the graph is valid."""
    placement = valid_placement(tiny, paper2, seed=2)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(parse(placed_graph_def(tiny, paper2, placement)), name="")
    feed = {f"{f['name']}:0": np.zeros(f["shape"], f["dtype"]) for f in tiny.feeds}
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    with tf.compat.v1.Session(graph=tf_graph, config=config) as session:
        session.run(tiny.init_op)
        session.run(tiny.train_op, feed)


@pytest.mark.skipif(not tf.config.list_physical_devices("GPU"), reason="needs a GPU")
def test_exported_graph_runs_pinned_on_a_real_gpu(tiny):
    """With a GPU: no soft placement, every op exactly where the placement puts it."""
    base = dict(peak_flops=1e12, memory_bandwidth=1e11, memory_bytes=2**33, concurrency=1)
    devices = (Device(name="cpu:0", kind="CPU", tf_device="/job:localhost/replica:0/task:0/device:CPU:0", **base),
               Device(name="gpu:0", kind="GPU", tf_device="/job:localhost/replica:0/task:0/device:GPU:0", **base))
    cluster = Cluster("cpu+gpu", devices, [[np.inf, 1e10], [1e10, np.inf]], [[0, 1e-5], [1e-5, 0]])
    placement = valid_placement(tiny, cluster, seed=5)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.compat.v1.import_graph_def(parse(placed_graph_def(tiny, cluster, placement)), name="")
    feed = {f"{f['name']}:0": np.zeros(f["shape"], f["dtype"]) for f in tiny.feeds}
    config = tf.compat.v1.ConfigProto(allow_soft_placement=False)
    with tf.compat.v1.Session(graph=tf_graph, config=config) as session:
        session.run(tiny.init_op)
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        session.run(tiny.train_op, feed, options=options, run_metadata=metadata)
    kinds = {stats.device.rsplit("/", 1)[-1].split(":")[1] for stats in metadata.step_stats.dev_stats
             if "/device:" in stats.device}
    assert {"CPU", "GPU"} <= {k.upper() for k in kinds}


# ---- apply_placement on the user's own graph ----------------------------------------------------


def test_apply_placement_on_a_tf1_graph_sets_the_devices(tf1_mlp, paper2):
    tf_graph, train, init = tf1_mlp
    graph = pe.from_tf(tf_graph)
    placement = valid_placement(graph, paper2, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every op of the OpGraph is found: no warning
        assert apply_placement(tf_graph, graph, paper2, placement) is tf_graph
    ops = {op.name: op for op in tf_graph.get_operations()}
    names = set(graph.op_names.tolist())
    for name in names & set(ops):
        assert spec(ops[name].device) == spec(expected_device(graph, paper2, placement, name)), name
    outside = [op for op in ops.values() if op.name not in names]
    assert outside and all(op.device == "" for op in outside)  # ops outside the step are left alone
    assert ops[init].device == ""
    # the placed graph still runs (soft placement for the GPUs this machine may lack)
    with tf.compat.v1.Session(graph=tf_graph, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as s:
        s.run(init)
        s.run(train)


def test_apply_placement_on_a_graph_def_returns_a_placed_copy(tf1_mlp, paper2):
    tf_graph, _, _ = tf1_mlp
    graph = pe.from_tf(tf_graph)
    placement = valid_placement(graph, paper2, seed=8)
    original = tf_graph.as_graph_def()
    before = original.SerializeToString(deterministic=True)
    placed = apply_placement(original, graph, paper2, placement)
    assert isinstance(placed, tf.compat.v1.GraphDef) and placed is not original
    assert original.SerializeToString(deterministic=True) == before
    names = set(graph.op_names.tolist())
    for node in placed.node:
        if node.name in names:
            assert node.device == expected_device(graph, paper2, placement, node.name)
        else:
            assert node.device == ""
    as_bytes = apply_placement(before, graph, paper2, placement)
    assert as_bytes == placed.SerializeToString(deterministic=True)


def test_apply_placement_to_the_wrong_graph_is_a_clear_error(tf1_mlp, tiny, paper2):
    tf_graph, _, _ = tf1_mlp
    with pytest.raises(GraphMismatchError, match=r"only \d+ of the \d+ ops of OpGraph 'rnnlm-tiny'"):
        apply_placement(tf_graph, tiny, paper2, np.zeros(tiny.n_groups, int))
    with pytest.raises(GraphMismatchError):
        apply_placement(tf_graph.as_graph_def(), tiny, paper2, np.zeros(tiny.n_groups, int))
    with pytest.raises(TypeError, match="tf.Graph"):
        apply_placement("not a graph", tiny, paper2, np.zeros(tiny.n_groups, int))
    with pytest.raises(pe.GraphImportError):
        apply_placement(b"\xff\xff garbage", tiny, paper2, np.zeros(tiny.n_groups, int))


def test_apply_placement_warns_when_only_part_of_the_graph_matches(tf1_mlp, paper2):
    tf_graph, _, _ = tf1_mlp
    graph = pe.from_tf(tf_graph)
    partial = tf.compat.v1.GraphDef()
    nodes = tf_graph.as_graph_def().node
    partial.node.extend(n for n in nodes if not n.name.startswith("gradients/") or n.name.endswith("/Shape"))
    with pytest.raises(GraphMismatchError):  # most of the step missing: the wrong graph
        apply_placement(partial, graph, paper2, np.zeros(graph.n_groups, int))
    partial = tf.compat.v1.GraphDef()
    dropped = graph.op_names[graph.op_types == "MatMul"][0]
    partial.node.extend(n for n in nodes if n.name != dropped)
    with pytest.warns(UserWarning, match="not in the target GraphDef"):
        placed = apply_placement(partial, graph, paper2, np.zeros(graph.n_groups, int))
    assert all(n.device == paper2.devices[0].tf_device for n in placed.node if n.name in set(graph.op_names.tolist()))


def test_exported_graph_imports_back_with_the_same_step(tmp_path):
    graph = pe.load_benchmark("rnnlm-tiny")
    cluster = pe.load_cluster("paper-2gpu")
    path = export_placed_graph(graph, cluster, np.ones(graph.n_groups, dtype=np.int64), tmp_path / "placed.pb")
    again = pe.from_tf(str(path))
    assert again.n_ops == graph.n_ops and sorted(again.op_names.tolist()) == sorted(graph.op_names.tolist())
