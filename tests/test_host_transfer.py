"""Transfers between CPU worker processes as CPU work on both ends (``Cluster.host_transfer``):
the simulator, the cluster JSON, and the ``local:N`` preset."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster import Cluster, HostTransfer
from placement_env.errors import ClusterConfigError
from placement_env.runtime.simulated import simulate, simulate_batch
from test_simulated import BW, LAT, make_cluster, make_graph, seconds

NBYTES = 4_000_000
HOST = HostTransfer(per_tensor_s=0.01, bandwidth=1e9)
TASK = 0.01 + NBYTES / 1e9  # one end's CPU seconds for the tensor


def cpus(n=2, host=HOST, concurrency=None):
    return dataclasses.replace(make_cluster(("CPU",) * n, concurrency=concurrency), host_transfer=host)


def sender_with_a_local_successor():
    """op0 sends NBYTES to op1 (another device) and 8 bytes to op2 (its own device); 1 s each."""
    return make_graph(3, [(0, 1, 0, NBYTES), (0, 2, 1, 8)], outputs=[[NBYTES, 8], [], []]), seconds([1.0, 1.0, 1.0])


def test_a_cross_worker_tensor_delays_the_senders_next_op_by_its_encoding():
    g, costs = sender_with_a_local_successor()
    on = simulate(g, cpus(), costs, [0, 1, 0], schedule=True)
    # the sender encodes (TASK), the link waits (LAT + bytes / BW), the receiver decodes (TASK)
    assert on.schedule.op_start[2] == pytest.approx(1.0 + TASK)
    assert on.schedule.op_start[1] == pytest.approx(1.0 + TASK + LAT + NBYTES / BW + TASK)
    assert on.runtime_s == pytest.approx(2.0 + 2 * TASK + LAT + NBYTES / BW)
    assert on.busy_s.tolist() == pytest.approx([2.0 + TASK, 1.0 + TASK])  # the tasks are CPU time
    assert on.schedule.transfer_end[0] == pytest.approx(on.schedule.op_start[1])  # delivered after decoding
    off = simulate(g, cpus(host=None), costs, [0, 1, 0], schedule=True)
    assert off.schedule.op_start[2] == pytest.approx(1.0)  # without it the sender goes straight on
    assert off.runtime_s == pytest.approx(2.0 + LAT + NBYTES / BW)
    assert simulate(g, cpus(), costs, [0, 0, 0]).runtime_s == pytest.approx(3.0)  # same device: free


def test_a_busy_receiver_decodes_when_its_lane_is_free():
    # op2 (2 s) runs on the receiver from t=0, so the tensor that arrives at 1 + TASK + link waits
    g = make_graph(3, [(0, 1, 0, NBYTES)], outputs=[[NBYTES], [], []])
    costs = seconds([1.0, 1.0, 2.0])
    m = simulate(g, cpus(), costs, [0, 1, 1], schedule=True)
    assert m.schedule.op_start[1] == pytest.approx(2.0 + TASK)
    # on a device with four lanes it decodes beside op2 at once, at half the device's throughput
    arrival = 1.0 + TASK + LAT + NBYTES / BW
    shared = simulate(g, cpus(concurrency=(4, 4)), costs, [0, 1, 1], schedule=True)
    assert shared.schedule.op_start[1] == pytest.approx(arrival + 2 * TASK)


def test_one_worker_sending_to_two_encodes_one_tensor_after_the_other():
    edges = [(0, 1, 0, NBYTES), (0, 2, 1, NBYTES)]
    g = make_graph(3, edges, outputs=[[NBYTES, NBYTES], [], []])
    costs = seconds(np.zeros(3), 3)
    one = TASK + LAT + NBYTES / BW + TASK
    two = simulate(g, cpus(3), costs, [0, 1, 2]).runtime_s
    assert two == pytest.approx(one + TASK)  # the second waits for the sender's thread
    assert simulate(g, cpus(3, host=None), costs, [0, 1, 2]).runtime_s == pytest.approx(LAT + NBYTES / BW)


def test_batch_equals_one_by_one_with_host_transfers():
    rng = np.random.default_rng(0)
    n = 30
    edges = [(int(a), int(b), 0, int(rng.integers(8, 10**6))) for a, b in
             {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(60)}]
    edges += [(a, b, -1, 0) for a, b in {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(20)}]
    g = make_graph(n, edges, outputs=[[10**6]] * n)
    costs = seconds(rng.uniform(0.0, 0.01, n), 3)
    placements = rng.integers(0, 3, (20, n))
    batch = simulate_batch(g, cpus(3), costs, placements)
    for p, m in zip(placements, batch):
        assert m.runtime_s == simulate(g, cpus(3), costs, p).runtime_s
    assert [m.runtime_s for m in batch] != [m.runtime_s for m in simulate_batch(g, cpus(3, host=None), costs, placements)]


def test_host_transfer_json_round_trip_and_bad_values():
    cluster = cpus()
    data = cluster.to_dict()
    assert data["host_transfer"] == {"per_tensor_s": 0.01, "bandwidth": 1e9}
    assert Cluster.from_json(json.dumps(data)) == cluster
    assert "host_transfer" not in cpus(host=None).to_dict()
    for value, message in [
        ({"per_tensor_s": -1e-4, "bandwidth": 1e9}, r"host_transfer.per_tensor_s = -0.0001: must be a finite number of seconds >= 0"),
        ({"per_tensor_s": 1e-4, "bandwidth": 0}, r"host_transfer.bandwidth = 0: must be a positive number of bytes/s"),
        ({"per_tensor_s": 1e-4, "bandwidth": "fast"}, r'host_transfer.bandwidth = "fast"'),
        ({"per_tensor_s": 1e-4}, r'the keys "per_tensor_s" \(seconds >= 0\) and "bandwidth" \(bytes/s > 0\), and '
                                  r'optionally "remote_step_s"'),
        ({"per_tensor_s": 1e-4, "bandwidth": 1e9, "latency": 1}, r"optionally \"remote_step_s\""),
        ({"per_tensor_s": 1e-4, "bandwidth": 1e9, "remote_step_s": -1}, r"host_transfer.remote_step_s = -1: must be"),
        (True, r"host_transfer = true: must be a JSON object"),
    ]:
        with pytest.raises(ClusterConfigError, match=message):
            Cluster.from_dict({**data, "host_transfer": value})
    gpus = make_cluster(("CPU", "GPU")).to_dict()
    with pytest.raises(ClusterConfigError, match=r'absent on a cluster with a GPU \(device "gpu:1"\)'):
        Cluster.from_dict({**gpus, "host_transfer": {"per_tensor_s": 1e-4, "bandwidth": 1e9}})


def test_remote_step_is_in_the_json_only_when_set():
    with_step = cpus(host=HostTransfer(0.01, 1e9, remote_step_s=0.002))
    assert with_step.to_dict()["host_transfer"] == {"per_tensor_s": 0.01, "bandwidth": 1e9, "remote_step_s": 0.002}
    assert Cluster.from_json(with_step.to_json()) == with_step
    assert with_step.digest != cpus().digest
    assert "remote_step_s" not in cpus().to_dict()["host_transfer"]  # unset: the JSON (and digest) of before


def test_a_step_that_uses_a_worker_besides_the_master_pays_the_remote_step_once():
    g, costs = sender_with_a_local_successor()
    step = 0.005
    remote = cpus(host=HostTransfer(0.01, 1e9, remote_step_s=step))
    for placement in ([0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1]):
        without = simulate(g, cpus(), costs, placement).runtime_s
        expected = without + (step if max(placement) > 0 else 0.0)  # all on device 0 (the master): none
        assert simulate(g, remote, costs, placement).runtime_s == pytest.approx(expected)
    placements = np.array([[0, 0, 0], [1, 1, 1], [0, 1, 0]])
    assert [m.runtime_s for m in simulate_batch(g, remote, costs, placements)] == [
        simulate(g, remote, costs, p).runtime_s for p in placements]


def test_the_fit_recovers_a_remote_step_from_step_times_it_made():
    from placement_env.calibration import fit_datasets
    from placement_env.calibration.fit import Dataset

    rng = np.random.default_rng(1)
    n = 24
    edges = [(i, j, 0, 50_000) for i in range(n) for j in (i + 1, i + 3) if j < n]
    g = make_graph(n, edges, outputs=[[50_000]] * n)
    base = seconds(rng.uniform(1e-4, 1e-3, n), 2)
    truth = cpus(host=HostTransfer(2e-4, 1e9, remote_step_s=1e-3))
    placements = np.vstack([rng.integers(0, 2, (30, n)), np.zeros((1, n), int), np.ones((1, n), int)])
    measured = np.array([m.runtime_s for m in simulate_batch(g, truth, base, placements)])
    start = cpus(host=HostTransfer(5e-5, 1e9))
    fit = fit_datasets([Dataset(g, base, placements, measured)], start, fit_scale=False, fit_overhead=False,
                       overhead0=1e-9, host_bandwidth=1e9, fit_remote_step=True)
    assert fit.host_transfer.remote_step_s == pytest.approx(1e-3, rel=0.05)
    assert fit.host_transfer.per_tensor_s == pytest.approx(2e-4, rel=0.05)


def test_local_workers_pay_host_transfers_and_the_gpu_presets_do_not():
    local = pe.load_cluster("local:2")
    assert local.host_transfer is not None
    assert "of its CPU (host transfer)" in local.describe()
    for name in pe.cluster.preset_names():
        assert pe.load_cluster(name).host_transfer is None


def test_a_changed_simulator_source_drops_every_compiled_cache(tmp_path):
    from placement_env.runtime.compiled_cache import COMPILED_MODULES, STAMP, drop_stale_caches

    for module in COMPILED_MODULES:
        (tmp_path / f"{module}.py").write_text(f"# {module}\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    cached = [cache / f"{module}.f-1.py311.nbi" for module in COMPILED_MODULES] + [cache / "other.f-1.py311.nbi"]
    for path in cached:
        path.write_text("")
    assert drop_stale_caches(tmp_path)  # no stamp yet: the caches may come from any source
    assert [p.exists() for p in cached] == [False] * len(COMPILED_MODULES) + [True]
    for path in cached:
        path.write_text("")
    assert not drop_stale_caches(tmp_path) and all(p.exists() for p in cached)  # unchanged sources: kept
    (tmp_path / "simulator_core.py").write_text("# edited\n")  # only the core changes ...
    assert drop_stale_caches(tmp_path)
    assert not (cache / "simulator_batch.f-1.py311.nbi").exists()  # ... and its callers' caches go too
    assert (cache / STAMP).read_text() != ""
