import numpy as np
import pytest

from placement_env import GraphFormatError, OpGraph


def small_graph(**overrides):
    fields = dict(
        name="toy",
        op_names=["a", "b", "c"],
        op_types=["Const", "MatMul", "NoOp"],
        flops=[1.0, 100.0, 0.0],
        persistent_bytes=[0, 0, 0],
        device_mask=[3, 3, 1],
        colocation=[0, 1, 2],
        group=[0, 0, 1],
        output_ptr=[0, 1, 3, 3],
        output_dims=[[4, 4] + [-1] * 6, [4, 4] + [-1] * 6, [2] + [-1] * 7],
        output_dtypes=["float32", "float32", "int64"],
        output_bytes=[64, 64, 16],
        edge_src=[0, 1],
        edge_dst=[1, 2],
        edge_src_output=[0, -1],
        edge_bytes=[64, 0],
        graph_def=b"\x01\x02",
        train_op="c",
        init_op="",
        feeds=({"name": "x", "shape": [2], "dtype": "float32"},),
        meta={"source": "test"},
    )
    fields.update(overrides)
    return OpGraph(**fields)


def test_arrays_are_read_only_and_derived_values_add_up():
    graph = small_graph()
    with pytest.raises(ValueError):
        graph.flops[0] = 5
    assert graph.n_ops == 3 and graph.n_groups == 2 and graph.n_edges == 2
    assert graph.op_output_bytes.tolist() == [64, 80, 0]
    assert graph.group_flops.tolist() == [101.0, 0.0]
    assert graph.group_device_mask.tolist() == [3, 1]
    assert graph.is_control_edge.tolist() == [False, True]
    assert graph.index_of("b") == 1
    with pytest.raises(KeyError, match="no op named 'zz'"):
        graph.index_of("zz")


def test_save_load_round_trip_without_pickle(tmp_path):
    graph = small_graph()
    path = graph.save(tmp_path / "g.npz")
    loaded = OpGraph.load(path)
    assert loaded == graph
    assert loaded.graph_def == b"\x01\x02" and loaded.feeds == graph.feeds
    with np.load(path, allow_pickle=False) as data:  # every entry readable without pickle
        assert set(data.files) >= {"op_names", "edge_src", "header", "graph_def"}


def test_corrupt_file_is_a_format_error(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(GraphFormatError, match="not a readable OpGraph file"):
        OpGraph.load(path)


def test_inconsistent_arrays_are_rejected():
    with pytest.raises(GraphFormatError, match="topological order"):
        small_graph(edge_src=[1, 1], edge_dst=[0, 2])
    with pytest.raises(GraphFormatError, match="flops"):
        small_graph(flops=[1.0])
    with pytest.raises(GraphFormatError, match="without gaps"):
        small_graph(group=[0, 0, 2])
