import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env import GraphImportError, NoTrainingOpError, UnknownShapeError
from placement_env.opgraph import CPU_ONLY
from tf_helpers import assert_hard_constraints, run_step


def test_tf1_graph_uses_train_op_collection_and_counts_bytes(tf1_mlp):
    tf_graph, train_op, _ = tf1_mlp
    graph = pe.from_tf(tf_graph, max_groups=8)
    assert graph.meta["source"] == "tf.Graph"
    assert train_op in graph.op_names.tolist()
    assert "init" not in graph.op_names.tolist()  # initialisers are not part of the step
    # weights and their momentum slots are resident
    assert graph.persistent_bytes.sum() == 2 * (32 * 64 + 64 * 8) * 4
    matmul = graph.index_of("MatMul")
    assert graph.op_output_bytes[matmul] == 16 * 64 * 4
    assert graph.flops[matmul] == 2 * 16 * 64 * 32
    assert graph.output_dims[graph.output_ptr[matmul]][:3].tolist() == [16, 64, -1]
    # every edge points forward and carries its source output's bytes
    data = ~graph.is_control_edge
    assert np.all(graph.edge_src < graph.edge_dst)
    src_bytes = graph.output_bytes[graph.output_ptr[graph.edge_src[data]] + graph.edge_src_output[data]]
    assert np.array_equal(graph.edge_bytes[data], src_bytes)
    assert graph.n_groups <= 8
    run_step(graph)


def test_meta_graph_message_and_file(tf1_mlp, tmp_path):
    tf_graph, train_op, _ = tf1_mlp
    with tf_graph.as_default():
        meta_graph = tf.compat.v1.train.export_meta_graph(graph=tf_graph)
    from_message = pe.from_tf(meta_graph, max_groups=8)
    path = tmp_path / "mlp.meta"
    path.write_bytes(meta_graph.SerializeToString())
    from_file = pe.from_tf(path, max_groups=8)
    assert from_message.n_ops == from_file.n_ops and from_file.name == "mlp"
    assert train_op in from_file.op_names.tolist()
    run_step(from_file)


def test_graph_def_bytes_find_the_training_sink_without_help(tf1_mlp):
    tf_graph, train_op, _ = tf1_mlp
    graph = pe.from_tf(tf_graph.as_graph_def().SerializeToString(), max_groups=8)
    assert train_op in graph.op_names.tolist()
    assert graph.meta["source"] == "GraphDef bytes"


def test_hard_colocation_from_class_attributes_and_resources(tf1_mlp):
    tf_graph, _, _ = tf1_mlp
    graph = pe.from_tf(tf_graph, max_groups=4)
    assert_hard_constraints(graph)
    assert graph.group[graph.index_of("w1")] == graph.group[graph.index_of("w1/Momentum")]


def test_cpu_only_ops_are_marked():
    graph_ = tf.Graph()
    with graph_.as_default():
        w = tf.compat.v1.get_variable("w", [4, 4])
        loss = tf.reduce_sum(tf.matmul(tf.ones([2, 4]), w))
        check = tf.raw_ops.Assert(condition=tf.math.is_finite(loss), data=[loss], name="check")
        with tf.control_dependencies([check]):
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    graph = pe.from_tf(graph_, max_groups=4)
    assert graph.device_mask[graph.index_of(check.name)] == CPU_ONLY
    assert graph.group_device_mask[graph.group[graph.index_of(check.name)]] == CPU_ONLY
    assert graph.device_mask[graph.index_of("MatMul")] == 0b11


class TinyModel(tf.Module):
    def __init__(self):
        self.w = tf.Variable(tf.random.normal([8, 4]), name="w")
        self.b = tf.Variable(tf.zeros([4]), name="b")

    @tf.function(input_signature=[tf.TensorSpec([16, 8], tf.float32)])
    def step(self, x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) + self.b))
        dw, db = tape.gradient(loss, [self.w, self.b])
        self.w.assign_sub(0.1 * dw)
        self.b.assign_sub(0.1 * db)
        return loss


def test_tf_function_captures_are_lifted_into_variables():
    model = TinyModel()
    for source in (model.step, model.step.get_concrete_function()):
        graph = pe.from_tf(source, max_groups=4)
        types = dict(zip(graph.op_names.tolist(), graph.op_types.tolist()))
        assert "Placeholder" not in [t for n, t in types.items() if n != "x"]
        assert sorted(graph.persistent_bytes[graph.persistent_bytes > 0].tolist()) == [16, 128]
        assert graph.feeds == ({"name": "x", "shape": [16, 8], "dtype": "float32"},)
        run_step(graph)


def test_nested_function_calls_are_inlined():
    weights = tf.Variable(tf.ones([8, 4]))

    @tf.function
    def project(x):
        return tf.matmul(x, weights)

    @tf.function(input_signature=[tf.TensorSpec([16, 8])])
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(project(x))
        weights.assign_sub(0.1 * tape.gradient(loss, weights))
        return loss

    graph = pe.from_tf(train_step, max_groups=4)
    assert graph.name == "train_step" and graph.meta["source"] == "tf.function"
    assert "MatMul" in graph.op_types.tolist()
    assert not any(t.endswith("PartitionedCall") for t in graph.op_types.tolist())
    run_step(graph)


