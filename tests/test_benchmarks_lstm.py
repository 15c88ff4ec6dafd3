"""Tests of the unrolled LSTM benchmark builders (RNNLM and NMT), on their TINY variants."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from placement_env.benchmarks import common, nmt, rnnlm

CONTROL_FLOW = {"While", "StatelessWhile", "Switch", "Merge", "Enter", "Exit", "NextIteration",
                "LoopCond", "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf"}

SCOPES = {
    "rnnlm": ["inputs", "embedding", "lstm_0", "lstm_1", "softmax", "loss"],
    "nmt": ["inputs", "encoder/embedding", "encoder/lstm_0", "encoder/lstm_1", "decoder/embedding",
            "decoder/lstm_0", "decoder/lstm_1", "attention", "softmax", "loss"],
}
MODULES = {"rnnlm": rnnlm, "nmt": nmt}


@pytest.fixture(scope="module", params=sorted(MODULES))
def built(request):
    mod = MODULES[request.param]
    return request.param, mod, mod.build(**mod.TINY)


def _ops(step):
    return step.graph.get_operations()


def test_returns_training_step(built):
    name, mod, step = built
    assert isinstance(step, common.TrainingStep)
    assert step.params == mod.TINY
    step.graph.get_operation_by_name(step.train_op)
    step.graph.get_operation_by_name(step.init_op)


def test_all_shapes_static(built):
    _, _, step = built
    undefined = [t.name for op in _ops(step) for t in op.outputs if not t.shape.is_fully_defined()]
    assert undefined == []


def test_no_control_flow(built):
    _, _, step = built
    assert sorted({op.type for op in _ops(step)} & CONTROL_FLOW) == []


def test_name_scopes(built):
    name, _, step = built
    names = [op.name for op in _ops(step)]
    for scope in SCOPES[name]:
        assert any(n.startswith(scope + "/") for n in names), scope
        # forward ops of the scope are differentiated there, too (except the random inputs)
        if scope != "inputs":
            assert any(n.startswith("gradients/" + scope + "/") for n in names), scope
    # every gradient op either lives under a forward scope or is co-located with a forward op
    tops = {s.split("/")[0] for s in SCOPES[name]}
    for op in _ops(step):
        if op.name.startswith("gradients/") and op.name.split("/")[1] not in tops:
            assert any(c.startswith(b"loc:@") for c in op.get_attr("_class")), op.name


def test_variables_in_scopes(built):
    name, _, step = built
    with step.graph.as_default():
        variables = [v.op.name for v in tf.compat.v1.trainable_variables()]
    for scope in SCOPES[name]:
        if scope not in ("inputs", "loss"):
            assert any(v.startswith(scope + "/") for v in variables), scope


def test_deterministic_structure(built):
    _, mod, step = built
    again = mod.build(**mod.TINY)
    assert [(o.name, o.type) for o in _ops(step)] == [(o.name, o.type) for o in _ops(again)]


def test_train_step_runs_and_updates(built):
    name, _, step = built
    graph = step.graph
    loss = graph.get_tensor_by_name("loss/mean_xent:0")
    with graph.as_default():
        var = next(v for v in tf.compat.v1.trainable_variables() if v.op.name.endswith("lstm_0/kernel"))
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(step.init_op)
        before = sess.run(var)
        first = sess.run(loss)
        sess.run(step.train_op)
        sess.run(step.train_op)
        after = sess.run(var)
        second = sess.run(loss)
    assert np.isfinite(first) and np.isfinite(second)
    assert not np.allclose(before, after)


@pytest.mark.parametrize("mod", [rnnlm, nmt], ids=["rnnlm", "nmt"])
def test_unknown_param_rejected(mod):
    with pytest.raises((TypeError, ValueError), match="bogus_key"):
        mod.build(bogus_key=3)


@pytest.mark.parametrize("mod", [rnnlm, nmt], ids=["rnnlm", "nmt"])
def test_bad_value_rejected(mod):
    with pytest.raises(ValueError, match="batch"):
        mod.build(**{**mod.TINY, "batch": 0})


def test_a_size_past_what_tf_can_build_is_refused_before_building():
    """Before: hidden=10**9 allocated a 16 GB forget-gate bias for two minutes, then failed in TF's proto code."""
    import placement_env as pe

    with pytest.raises(ValueError, match="rnnlm: hidden=1000000000; expected an integer from 1 to 1,048,576"):
        pe.load_benchmark("rnnlm-tiny", hidden=10**9, use_cache=False)
    with pytest.raises(ValueError, match="nmt: hidden=1048577; expected an integer from 1 to 1,048,576"):
        nmt.build(**{**nmt.TINY, "hidden": 2**20 + 1})


def test_paper_params_are_paper_scale():
    assert rnnlm.PAPER["batch"] == 64 and rnnlm.PAPER["num_layers"] == 2
    assert nmt.PAPER["batch"] == 64


def test_memory_estimate_counts_params_and_activations():
    step = nmt.build(**nmt.TINY)
    est = nmt.estimate_step_memory(step)
    with step.graph.as_default():
        n_params = sum(v.shape.num_elements() for v in tf.compat.v1.trainable_variables())
    assert est["parameters"] == 2 * 4 * n_params
    assert est["activations"] > 0
    assert est["total"] == est["parameters"] + est["activations"]
    assert nmt.estimate_step_memory(step.graph) == est
