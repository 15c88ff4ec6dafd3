import time

import numpy as np
import pytest

import placement_env as pe
from placement_env import UnknownBenchmarkError
from placement_env.benchmarks import EXTRA_MODELS, MODERN_MODELS, PAPER_MODELS
from placement_env.cache import cache_dir
from tf_helpers import assert_hard_constraints, run_step

GIB = 2**30


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownBenchmarkError, match=r"unknown benchmark 'resnet'.*rnnlm.*synthetic:<seed>"):
        pe.load_benchmark("resnet")
    with pytest.raises(UnknownBenchmarkError):
        pe.load_benchmark("synthetic:-1")
    with pytest.raises(UnknownBenchmarkError):
        pe.load_benchmark("nmt-huge")
    with pytest.raises(TypeError, match="no parameter.*'hiddn'"):
        pe.load_benchmark("rnnlm-tiny", hiddn=3)


def test_modern_models_are_registered_by_what_they_are():
    names = pe.benchmark_names()
    for model in ("transformer", "gpt2", "bert", "resnet50"):
        assert model in names and f"{model}-tiny" in names
    with pytest.raises(UnknownBenchmarkError, match="gpt2-tiny.*resnet50-tiny"):
        pe.load_benchmark("gpt3")


def test_the_deep_rnnlm_is_registered_and_only_for_the_lstm_models():
    assert "rnnlm-deep" in pe.benchmark_names()
    with pytest.raises(TypeError, match="benchmark 'rnnlm-deep' has no parameter.*'num_layers', 'num_steps'"):
        pe.load_benchmark("rnnlm-deep", layers=3)  # checked before anything is built
    with pytest.raises(UnknownBenchmarkError, match="rnnlm-deep.*nmt-deep"):
        pe.load_benchmark("inception_v3-deep")


def test_the_deep_nmt_is_registered_and_bad_parameters_are_refused_before_building(monkeypatch):
    from placement_env.benchmarks import nmt, registry

    assert "nmt-deep" in pe.benchmark_names()
    monkeypatch.setattr(registry, "_build", lambda *args: pytest.fail("built a graph for a refused parameter"))
    with pytest.raises(TypeError, match="benchmark 'nmt-deep' has no parameter.*'layers'"):
        pe.load_benchmark("nmt-deep", num_layers=3)
    with pytest.raises(ValueError, match="layers=0"):
        nmt.build(layers=0)  # the builder checks its parameters before it makes a graph


def test_nmt_layers_deepen_both_stacks_with_residuals_from_the_third_layer():
    two, four = pe.load_benchmark("nmt-tiny"), pe.load_benchmark("nmt-tiny", layers=4)
    assert four.n_ops > two.n_ops
    variables = set(four.op_names[four.op_types == "VarHandleOp"].tolist())
    assert {"encoder/lstm_3/kernel", "decoder/lstm_3/kernel"} <= variables
    assert not any(v.startswith(("encoder/lstm_4/", "decoder/lstm_4/")) for v in variables)
    names = set(four.op_names.tolist())
    assert {"encoder/lstm_2/t0/residual", "decoder/lstm_3/t2/residual"} <= names  # GNMT's residuals
    assert not any(n.endswith("/residual") for n in two.op_names.tolist())  # none in the 2-layer model


def test_a_batch_variant_is_the_paper_model_at_another_batch():
    from placement_env.benchmarks.registry import _resolve
    from placement_env.benchmarks.sizes import GPT2_PAPER

    assert _resolve("gpt2-batch4") == ("gpt2", {**GPT2_PAPER, "batch": 4})
    with pytest.raises(TypeError, match="benchmark 'rnnlm-batch128' has no parameter.*'num_layers'"):
        pe.load_benchmark("rnnlm-batch128", layers=3)  # checked before anything is built
    for bad in ("gpt2-batch0", "gpt3-batch4", "synthetic-batch4", "gpt2-tiny-batch4", "gpt2-batch"):
        with pytest.raises(UnknownBenchmarkError, match=f"unknown benchmark '{bad}'.*<model>-batch<N>"):
            pe.load_benchmark(bad)


@pytest.mark.parametrize("name", [f"{m}-tiny" for m in (*PAPER_MODELS, *MODERN_MODELS, *EXTRA_MODELS)]
                         + ["synthetic-tiny", "random_cnn-tiny"])
def test_tiny_benchmarks_build_group_and_run(name):
    graph = pe.load_benchmark(name, max_groups=32)
    assert graph.name == name
    assert graph.n_ops > 100 and 2 <= graph.n_groups <= 32
    assert graph.persistent_bytes.sum() > 0
    assert graph.feeds == ()  # inputs are generated in-graph
    assert_hard_constraints(graph)
    run_step(graph, steps=1)


def test_cache_hit_and_corrupt_entry_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_ENV_CACHE", str(tmp_path))  # its own cache: the garbage written here is no other test's
    first = pe.load_benchmark("rnnlm-tiny")
    entries = list(cache_dir().glob("rnnlm-tiny-*.npz"))
    assert len(entries) == 1
    started = time.perf_counter()
    again = pe.load_benchmark("rnnlm-tiny")
    assert again == first and time.perf_counter() - started < 2.0
    entries[0].write_bytes(b"garbage")
    rebuilt = pe.load_benchmark("rnnlm-tiny")
    assert rebuilt == first
    assert pe.OpGraph.load(entries[0]).n_ops == first.n_ops  # the entry was rewritten whole


def test_parameters_change_the_cache_key():
    small = pe.load_benchmark("synthetic:3", layers=3, width=2, dim=8, batch=2)
    other = pe.load_benchmark("synthetic:4", layers=3, width=2, dim=8, batch=2)
    wider = pe.load_benchmark("synthetic:3", layers=3, width=4, dim=8, batch=2)
    assert not np.array_equal(small.op_names, other.op_names) or small.n_edges != other.n_edges
    assert wider.n_ops > small.n_ops
    assert small.meta["params"]["seed"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", PAPER_MODELS)
def test_paper_benchmarks_at_paper_scale(name):
    started = time.perf_counter()
    graph = pe.load_benchmark(name)
    elapsed = time.perf_counter() - started
    print(f"{name}: {graph.n_ops} ops, {graph.n_groups} groups, cold build {elapsed:.1f} s")
    assert 1_000 <= graph.n_ops <= 60_000
    assert 2 <= graph.n_groups <= 256
    assert_hard_constraints(graph)
    batch = {"rnnlm": 64, "nmt": 64, "inception_v3": 32}[name]
    assert graph.meta["params"]["batch"] == batch


@pytest.mark.slow
def test_nmt_does_not_fit_one_12gb_gpu_but_fits_two():
    """The paper's table shape: single-GPU NMT is out of memory; the expert's 2-GPU split runs."""
    from placement_env.problem import Problem, solve
    from placement_env.placement import single_device

    graph, cluster = pe.load_benchmark("nmt"), pe.load_cluster("paper-2gpu")
    one = pe.evaluate(graph, cluster, single_device(graph, cluster, 1))
    assert not one.ok and one.failure == "oom" and one.peak_bytes[1] > 12 * GIB
    expert = pe.evaluate(graph, cluster, solve("expert", Problem.make(graph, cluster, benchmark="nmt")).placement)
    assert expert.ok, expert.message
    assert expert.runtime_s < pe.evaluate(graph, cluster, single_device(graph, cluster, 0)).runtime_s
