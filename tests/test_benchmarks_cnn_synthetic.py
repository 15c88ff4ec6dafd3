"""Inception-V3 and synthetic-DAG builders: shapes, names, determinism, and a real training step."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from placement_env.benchmarks import common, inception_v3, synthetic

CONTROL_FLOW = {"While", "StatelessWhile", "If", "StatelessIf", "Switch", "Merge", "Enter", "Exit",
                "PartitionedCall", "StatefulPartitionedCall", "RefSwitch", "RefMerge", "NextIteration",
                "LoopCond"}
NODE_SCOPE = re.compile(r"^layer_(\d+)/node_(\d+)/")


def signature(step: common.TrainingStep) -> list[tuple]:
    return [(op.name, op.type, tuple(t.name for t in op.inputs)) for op in step.graph.get_operations()]


def variable(step: common.TrainingStep, name: str):
    for v in step.graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
        if v.op.name == name:
            return v
    raise AssertionError(f"no variable {name}")


def run_twice(step: common.TrainingStep, loss_name: str, var_names: list[str]):
    """Init, then two training steps; returns (losses, {var: (before, after)})."""
    graph = step.graph
    loss = graph.get_tensor_by_name(loss_name)
    variables = [variable(step, n) for n in var_names]
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(step.init_op)
        before = sess.run(variables)
        losses = []
        for _ in range(2):
            value, _ = sess.run([loss, step.train_op])
            losses.append(float(value))
        after = sess.run(variables)
    return losses, {n: (b, a) for n, b, a in zip(var_names, before, after)}


def check_common(step: common.TrainingStep):
    ops = step.graph.get_operations()
    assert ops
    undefined = [(op.name, t.shape) for op in ops for t in op.outputs if not t.shape.is_fully_defined()]
    assert not undefined, undefined[:10]
    flow = sorted({op.type for op in ops} & CONTROL_FLOW)
    assert not flow, flow
    step.graph.get_operation_by_name(step.train_op)
    step.graph.get_operation_by_name(step.init_op)


# ---------------------------------------------------------------- Inception-V3

@pytest.fixture(scope="module")
def tiny_inception() -> common.TrainingStep:
    return inception_v3.build(**inception_v3.TINY)


def test_inception_tiny_graph_is_static_and_flat(tiny_inception):
    check_common(tiny_inception)
    assert tiny_inception.params == inception_v3.TINY


def test_inception_blocks_are_top_level_scopes(tiny_inception):
    names = [op.name for op in tiny_inception.graph.get_operations()]
    for block in inception_v3.BLOCKS:
        assert any(n == block or n.startswith(block + "/") for n in names), block
    # every op outside the optimiser/initialiser lies under one of the blocks
    allowed = set(inception_v3.BLOCKS) | {"gradients", "init"}
    stray = {n.split("/")[0] for n in names} - allowed
    assert all(s.startswith("train_step") for s in stray), stray
    assert len(set(inception_v3.BLOCKS)) == len(inception_v3.BLOCKS)
    assert inception_v3.BLOCKS[0] == "inputs" and inception_v3.BLOCKS[-1] == "loss"


def test_inception_tiny_shapes(tiny_inception):
    g = tiny_inception.graph
    p = inception_v3.TINY
    assert g.get_tensor_by_name("inputs/images/RandomUniform:0").shape.as_list() == [p["batch"], 75, 75, 3]
    assert g.get_tensor_by_name("Logits/SpatialSqueeze:0").shape.as_list() == [p["batch"], p["num_classes"]]
    assert g.get_tensor_by_name("AuxLogits/SpatialSqueeze:0").shape.as_list() == [p["batch"], p["num_classes"]]
    # depth multiplier 0.1 with min depth 8: Mixed_7c = 32 + 2*38 + 2*38 + 19 channels
    assert g.get_tensor_by_name("Mixed_7c/concat:0").shape.as_list() == [p["batch"], 1, 1, 203]


def test_inception_tiny_trains(tiny_inception):
    names = ["Conv2d_1a_3x3/weights", "Mixed_7c/Branch_3/Conv2d_0b_1x1/BatchNorm/beta",
             "Logits/Conv2d_1c_1x1/biases", "Mixed_5b/Branch_0/Conv2d_0a_1x1/BatchNorm/moving_mean"]
    losses, values = run_twice(tiny_inception, "loss/total:0", names)
    assert all(np.isfinite(losses)), losses
    for name, (before, after) in values.items():
        assert np.all(np.isfinite(after)), name
        assert not np.array_equal(before, after), f"{name} did not change"


def test_inception_build_is_deterministic(tiny_inception):
    again = inception_v3.build(**inception_v3.TINY)
    assert signature(again) == signature(tiny_inception)


def test_inception_rejects_bad_params():
    with pytest.raises(TypeError, match="bogus"):
        inception_v3.build(bogus=1)
    with pytest.raises(ValueError, match="image_size"):
        inception_v3.build(**{**inception_v3.TINY, "image_size": 74})


def test_inception_paper_shapes():
    step = inception_v3.build()
    assert step.params == inception_v3.PAPER
    g = step.graph
    assert 5_000 < len(g.get_operations()) < 12_000
    assert g.get_tensor_by_name("Mixed_5d/concat:0").shape.as_list() == [32, 35, 35, 288]
    assert g.get_tensor_by_name("Mixed_6e/concat:0").shape.as_list() == [32, 17, 17, 768]
    assert g.get_tensor_by_name("Mixed_7c/concat:0").shape.as_list() == [32, 8, 8, 2048]
    assert g.get_tensor_by_name("Logits/SpatialSqueeze:0").shape.as_list() == [32, 1000]
    n_conv = sum(op.type == "Conv2D" for op in g.get_operations())
    assert n_conv == 94 + 3 + 1  # trunk, AuxLogits, Logits
    undefined = [op.name for op in g.get_operations() for t in op.outputs if not t.shape.is_fully_defined()]
    assert not undefined


# ---------------------------------------------------------------- synthetic DAG

@pytest.fixture(scope="module")
def tiny_synthetic() -> common.TrainingStep:
    return synthetic.build(**synthetic.TINY)


def node_scopes(step: common.TrainingStep) -> set[tuple[int, int]]:
    found = set()
    for op in step.graph.get_operations():
        m = NODE_SCOPE.match(op.name)
        if m:
            found.add((int(m.group(1)), int(m.group(2))))
    return found


def test_synthetic_tiny_graph_is_static_and_flat(tiny_synthetic):
    check_common(tiny_synthetic)
    assert tiny_synthetic.params == synthetic.TINY
    p = synthetic.TINY
    assert node_scopes(tiny_synthetic) == {(l, i) for l in range(p["layers"]) for i in range(p["width"])}


def test_synthetic_tiny_trains(tiny_synthetic):
    losses, values = run_twice(tiny_synthetic, "loss/loss:0", ["layer_0/node_0/kernel", "layer_3/node_2/bias"])
    assert all(np.isfinite(losses)) and losses[0] > 0, losses
    for name, (before, after) in values.items():
        assert not np.array_equal(before, after), f"{name} did not change"


def test_synthetic_seed_fixes_the_graph(tiny_synthetic):
    same = synthetic.build(**synthetic.TINY)
    assert signature(same) == signature(tiny_synthetic)
    other = synthetic.build(**{**synthetic.TINY, "seed": 1})
    assert signature(other) != signature(tiny_synthetic)
    assert synthetic.structure(seed=0, layers=4, width=3) == synthetic.structure(seed=0, layers=4, width=3)
    assert synthetic.structure(seed=0, layers=4, width=3) != synthetic.structure(seed=1, layers=4, width=3)


def test_synthetic_structure_rules():
    for seed in range(5):
        nodes = synthetic.structure(seed=seed, layers=6, width=4, fan_in=3)
        assert [len(row) for row in nodes] == [4] * 6
        for layer, row in enumerate(nodes):
            for node in row:
                srcs = node["inputs"]
                if layer == 0:
                    assert srcs == [("inputs", 0)]
                    continue
                assert 1 <= len(srcs) <= 3 and len(set(srcs)) == len(srcs)
                assert srcs[0][0] == layer - 1
                assert all(0 <= l < layer for l, _ in srcs)
                assert (node["combine"] is None) == (len(srcs) == 1)
                assert node["activation"] in synthetic.ACTIVATIONS


@pytest.mark.parametrize("layers,width", [(2, 3), (5, 2), (3, 5)])
def test_synthetic_layers_and_width_set_node_count(layers, width):
    step = synthetic.build(**{**synthetic.TINY, "layers": layers, "width": width})
    assert node_scopes(step) == {(l, i) for l in range(layers) for i in range(width)}
    assert sum(op.type == "MatMul" and op.name.endswith("/matmul") and not op.name.startswith("gradients/")
               for op in step.graph.get_operations()) == layers * width


def test_synthetic_rejects_bad_params():
    with pytest.raises(TypeError, match="bogus"):
        synthetic.build(bogus=1)
    with pytest.raises(ValueError, match="layers"):
        synthetic.build(**{**synthetic.TINY, "layers": 0})
