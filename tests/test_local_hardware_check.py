"""The real-hardware check end to end, small: calibrate on local:2, train on the calibrated simulator, measure
candidates and the exported graphs on real TF workers (slow: real execution; run in CI)."""
import json

import pytest
from tensorflow.core.framework import graph_pb2

from experiments.local_hardware_check import main
from placement_env.benchmarks import load_benchmark
from placement_env.cluster import load_cluster


@pytest.mark.slow
def test_check_runs_end_to_end_and_reports_real_measurements(tmp_path, capsys):
    assert main(["--calibration-placements", "6", "--budget", "64", "--candidates", "2", "--rounds", "1",
                 "--out-dir", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "check.json").read_text())
    assert record["benchmark"] == "rnnlm-tiny" and record["cluster"] == "local:2"
    for name in ("learned", "expert"):
        (seconds,) = record["measured_s"][name]
        assert 0 < seconds < 10  # a real step of rnnlm-tiny: milliseconds
        assert record["median_s"][name] == seconds
    assert record["learned_over_expert"] == pytest.approx(record["median_s"]["learned"] / record["median_s"]["expert"])
    # the exported graph is the learned placement: every node on the local worker its group was given
    cluster = load_cluster("local:2")
    graph = load_benchmark("rnnlm-tiny")
    graph_def = graph_pb2.GraphDef.FromString((tmp_path / "learned.pb").read_bytes())
    devices = {node.name: node.device for node in graph_def.node}
    placement = record["learned_placement"]
    for op in range(graph.n_ops):
        assert devices[graph.op_names[op]] == cluster.devices[placement[graph.group[op]]].tf_device
    assert (tmp_path / "training" / "checkpoint.pt").exists()
    assert "learned / expert" in capsys.readouterr().out