def test_keras_transformer_encoder_imports_and_runs():
    import keras

    seq, dim, vocab = 16, 32, 200
    inputs = keras.Input((seq,), dtype="int32")
    x = keras.layers.Embedding(vocab, dim)(inputs)
    for _ in range(2):
        attention = keras.layers.MultiHeadAttention(num_heads=4, key_dim=dim // 4)(x, x)
        x = keras.layers.LayerNormalization()(x + attention)
        ffn = keras.layers.Dense(dim, activation="gelu")(keras.layers.Dense(4 * dim, activation="relu")(x))
        x = keras.layers.LayerNormalization()(x + keras.layers.Dropout(0.1)(ffn))
    model = keras.Model(inputs, keras.layers.Dense(vocab)(x), name="encoder")
    graph = pe.from_tf(
        model,
        input_spec=tf.TensorSpec([4, seq], tf.int32),
        target_spec=tf.TensorSpec([4, seq], tf.int32),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        max_groups=32,
    )
    assert graph.name == "encoder" and graph.meta["source"] == "keras.Model"
    assert graph.n_ops > 500 and 1 < graph.n_groups <= 32
    assert np.bincount(graph.group).min() >= 1  # every group holds ops, every op one group
    # parameters + SGD momentum slots are resident
    n_params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    assert graph.persistent_bytes.sum() >= 2 * 4 * n_params
    assert any(t.startswith("BatchMatMul") for t in graph.op_types.tolist())
    run_step(graph, steps=1)


def test_keras_model_needs_a_static_input_spec():
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
    with pytest.raises(GraphImportError, match="input_spec"):
        pe.from_tf(model)
    with pytest.raises(UnknownShapeError, match="batch size"):
        pe.from_tf(model, input_spec=tf.TensorSpec([None, 8], tf.float32))


def test_keras_specs_that_do_not_fit_the_model_are_a_clear_error():
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)], name="small")
    for shape in ([4], [4, 8, 3], [4, 7]):
        with pytest.raises(GraphImportError, match=rf"input_spec has shape\(s\) \({shape[0]},.*keras model 'small' "
                                                   r"takes \(None, 8\).*tf.TensorSpec\(\[4, 8\]"):
            pe.from_tf(model, input_spec=tf.TensorSpec(shape, tf.float32))
    with pytest.raises(GraphImportError, match=r"cannot run one training step on input_spec \(4, 8\) and target_spec "
                                               r"\(4,\): Dimensions must be equal"):
        pe.from_tf(model, input_spec=tf.TensorSpec([4, 8], tf.float32), target_spec=tf.TensorSpec([4], tf.float32),
                   loss=keras.losses.MeanSquaredError())

    class Subclassed(keras.Model):  # declares no inputs: the spec is checked by tracing
        def __init__(self):
            super().__init__(name="subclassed")
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    with pytest.raises(GraphImportError, match=r"keras model 'subclassed' cannot run one training step on input_spec "
                                               r"\(4,\): .*expected min_ndim=2, found ndim=1"):
        pe.from_tf(Subclassed(), input_spec=tf.TensorSpec([4], tf.float32))


def test_corrupt_graph_def_is_a_clear_error(tmp_path):
    with pytest.raises(GraphImportError, match="not a serialised GraphDef"):
        pe.from_tf(b"\xff\xfe this is not a protobuf \x00\x01")
    path = tmp_path / "broken.pb"
    path.write_bytes(b"\x0a\x05\x0a\x03abc\x12")  # truncated node
    with pytest.raises(GraphImportError):
        pe.from_tf(path)
    with pytest.raises(GraphImportError, match="no such file"):
        pe.from_tf(tmp_path / "missing.pb")
    with pytest.raises(GraphImportError, match="accepts"):
        pe.from_tf(42)


def test_graph_without_a_training_op_is_rejected():
    graph_ = tf.Graph()
    with graph_.as_default():
        w = tf.compat.v1.get_variable("w", [4, 4])
        tf.reduce_sum(tf.matmul(tf.ones([2, 4]), w), name="forward_only")
    with pytest.raises(NoTrainingOpError, match="no training op found.*fetches="):
        pe.from_tf(graph_)
    graph = pe.from_tf(graph_, fetches=["forward_only"], max_groups=2)  # naming the fetch works
    assert "forward_only" in graph.op_names.tolist()
    with pytest.raises(NoTrainingOpError, match="not ops of the graph"):
        pe.from_tf(graph_, fetches=["nope"])


def test_unknown_shapes_error_or_documented_fallback():
    graph_ = tf.Graph()
    with graph_.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        w = tf.compat.v1.get_variable("w", [4, 2])
        loss = tf.reduce_mean(tf.matmul(x, w))
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with pytest.raises(UnknownShapeError, match="unknown_dim"):
        pe.from_tf(graph_)
    graph = pe.from_tf(graph_, unknown_dim=32, max_groups=4)
    assert graph.feeds[0]["shape"] == [32, 4]
    assert graph.op_output_bytes[graph.index_of("MatMul")] == 32 * 2 * 4


def test_export_refuses_a_folder_and_an_unknown_suffix_before_any_work(tmp_path):
    graph, cluster = pe.load_benchmark("rnnlm-tiny", max_groups=4), pe.load_cluster("paper-2gpu")
    placement = np.zeros(graph.n_groups, np.int64)
    (tmp_path / "graph.pb").mkdir()
    with pytest.raises(pe.OutputPathError, match="graph.pb is a folder; give a file path"):
        pe.export_placed_graph(graph, cluster, placement, tmp_path / "graph.pb")
    with pytest.raises(pe.ArgumentError, match=r"cannot tell the format from the suffix '\.txt'"):
        pe.export_placed_graph(graph, cluster, placement, tmp_path / "graph.txt")
    with pytest.raises(pe.ArgumentError, match="path=3; expected a str or os.PathLike"):
        pe.export_placed_graph(graph, cluster, placement, 3)
