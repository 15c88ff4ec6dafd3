"""Analytical per-op costs from grappler, their disk cache, and the step-time lower bound."""
import numpy as np
import pytest

from placement_env import costs as C


def test_shape_finite_nonnegative(tiny, paper2):
    costs = C.analytical_costs(tiny, paper2)
    assert costs.seconds.shape == (tiny.n_ops, paper2.n_devices)
    assert costs.seconds.dtype == np.float64
    assert np.all(np.isfinite(costs.seconds)) and np.all(costs.seconds >= 0)
    assert not costs.seconds.flags.writeable
    assert "grappler" in costs.source
    assert costs.seconds.sum() > 0
    # the two identical GPUs get identical columns
    np.testing.assert_array_equal(costs.seconds[:, 1], costs.seconds[:, 2])


def test_matmul_slower_on_cpu_than_faster_gpu(tiny, paper2):
    assert paper2.devices[1].peak_flops > paper2.devices[0].peak_flops
    costs = C.analytical_costs(tiny, paper2)
    matmuls = np.flatnonzero(tiny.op_types == "MatMul")
    assert matmuls.size
    compute = costs.seconds - paper2.op_overhead_s  # the fixed per-op overhead is larger on a GPU
    assert np.all(compute[matmuls, 0] > compute[matmuls, 1])


def test_every_op_pays_its_device_overhead(tiny, paper2):
    assert paper2.op_overhead_s[1] > paper2.op_overhead_s[0] > 0
    costs = C.analytical_costs(tiny, paper2)
    assert np.all(costs.seconds >= paper2.op_overhead_s - 1e-18)
    noops = np.flatnonzero(tiny.op_types == "NoOp")
    np.testing.assert_allclose(costs.seconds[noops], np.broadcast_to(paper2.op_overhead_s, (noops.size, 3)))


def test_device_properties_match_peak(paper2):
    for device in paper2.devices:
        props = C.device_properties(device)
        flops, bandwidth = C.grappler_rates(props)
        assert flops == pytest.approx(device.peak_flops, rel=1e-3)
        assert bandwidth == pytest.approx(device.memory_bandwidth, rel=1e-3)


def test_cache_hit_and_corrupt_file_recomputed(tiny, paper2, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_ENV_CACHE", str(tmp_path))
    runs = C.STATS["grappler_runs"]
    first = C.analytical_costs(tiny, paper2)
    assert C.STATS["grappler_runs"] == runs + 2  # one CPU type, one GPU type
    files = sorted(tmp_path.glob("costs-*.npz"))
    assert len(files) == 2
    hits = C.STATS["cache_hits"]
    second = C.analytical_costs(tiny, paper2)
    assert C.STATS["grappler_runs"] == runs + 2 and C.STATS["cache_hits"] == hits + 2
    np.testing.assert_array_equal(first.seconds, second.seconds)
    files[0].write_bytes(b"not an npz file")
    third = C.analytical_costs(tiny, paper2)
    assert C.STATS["grappler_runs"] == runs + 3
    np.testing.assert_array_equal(first.seconds, third.seconds)
    assert C.analytical_costs(tiny, paper2).seconds.shape == first.seconds.shape
    assert C.STATS["grappler_runs"] == runs + 3  # rewritten file is good again


def test_lower_bound_positive_and_parts(tiny, paper2):
    costs = C.analytical_costs(tiny, paper2)
    bound = C.lower_bound(tiny, paper2, costs)
    fastest = costs.seconds.min(axis=1)
    assert bound > 0
    assert bound >= C.critical_path(tiny, fastest) - 1e-15
    assert bound >= fastest.sum() / paper2.n_devices - 1e-15


def test_work_bound_is_valid_on_a_toy_instance():
    # 2 ops, 2 devices; best assignment: op0 -> d0, op1 -> d1, makespan 1.
    costs = C.OpCosts(seconds=np.array([[1.0, 4.0], [4.0, 1.0]]), source="toy")
    value = C.work_bound(costs)
    assert 0.5 <= value <= 1.0 + 1e-12
    # uniform speeds: work / devices exactly
    costs = C.OpCosts(seconds=np.ones((6, 3)), source="toy")
    assert C.work_bound(costs) == pytest.approx(2.0)
