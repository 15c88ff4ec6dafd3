"""Random Transformers and random RNNs: the seed fixes the architecture, overrides replace sizes only, the batch
meets the drawn memory target, every kind builds and trains, the names resolve and the tiny variants simulate."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

import placement_env as pe
from placement_env.benchmarks import drawing, random_rnn, random_transformer
from placement_env.benchmarks.registry import _resolve
from placement_env.errors import UnknownBenchmarkError

MODULES = {"random_transformer": random_transformer, "random_rnn": random_rnn}
# what a tiny variant keeps of the seed's draw, and so what tells the architectures apart at tiny sizes
KEPT = {"random_transformer": ("kind", "pre_norm", "tied", "positions"), "random_rnn": ("kind", "cell", "attention")}


def _tiny_sizes(module) -> dict:
    return {key: value for key, value in module.TINY.items() if key != "seed"}


@functools.lru_cache(maxsize=None)
def tiny(family: str, seed: int):
    module = MODULES[family]
    return module.build(**{**module.TINY, "seed": seed})


def _signature(step) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(node.name, node.op, tuple(node.input)) for node in step.graph.as_graph_def().node]


def _seeds_of_every_kind(family: str) -> list[int]:
    """The first seed of each combination of what a tiny variant keeps (kind, cell, ... ) among seeds 0-79."""
    module, seen = MODULES[family], {}
    for seed in range(80):
        arch = module.structure(seed, **_tiny_sizes(module))
        seen.setdefault(tuple(arch[key] for key in KEPT[family][:3]), seed)
    return sorted(seen.values())


@pytest.mark.parametrize("family", MODULES)
def test_the_seed_fixes_the_architecture_and_seeds_differ(family):
    module = MODULES[family]
    assert module.structure(7) == module.structure(7)
    drawn = [module.structure(seed) for seed in range(30)]
    assert len({repr(d) for d in drawn}) == 30
    assert {d["kind"] for d in drawn} == set(module.KINDS)
    for d in drawn:
        assert 1 <= d["batch"] <= drawing.MAX_BATCH
        assert 2**30 * drawing.TARGET_GIB[0] <= d["target_bytes"] <= 2**30 * drawing.TARGET_GIB[1]
    if family == "random_transformer":
        assert {d["pre_norm"] for d in drawn} == {d["tied"] for d in drawn} == {True, False}
        for d in drawn:
            assert d["d_model"] in module.D_MODELS and d["d_model"] % d["heads"] == 0
            assert d["d_model"] // d["heads"] in module.D_HEADS and d["d_ff"] // d["d_model"] in module.FFN_RATIOS
            assert d["layers"] in (range(1, 7) if d["kind"] == "encoder_decoder" else range(2, 13))
            assert (d["tgt_len"] is not None) == (d["kind"] == "encoder_decoder")
            assert (d["masked"] is not None) == (d["kind"] == "encoder")
    else:
        assert {d["cell"] for d in drawn} == set(module.CELLS)
        assert {d["attention"] for d in drawn if d["kind"] == "seq2seq"} == {True, False}
        assert not any(d["attention"] for d in drawn if d["kind"] == "lm")
        for d in drawn:
            assert d["units"] in module.UNITS and 1 <= d["layers"] <= 4
            assert (d["tgt_len"] is not None) == (d["kind"] == "seq2seq")


def test_a_transformers_batch_is_the_largest_within_the_memory_target():
    for seed in range(40):
        arch = random_transformer.structure(seed)
        fixed, per_sequence = random_transformer.step_bytes(arch)
        if arch["batch"] > 1:
            assert fixed + arch["batch"] * per_sequence <= arch["target_bytes"]
        if arch["batch"] < drawing.MAX_BATCH:
            assert fixed + (arch["batch"] + 1) * per_sequence > arch["target_bytes"]


def test_an_rnns_units_come_nearest_the_memory_target_at_the_drawn_batch():
    def miss(arch, units):
        fixed, per_sequence = random_rnn.step_bytes({**arch, "units": units})
        return abs(np.log((fixed + arch["batch"] * per_sequence) / arch["target_bytes"]))

    for seed in range(40):
        arch = random_rnn.structure(seed)
        assert arch["batch"] in random_rnn.BATCHES
        assert miss(arch, arch["units"]) == min(miss(arch, units) for units in random_rnn.UNITS)
        # another batch keeps the seed's model
        assert random_rnn.structure(seed, batch=7) == {**arch, "batch": 7}


@pytest.mark.parametrize("family", MODULES)
def test_overrides_replace_sizes_and_keep_the_other_draws(family):
    module = MODULES[family]
    drawn = module.structure(3)
    tiny_arch = module.structure(3, **_tiny_sizes(module))
    for key in KEPT[family]:
        assert tiny_arch[key] == drawn[key], key
    for key, value in _tiny_sizes(module).items():
        if key in tiny_arch:
            assert tiny_arch[key] == value, key
    assert module.structure(3, batch=5)["batch"] == 5
    assert module.structure(3, layers=None) == drawn
    with pytest.raises(ValueError, match=f"{family}: layers=0; expected an integer from 1"):
        module.structure(3, layers=0)
    with pytest.raises(ValueError, match=f"{family}: seed=-1; expected an integer >= 0"):
        module.structure(-1)
    with pytest.raises(TypeError, match=f"{family}.build\\(\\) got unknown parameter\\(s\\): bogus"):
        module.build(bogus=1)


def test_a_transformer_override_of_the_width_keeps_heads_that_divide_it():
    arch = random_transformer.structure(0, d_model=200)
    assert arch["d_model"] == 200 and 200 % arch["heads"] == 0
    with pytest.raises(ValueError, match="d_model=200 is not a multiple of heads=3"):
        random_transformer.structure(0, d_model=200, heads=3)


@pytest.mark.parametrize("family", MODULES)
def test_the_same_seed_builds_the_same_graph_and_another_seed_another(family):
    seeds = _seeds_of_every_kind(family)[:2]  # two seeds whose tiny architectures differ
    assert _signature(tiny(family, seeds[0])) == _signature(MODULES[family].build(**{**MODULES[family].TINY,
                                                                                    "seed": seeds[0]}))
    assert _signature(tiny(family, seeds[0])) != _signature(tiny(family, seeds[1]))


@pytest.mark.parametrize("family, seed",
                         [(family, seed) for family in MODULES for seed in _seeds_of_every_kind(family)])
def test_every_kind_builds_static_steps_that_train_every_weight(family, seed):
    step = tiny(family, seed)
    arch = {key: value for key, value in step.params.items() if key != "seed"}
    assert arch == MODULES[family].structure(seed, **_tiny_sizes(MODULES[family]))
    graph = step.graph
    assert all(t.shape.is_fully_defined() for op in graph.get_operations() for t in op.outputs)
    with graph.as_default():
        variables = tf.compat.v1.trainable_variables()
    updated = {op.name for op in graph.get_operations() if op.type == "ResourceApplyMomentum"}
    assert [v.op.name for v in variables if f"train_step/update_{v.op.name}/ResourceApplyMomentum" not in updated] \
        == []  # every weight gets a gradient
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(step.init_op)
        loss = sess.run([graph.get_tensor_by_name(step.loss), step.train_op])[0]
    assert np.isfinite(loss)


def test_the_layers_are_the_drawn_ones():
    seed = next(s for s in range(80) if random_rnn.structure(s, **_tiny_sizes(random_rnn))["cell"] == "gru"
                and random_rnn.structure(s)["kind"] == "seq2seq")
    names = {op.name for op in tiny("random_rnn", seed).graph.get_operations()}
    assert "encoder/gru_1/t0/hidden" in names and not any("lstm_" in n for n in names)
    seed = next(s for s in range(80) if random_transformer.structure(s)["kind"] == "encoder_decoder"
                and random_transformer.structure(s)["pre_norm"])
    names = {op.name for op in tiny("random_transformer", seed).graph.get_operations()}
    assert {"decoder/layer_1/cross_attention/residual", "encoder/final_norm/normalized"} <= names


@pytest.mark.parametrize("family", MODULES)
def test_tiny_variants_load_group_and_simulate(family):
    graph = pe.load_benchmark(f"{family}-tiny", max_groups=32)
    assert graph.name == f"{family}-tiny" and 2 <= graph.n_groups <= 32
    assert f"{family}-tiny" in pe.benchmark_names()
    cluster = pe.load_cluster("paper-2gpu")
    gpu = next(d for d, device in enumerate(cluster.devices) if device.kind == "GPU")
    measurement = pe.evaluate(graph, cluster, pe.single_device(graph, cluster, gpu))
    assert measurement.ok and measurement.runtime_s > 0


@pytest.mark.parametrize("family", MODULES)
def test_names_resolve_to_seed_and_batch_and_bad_names_say_why(family):
    paper = MODULES[family].PAPER
    assert _resolve(f"{family}:12") == (family, {**paper, "seed": 12})
    assert _resolve(f"{family}:12-batch48") == (family, {**paper, "seed": 12, "batch": 48})
    assert _resolve(f"{family}-tiny") == (family, MODULES[family].TINY)
    for bad, reason in ((f"{family}:-1", "the seed '-1' is not a whole number >= 0"),
                        (f"{family}:3-batch0", "batch 0 is not >= 1"),
                        (f"{family}:x", "the seed 'x' is not a whole number >= 0")):
        with pytest.raises(UnknownBenchmarkError, match=f"unknown benchmark '{bad}': {reason}.*{family}:<seed>"):
            pe.load_benchmark(bad)
    with pytest.raises(TypeError, match=f"benchmark '{family}:1' has no parameter.*'bogus'"):
        pe.load_benchmark(f"{family}:1", bogus=3)
