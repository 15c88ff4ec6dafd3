"""pe.evaluate / Evaluator / pe.lower_bound: one entry point over the three runtimes."""
import numpy as np
import pytest

import placement_env as pe
from placement_env.costs import analytical_costs
from placement_env.runtime.simulated import simulate


def _gpu_where_possible(graph, device=1):
    return np.where(graph.group_device_mask & 0b10, device, 0)


def test_sim_is_the_default_and_matches_the_simulator(tiny, paper2):
    placement = _gpu_where_possible(tiny)
    m = pe.evaluate(tiny, paper2, placement)
    direct = simulate(tiny, paper2, analytical_costs(tiny, paper2).seconds, placement)
    assert m.runtime == "sim" and m.ok
    assert m.runtime_s == direct.runtime_s
    np.testing.assert_array_equal(m.peak_bytes, direct.peak_bytes)


def test_names_are_accepted_for_graph_and_cluster(tiny):
    m = pe.evaluate("rnnlm-tiny", "paper-2gpu", _gpu_where_possible(tiny))
    assert m.ok and m.runtime_s > 0


def test_grappler_runtime_through_evaluate(tiny, paper2):
    m = pe.evaluate(tiny, paper2, _gpu_where_possible(tiny), runtime="grappler")
    assert m.runtime == "grappler" and m.ok and m.runtime_s > 0


def test_schedule_only_for_the_simulator(tiny, paper2):
    placement = _gpu_where_possible(tiny)
    m = pe.evaluate(tiny, paper2, placement, schedule=True)
    assert m.schedule.op_end.shape == (tiny.n_ops,)
    with pytest.raises(ValueError, match="schedule=True needs runtime='sim'"):
        pe.evaluate(tiny, paper2, placement, runtime="grappler", schedule=True)


def test_lower_bound_below_random_placements(tiny, paper2):
    bound = pe.lower_bound(tiny, paper2)
    assert bound > 0
    rng = np.random.default_rng(0)
    placements = np.where(tiny.group_device_mask & 0b10, rng.integers(0, 3, (20, tiny.n_groups)), 0)
    with pe.Evaluator(tiny, paper2) as evaluator:
        assert evaluator.lower_bound() == bound
        results = evaluator.batch(placements)
        assert [m.runtime_s for m in results] == [evaluator(p).runtime_s for p in placements]
    assert all(m.ok and m.runtime_s >= bound for m in results)


def test_given_costs_are_used(tiny, paper2):
    placement = _gpu_where_possible(tiny)
    base = pe.evaluate(tiny, paper2, placement)
    doubled = pe.evaluate(tiny, paper2, placement, costs=analytical_costs(tiny, paper2).seconds * 2)
    assert doubled.runtime_s > base.runtime_s
    with pytest.raises(ValueError, match=r"costs have shape \(3, 3\)"):
        pe.evaluate(tiny, paper2, placement, costs=np.ones((3, 3)))


@pytest.mark.parametrize("bad, message", [
    (lambda p: p[:-1], "expected \\("),
    (lambda p: p.astype(float), "dtype float64; expected integers"),
    (lambda p: p.astype(bool), "dtype bool"),
    (lambda p: np.full_like(p, -1), "uses device -1"),
    (lambda p: np.full_like(p, 3), "uses device 3, but cluster 'paper-2gpu' has devices 0..2"),
])
def test_bad_placements_are_specific_errors(tiny, paper2, bad, message):
    with pytest.raises(pe.InvalidPlacementError, match=message):
        pe.evaluate(tiny, paper2, bad(_gpu_where_possible(tiny)))


def test_placement_for_a_bigger_cluster(tiny, paper2):
    four = pe.load_cluster("paper-4gpu")
    placement = _gpu_where_possible(tiny, device=4)
    assert pe.evaluate(tiny, four, placement).ok
    with pytest.raises(pe.InvalidPlacementError, match="uses device 4.*devices 0..2"):
        pe.evaluate(tiny, paper2, placement)


def test_unknown_runtime_and_bad_arguments(tiny, paper2):
    placement = _gpu_where_possible(tiny)
    with pytest.raises(ValueError, match="runtime='simulated'; expected one of 'sim', 'grappler', 'measured'"):
        pe.evaluate(tiny, paper2, placement, runtime="simulated")
    with pytest.raises(TypeError, match="graph is a list"):
        pe.evaluate([1, 2], paper2, placement)
    with pytest.raises(pe.UnknownClusterError):
        pe.evaluate(tiny, "paper-3gpu", placement)
    with pytest.raises(ValueError, match="measured_options are for runtime='measured'"):
        pe.Evaluator(tiny, paper2, "sim", measured_options={"steps": 3})


@pytest.mark.slow
def test_measured_runtime_through_evaluate_reuses_its_workers(tiny):
    from placement_env import evaluation as E

    placement = np.arange(tiny.n_groups) % 2
    first = pe.evaluate(tiny, "local:2", placement, runtime="measured")
    assert first.ok and first.runtime == "measured" and first.runtime_s > 0, first.message
    workers = E._shared_measured_runtime(pe.load_cluster("local:2")).workers
    pids = workers.worker_pids
    second = pe.evaluate(tiny, "local:2", placement[::-1].copy(), runtime="measured")
    assert second.ok and workers.worker_pids == pids
    with pytest.raises(ValueError, match="takes neither"):
        pe.evaluate(tiny, "local:2", placement, runtime="measured", schedule=True)
    workers.close()
