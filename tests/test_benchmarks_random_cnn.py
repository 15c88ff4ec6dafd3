"""Random CNNs: the seed fixes the architecture, the kinds of units are built as drawn, names resolve, a real step."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env.benchmarks import random_cnn
from placement_env.errors import UnknownBenchmarkError


@functools.lru_cache(maxsize=None)
def tiny(seed: int = 0):
    return random_cnn.build(**{**random_cnn.TINY, "seed": seed})


def _forward(step) -> list[tf.Operation]:
    return [op for op in step.graph.get_operations() if not op.name.startswith("gradients/")]


def test_the_seed_fixes_the_architecture_and_seeds_differ():
    assert random_cnn.structure(3) == random_cnn.structure(3)
    drawn = [random_cnn.structure(seed) for seed in range(20)]
    assert len({repr(d) for d in drawn}) == 20
    for d in drawn:
        assert len(d) == random_cnn.PAPER["stages"]
        assert all(1 <= len(stage) <= 2 * random_cnn.PAPER["units"] - 1 for stage in d)
        for unit in (u for stage in d for u in stage):
            assert unit["kind"] in random_cnn.KINDS
            if unit["kind"] == "branched":
                assert 2 <= len(unit["paths"]) <= 4 and set(unit["paths"]) <= set(random_cnn.PATHS)
    # each graph has its own mix: over 20 seeds, some are mostly one kind and some mix all three
    shares = np.array([[sum(u["kind"] == k for s in d for u in s) / sum(len(s) for s in d) for k in random_cnn.KINDS]
                       for d in drawn])
    assert shares.max(axis=1).max() >= 0.8 and shares.max(axis=1).min() <= 0.6


def test_units_are_built_as_drawn():
    seed = next(s for s in range(50)
                if {u["kind"] for stage in random_cnn.structure(s) for u in stage} == set(random_cnn.KINDS))
    step = tiny(seed)
    names = {op.name: op for op in _forward(step)}
    for s, stage in enumerate(random_cnn.structure(seed), start=1):
        for u, unit in enumerate(stage, start=1):
            scope = f"stage{s}/unit_{u}"
            if unit["kind"] == "plain":
                convs = [n for n, op in names.items() if n.startswith(scope + "/") and op.type == "Conv2D"]
                assert len(convs) == unit["convs"], scope
            elif unit["kind"] == "residual":
                assert names[f"{scope}/residual"].type in ("Add", "AddV2")
                assert (f"{scope}/conv3/Conv2D" in names) == unit["bottleneck"]
            else:
                concat = names[f"{scope}/concat"]
                assert concat.type == "ConcatV2" and len(concat.inputs) == len(unit["paths"]) + 1  # + the axis
    assert step.params["seed"] == seed and step.params["batch"] == random_cnn.TINY["batch"]


def test_tiny_step_is_static_runs_and_updates_every_weight():
    step = tiny(0)
    assert all(t.shape.is_fully_defined() for op in step.graph.get_operations() for t in op.outputs)
    with step.graph.as_default():
        variables = tf.compat.v1.trainable_variables()
    with tf.compat.v1.Session(graph=step.graph) as sess:
        sess.run(step.init_op)
        before = sess.run(variables)
        loss = sess.run([step.graph.get_tensor_by_name(step.loss), step.train_op])[0]
        after = sess.run(variables)
    assert np.isfinite(loss)
    assert [v.op.name for v, b, a in zip(variables, before, after) if np.array_equal(b, a)] == []


def test_names_resolve_to_seed_and_batch():
    graph = pe.load_benchmark("random_cnn-tiny", max_groups=32)
    assert graph.name == "random_cnn-tiny" and 2 <= graph.n_groups <= 32
    assert "random_cnn-tiny" in pe.benchmark_names()
    for bad in ("random_cnn:-1", "random_cnn:3-batch0", "random_cnn:x"):
        with pytest.raises(UnknownBenchmarkError, match="random_cnn:<seed>"):
            pe.load_benchmark(bad)


def test_bad_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="seed=-1"):
        random_cnn.build(**{**random_cnn.TINY, "seed": -1})
    with pytest.raises(ValueError, match="stages=0"):
        random_cnn.build(**{**random_cnn.TINY, "stages": 0})
    with pytest.raises(ValueError, match="image_size=16"):  # 4 stages need 2**5 pixels
        random_cnn.build(**{**random_cnn.TINY, "image_size": 16})
    with pytest.raises(TypeError, match="bogus"):
        random_cnn.build(bogus=1)
