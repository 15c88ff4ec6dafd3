"""The held-out graphs of experiments.cross_graph_fidelity build, import, pass the measured workers'
allowlist and simulate on local:2 (no real workers); its table marks the issue's target."""
import json

import numpy as np
import pytest

from experiments import cross_graph_fidelity as cgf
from placement_env.cluster import load_cluster
from placement_env.costs import analytical_costs
from placement_env.placement import random_placements
from placement_env.runtime.allowlist import refuse_unlisted_ops
from placement_env.runtime.simulated import simulate_batch


@pytest.mark.parametrize("name, source, n_ops", [
    (cgf.KERAS_TRANSFORMER, "keras.Model", (500, 3000)),
    (cgf.TF1_BRANCHES, "tf.Graph", (150, 1000)),
    (cgf.KERAS_BRANCHES, "keras.Model", (100, 400)),
])
def test_imported_graphs_build_and_simulate_on_local_workers(name, source, n_ops):
    graph = cgf.load_graph(name)
    assert graph.meta["source"] == source and n_ops[0] <= graph.n_ops <= n_ops[1]
    types = set(graph.op_types.tolist())
    assert {"MatMul", "VarHandleOp"} <= types  # a training step over resource variables
    if name == cgf.KERAS_TRANSFORMER:
        assert {"Einsum", "Softmax"} <= types  # attention
    if name == cgf.TF1_BRANCHES:
        assert "ResourceApplyAdam" in types and graph.train_op  # the v1 optimizer's train op is the fetch
    refuse_unlisted_ops(graph.graph_def, what=name)  # measured workers would run it
    cluster = load_cluster("local:2")
    placements = cgf.placements_for(graph, cluster, 3, seed=0)
    results = simulate_batch(graph, cluster, analytical_costs(graph, cluster).seconds, placements)
    assert all(m.ok and m.runtime_s > 0 for m in results)


def test_the_held_out_benchmarks_load_and_their_family_is_named():
    assert cgf.load_graph("gpt2-tiny").n_ops > 100
    assert cgf.role("synthetic:3", cgf.DEFAULT_FIT) == "held out, same family"
    assert cgf.role("gpt2-tiny", cgf.DEFAULT_FIT) == cgf.role(cgf.KERAS_TRANSFORMER, cgf.DEFAULT_FIT) == "held out"
    assert cgf.role("rnnlm-tiny", cgf.DEFAULT_FIT) == "fit"
    assert len(set(cgf.DEFAULT_PREDICT) - set(cgf.DEFAULT_FIT)) == len(cgf.DEFAULT_PREDICT) >= 4


def _row(graph, role, spearman, mape):
    return {"graph": graph, "role": role, "n": 18, "measured_min_s": 1e-3, "measured_max_s": 2e-2,
            "spearman_before": spearman, "spearman_after": spearman, "mape_before": mape, "mape_after": mape}


def test_table_of_two_runs_marks_the_target_per_graph_and_run():
    fit = {"fit": {"scale": [1.0], "overhead_s": [2e-6], "bandwidth": 1e12, "latency_s": 1e-5, "loss": 0.1,
                   "host_transfer": {"per_tensor_s": 1e-4, "bandwidth": 2e9}}}
    held = ["keras-transformer", "tf1-branches", "gpt2-tiny", "keras-branches"]
    run = [_row("rnnlm-tiny", "fit", 0.95, 0.1)] + [_row(g, "held out", 0.93, 0.12) for g in held] + [fit]
    worse = [dict(r, mape_after=0.2) if r.get("graph") == "gpt2-tiny" else r for r in run]
    text = cgf.table([run, run])
    assert text.count("**yes**") == 8 and "4 of 4" in text and text.endswith("met.")
    text = cgf.table([run, worse])
    assert "| gpt2-tiny | held out | 2 | 18 | 1.00-20.00 | 0.93 / 0.93 | 12% / 20% | no |" in text
    assert "3 of 4" in text and text.endswith("not met.")


def test_reuse_of_two_runs_prints_the_command_and_writes_markdown(tmp_path, capsys):
    cluster = load_cluster("local:2")
    names = ["rnnlm-tiny", "gpt2-tiny"]
    for k in (1, 2):  # two fake runs: simulated step times, jittered, as the measurements
        data = {}
        for name in names:
            graph = cgf.load_graph(name)
            seconds = analytical_costs(graph, cluster).seconds
            placements = cgf.placements_for(graph, cluster, 4, seed=k)
            simulated = [m.runtime_s for m in simulate_batch(graph, cluster, seconds, placements)]
            jitter = np.random.default_rng(k).uniform(0.9, 1.1, len(simulated))
            data[name] = {"placements": placements.tolist(), "measured_s": (np.array(simulated) * jitter).tolist(),
                          "op_seconds": seconds.tolist()}
        (tmp_path / f"run{k}.json").write_text(json.dumps({"cluster": "local:2", "measurements": data}))
    argv = ["--fit", "rnnlm-tiny", "--predict", "gpt2-tiny", "--costs", "measured", "--markdown",
            str(tmp_path / "table.md"), "--reuse", str(tmp_path / "run1.json"), str(tmp_path / "run2.json")]
    assert cgf.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("python -m experiments.cross_graph_fidelity --fit rnnlm-tiny")
    assert "| gpt2-tiny | held out | 2 | 6 |" in out and "Fit of run 2" in out
    assert (tmp_path / "table.md").read_text().startswith("`python -m experiments.cross_graph_fidelity --fit")
