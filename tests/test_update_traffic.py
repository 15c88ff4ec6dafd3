"""The memory-traffic floor of variable updates (``costs.update_traffic_bytes``, ``Cluster.update_traffic``) on
real TF optimizer steps, and the experiment that measures the gap it closes."""
import dataclasses
import json

import numpy as np
import pytest

import placement_env as pe
from experiments import update_traffic as experiment
from placement_env.costs import UPDATE_PREFIX, achieved_rates, analytical_costs, update_traffic_bytes

N = 4096  # elements of the variable: 16 KiB
SLOTS = {"GradientDescent": 0, "Momentum": 1, "Adam": 2}  # optimiser slots per variable


@pytest.mark.parametrize("optimizer", experiment.OPTIMIZERS)
def test_an_update_moves_its_gradient_and_reads_and_writes_its_variable_and_slots(optimizer):
    graph = experiment.optimizer_step(optimizer, N)
    traffic = update_traffic_bytes(graph)
    types = np.asarray(graph.op_types, dtype=str)
    update = np.flatnonzero(np.char.startswith(types, UPDATE_PREFIX))
    assert update.size == 1 and np.count_nonzero(traffic) == 1 and traffic[update[0]] > 0
    variable = 4 * N
    least = variable * (1 + 2 * (1 + SLOTS[optimizer]))  # the gradient read; the variable and slots read and written
    assert least <= traffic[update[0]] <= least + 64  # and the scalars (learning rate, Adam's betas and powers)


def test_the_floor_binds_only_on_updates_and_only_on_clusters_that_ask_for_it():
    graph = experiment.optimizer_step("Momentum", N)
    cluster = pe.load_cluster("k80-2gpu")
    # a slow memory, so that the floor binds on every device
    slow = tuple(dataclasses.replace(d, memory_bandwidth=1e6, memory_efficiency=1.0) for d in cluster.devices)
    off = dataclasses.replace(cluster, devices=slow)
    on = dataclasses.replace(off, update_traffic=True)
    without, floored = analytical_costs(graph, off).seconds, analytical_costs(graph, on).seconds
    update = int(np.flatnonzero(update_traffic_bytes(graph))[0])
    others = np.arange(graph.n_ops) != update
    np.testing.assert_array_equal(floored[others], without[others])
    bandwidth = np.array([achieved_rates(d)[1] for d in on.devices])
    expected = update_traffic_bytes(graph)[update] / bandwidth + on.op_overhead_s
    np.testing.assert_allclose(floored[update], expected, rtol=1e-12)
    assert np.all(floored[update] > 2 * without[update])  # grappler sees the gradient only
    np.testing.assert_array_equal(analytical_costs(graph, cluster).seconds,
                                  analytical_costs(graph, dataclasses.replace(cluster)).seconds)


def test_the_gap_table_prints_a_row_per_op_class(capsys):
    assert experiment.main(["--benchmarks", "rnnlm-tiny"]) == 0
    out = capsys.readouterr().out
    assert "k80-2gpu, gpu:0: achieved memory bandwidth 120 GB/s" in out
    assert "| rnnlm-tiny | updates |" in out


def test_replay_reports_each_task_of_a_results_file(tmp_path, capsys):
    from placement_env.harness import run_suite

    path = tmp_path / "rows.jsonl"
    run_suite("tiny", ["single_cpu", "single_gpu", "random_search"], path, budget=5, seeds=[0], progress=False)
    assert experiment.main(["--replay", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {path} |")]
    assert lines and all("| 3 |" in line and "x (median" in line for line in lines)
    row = json.loads(path.read_text().splitlines()[0])
    row["runtime_s"] *= 1.01  # a row that does not reproduce is not replayed
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(SystemExit, match="validate the file first"):
        experiment.main(["--replay", str(path)])
