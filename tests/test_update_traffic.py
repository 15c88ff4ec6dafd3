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
# Passes of the variable's size that each update's kernel makes, per device kind (costs.UPDATE_EXTRA_PASSES): plain
# SGD reads the gradient and the variable and writes the variable; momentum two expressions over the accumulator
# and the variable; Adam one GPU kernel over var, m, v and the gradient, but three CPU expressions per shard.
PASSES = {("GradientDescent", "CPU"): 3, ("GradientDescent", "GPU"): 3, ("Momentum", "CPU"): 6,
          ("Momentum", "GPU"): 6, ("Adam", "CPU"): 10, ("Adam", "GPU"): 7}
PRESETS_WITH_THE_FLOOR = ("k80-2gpu", "k80-4gpu", "dgx1-v100-4gpu", "dgx-h100-8gpu")


@pytest.mark.parametrize(("optimizer", "kind"), sorted(PASSES))
def test_an_update_moves_what_its_kernel_reads_and_writes(optimizer, kind):
    graph = experiment.optimizer_step(optimizer, N)
    traffic = update_traffic_bytes(graph, kind)
    types = np.asarray(graph.op_types, dtype=str)
    update = np.flatnonzero(np.char.startswith(types, UPDATE_PREFIX))
    assert update.size == 1 and np.count_nonzero(traffic) == 1
    least = 4 * N * PASSES[optimizer, kind]
    assert least <= traffic[update[0]] <= least + 64  # and the scalars (learning rate, Adam's betas and powers)


def test_a_device_kind_must_be_one_the_graphs_know():
    with pytest.raises(ValueError, match="kind = 'TPU': must be one of CPU, GPU"):
        update_traffic_bytes(experiment.optimizer_step("Momentum", N), "TPU")


def test_the_floor_binds_only_on_updates_and_only_on_clusters_that_ask_for_it():
    graph = experiment.optimizer_step("Adam", N)  # 10 passes on the CPU, 7 on a GPU
    cluster = pe.load_cluster("k80-2gpu")
    # a slow memory, so that the floor binds on every device
    slow = tuple(dataclasses.replace(d, memory_bandwidth=1e6, memory_efficiency=1.0) for d in cluster.devices)
    off = dataclasses.replace(cluster, devices=slow, update_traffic=False)
    on = dataclasses.replace(off, update_traffic=True)
    without, floored = analytical_costs(graph, off).seconds, analytical_costs(graph, on).seconds
    update = int(np.flatnonzero(update_traffic_bytes(graph, "GPU"))[0])
    others = np.arange(graph.n_ops) != update
    np.testing.assert_array_equal(floored[others], without[others])
    traffic = np.array([update_traffic_bytes(graph, d.kind)[update] for d in on.devices])
    bandwidth = np.array([achieved_rates(d)[1] for d in on.devices])
    np.testing.assert_allclose(floored[update], traffic / bandwidth + on.op_overhead_s, rtol=1e-12)
    assert np.all(floored[update] > 2 * without[update])  # grappler sees the gradient only


@pytest.mark.parametrize("name", ["paper-2gpu", "paper-4gpu", "local:2", *PRESETS_WITH_THE_FLOOR])
def test_the_machines_as_built_charge_the_floor_and_the_ideal_and_local_ones_do_not(name):
    assert pe.load_cluster(name).update_traffic == (name in PRESETS_WITH_THE_FLOOR)


def test_an_update_on_a_preset_takes_at_least_its_bytes_at_the_achieved_bandwidth():
    graph = experiment.optimizer_step("Momentum", 2**20)  # 4 MiB: 24 MiB of traffic
    cluster = pe.load_cluster("k80-2gpu")
    update = int(np.flatnonzero(update_traffic_bytes(graph, "GPU"))[0])
    seconds = analytical_costs(graph, cluster).seconds[update]
    floor = np.array([update_traffic_bytes(graph, d.kind)[update] / achieved_rates(d)[1] for d in cluster.devices])
    assert np.all(seconds >= floor + cluster.op_overhead_s)
    grappler = analytical_costs(graph, dataclasses.replace(cluster, update_traffic=False)).seconds[update]
    assert np.all(seconds > 2 * grappler)  # on the K80's die and its host alike, the traffic binds


def test_rows_made_on_a_preset_before_it_charged_the_floor_are_stale(tmp_path):
    from placement_env.harness import run_suite, validate

    path = tmp_path / "rows.jsonl"
    run_suite("tiny", ["single_gpu"], path, seeds=[0], progress=False)
    before = dataclasses.replace(pe.load_cluster("k80-2gpu"), update_traffic=False)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:  # as if made on k80-2gpu without the floor: the same devices, another digest
        row["cluster"], row["versions"]["cluster"] = "k80-2gpu", before.digest
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    checked, mismatches = validate(path, progress=False)
    assert checked == 0 and len(mismatches) == len(rows)
    assert all(m.stale and "now defined differently" in m.reason for m in mismatches)


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
