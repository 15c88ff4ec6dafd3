"""Step times of placements from grappler's VirtualCluster."""
import numpy as np
import pytest

import placement_env as pe
from placement_env import costs as C
from placement_env.runtime.grappler import grappler_runtime


def _placements(graph, cluster, seed=0):
    rng = np.random.default_rng(seed)
    yield np.zeros(graph.n_groups, dtype=int)
    for d in range(1, cluster.n_devices):
        yield np.full(graph.n_groups, d)
    for _ in range(3):
        yield rng.integers(0, cluster.n_devices, graph.n_groups)


def test_runs_and_reports(tiny, paper2):
    m = grappler_runtime(tiny, paper2, np.ones(tiny.n_groups, dtype=int))
    assert m.ok and m.runtime == "grappler" and m.failure == ""
    assert np.isfinite(m.runtime_s) and m.runtime_s > 0
    assert m.peak_bytes.shape == (paper2.n_devices,)
    assert m.peak_bytes[1] > 0 and m.peak_bytes[0] == 0 and m.peak_bytes[2] == 0


def test_lower_bound_below_every_placement(tiny, paper2):
    data = paper2.to_dict()
    for device in data["devices"]:
        device["op_overhead_s"] = 0.0  # grappler models no per-op overhead
    cluster = pe.load_cluster(data)
    bound = C.lower_bound(tiny, cluster, C.analytical_costs(tiny, cluster))
    for placement in _placements(tiny, cluster):
        m = grappler_runtime(tiny, cluster, placement, peak_memory=False)
        assert m.ok
        assert 0 < bound <= m.runtime_s * (1 + 1e-9)


def test_single_gpu_faster_than_single_cpu(paper2):
    graph = pe.load_benchmark("rnnlm-tiny", hidden=256, batch=32)
    cpu = grappler_runtime(graph, paper2, np.zeros(graph.n_groups, dtype=int), peak_memory=False)
    gpu = grappler_runtime(graph, paper2, np.ones(graph.n_groups, dtype=int), peak_memory=False)
    assert cpu.ok and gpu.ok
    assert gpu.runtime_s < cpu.runtime_s


def test_wrong_length_placement(tiny, paper2):
    with pytest.raises(pe.InvalidPlacementError):
        grappler_runtime(tiny, paper2, np.zeros(tiny.n_groups + 1, dtype=int))
    with pytest.raises(pe.InvalidPlacementError):
        grappler_runtime(tiny, paper2, np.full(tiny.n_groups, paper2.n_devices))


def test_deterministic(tiny, paper2):
    placement = np.random.default_rng(3).integers(0, paper2.n_devices, tiny.n_groups)
    a = grappler_runtime(tiny, paper2, placement)
    b = grappler_runtime(tiny, paper2, placement)
    assert a.runtime_s == b.runtime_s
    np.testing.assert_array_equal(a.peak_bytes, b.peak_bytes)


def test_oom_when_memory_too_small(tiny, paper2):
    data = paper2.to_dict()
    for device in data["devices"]:
        if device["kind"] == "GPU":
            device["memory_bytes"] = 1024
    small = pe.load_cluster(data)
    m = grappler_runtime(tiny, small, np.ones(tiny.n_groups, dtype=int))
    assert not m.ok and m.failure == "oom"
    assert m.peak_bytes[1] > 1024


def test_no_kernel_is_a_failed_measurement(tiny, paper2):
    mask = np.array(tiny.device_mask)
    mask[0] = 0b01  # pretend op 0 is CPU-only
    from dataclasses import replace
    graph = replace(tiny, device_mask=mask)
    placement = np.ones(graph.n_groups, dtype=int)
    m = grappler_runtime(graph, paper2, placement)
    assert not m.ok and m.failure == "no_kernel"
