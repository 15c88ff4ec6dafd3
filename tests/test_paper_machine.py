"""The K80 machine and its fit to the seed's table: parameters, the fit's mechanics, the report."""
from __future__ import annotations

import json

import pytest

import placement_env as pe
from placement_env.calibration import paper_machine as pm
from placement_env.cluster.k80 import DEFAULT_PARAMETERS, K80_USABLE_BYTES, check_parameters, k80_machine


@pytest.fixture(scope="module")
def tiny_models():
    """The seed's RNNLM and Inception rows, fitted on the tiny graphs (mechanics, not fidelity)."""
    machine = k80_machine(2, DEFAULT_PARAMETERS)
    models = []
    for name, graph_name in (("rnnlm", "rnnlm-tiny"), ("inception_v3", "inception_v3-tiny")):
        graph = pe.load_benchmark(graph_name)
        placements = {m: pe.solve(m, pe.Problem.make(graph, machine, benchmark=graph_name)).placement
                      for m in pm.METHODS}
        models.append(pm.prepare(name, graph, placements))
    return models


def test_the_k80_machine_is_its_documented_hardware():
    two, four = k80_machine(2), k80_machine(4)
    assert [d.memory_bytes for d in two.devices[1:]] == [K80_USABLE_BYTES] * 2
    assert 10.4 * 2**30 < K80_USABLE_BYTES < 10.7 * 2**30  # 11,441 MiB with ECC, less context and TF's reserve
    assert two.buffer_forwarding and two.transfer_overhead_s == DEFAULT_PARAMETERS["transfer_overhead_s"]
    assert four.topology.switches == ("host", "k80:0", "k80:1")
    assert pe.load_cluster("k80-4gpu") == k80_machine(4, name="k80-4gpu")
    with pytest.raises(pe.ClusterConfigError, match="missing \\['pcie_bandwidth'\\]"):
        check_parameters({k: v for k, v in DEFAULT_PARAMETERS.items() if k != "pcie_bandwidth"})
    with pytest.raises(pe.ClusterConfigError, match="n_gpus = 3"):
        k80_machine(3)


def test_ratios_use_the_expert_when_one_gpu_is_out_of_memory():
    assert pm.ratios({"single_cpu": 6.0, "single_gpu": 2.0, "expert": 3.0}) == {"cpu/gpu": 3.0, "expert/gpu": 1.5}
    assert pm.ratios({"single_cpu": 6.0, "single_gpu": None, "expert": 3.0}) == {"cpu/expert": 2.0}


def test_the_fit_takes_the_tf1_expert_for_the_seeds_expert(tiny_models):
    assert pm.SEED_EXPERT == "expert_tf1" and set(pm.EXPERTS) <= set(pm.METHODS)
    assert pm.as_seed_rows({"single_cpu": 6.0, "single_gpu": 2.0, "expert": 1.0, "expert_tf1": 3.0}) == \
        {"single_cpu": 6.0, "single_gpu": 2.0, "expert": 3.0}
    # The loss reads the TF1 expert's time: a model whose colocated expert were changed keeps its loss.
    model = tiny_models[0]
    swapped = pm.Model(model.name, model.graph, model.base_seconds, model.overheads,
                       {**model.placements, "expert": model.placements["single_cpu"]})
    assert pm.loss(DEFAULT_PARAMETERS, [swapped]) == pm.loss(DEFAULT_PARAMETERS, [model])


def test_the_fit_lowers_the_loss_stays_in_bounds_and_reports(tiny_models, tmp_path):
    fitted = pm.fit(tiny_models, starts=1)
    assert pm.loss(fitted, tiny_models) <= pm.loss(DEFAULT_PARAMETERS, tiny_models)
    for key, (low, high) in pm.BOUNDS.items():
        assert low <= fitted[key] <= high
    held_out = pm.leave_one_model_out(tiny_models, starts=1)
    assert [p.model for p in held_out] == ["rnnlm", "inception_v3"]
    assert all(set(p.simulated) == set(pm.METHODS) for p in held_out)
    in_sample = [pm.Prediction(m.name, fitted, m.runtimes(fitted)) for m in tiny_models]
    text = pm.report(fitted, in_sample, held_out)
    # The seed's expert stands in the TF1 expert's column (the fit's choice); our colocated expert has none there.
    assert "| rnnlm | seed (real K80s) | 6.89 | 1.57 | 13.4 | 11.9 | - | 3.81 | 4.39 | 2.43 | 1.81 |  |" in text
    assert "compared with expert_tf1" in text
    assert text.count("| inception_v3 | fit without it |") == 1
    path = pm.save(fitted, {"command": "test"}, tmp_path / "fit.json")
    assert check_parameters(json.loads(path.read_text())["parameters"]) == fitted
