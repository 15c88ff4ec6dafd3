"""The exact side (placement_env.exact): the relaxed model, the window bound, CP-SAT in its own process, the cp_sat
method, and bounds files. Every bound is checked against simulated placements: none may run faster."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import placement_env as pe
from placement_env.errors import ArgumentError, MethodArgumentError, ResultsFormatError, SolverError
from placement_env.exact import isolated, relax
from placement_env.exact.blocks import block_model, block_schedule, blocks, levels
from placement_env.exact.bounds import densest_window, heads_and_tails, window_bound
from placement_env.exact.relaxation import device_rates, model_schedule
from placement_env.harness.bounds_file import gap, read_bounds, write_bounds
from placement_env.harness.results import check_row
from placement_env.harness.suites import Task


@pytest.fixture(scope="module")
def small():
    """rnnlm-tiny in 6 groups on k80-2gpu (CPU and two K80 dies): 729 placements, every one simulated."""
    graph = pe.load_benchmark("rnnlm-tiny", max_groups=6)
    cluster = pe.load_cluster("k80-2gpu")
    evaluator = pe.Evaluator(graph, cluster)
    allowed = pe.allowed_devices(graph, cluster)
    every = np.array(list(itertools.product(*[np.flatnonzero(a) for a in allowed])))
    runtimes = np.array([m.runtime_s if m.ok else np.inf for m in evaluator.batch(every)])
    return graph, cluster, evaluator, every, runtimes


def test_densest_window_is_the_best_window_by_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 12))
        head, tail = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, n).astype(float)
        seconds = rng.random(n)
        brute = max(h + q + seconds[(head >= h) & (tail >= q)].sum()
                    for h in head for q in tail if ((head >= h) & (tail >= q)).any())
        value, h, q = densest_window(head, tail, seconds)
        assert value == pytest.approx(brute)
        assert value == pytest.approx(h + q + seconds[(head >= h) & (tail >= q)].sum())


def test_heads_and_tails_hold_in_every_simulated_schedule(small):
    graph, cluster, evaluator, every, _ = small
    share, _ = device_rates(cluster)
    fastest = np.where(pe.allowed_devices(graph, cluster)[graph.group], evaluator.costs.seconds / share, np.inf).min(1)
    processing = np.where(np.asarray(cluster.concurrency)[None, :] > 1, evaluator.costs.seconds / device_rates(cluster)[1], evaluator.costs.seconds / share)
    head, tail = heads_and_tails(graph, fastest, np.where(pe.allowed_devices(graph, cluster)[graph.group], processing, np.inf))
    for placement in every[::37]:
        m = evaluator(placement, schedule=True)
        assert np.all(m.schedule.op_start >= head - 1e-12)
        assert np.all(m.schedule.op_end <= m.runtime_s - tail + 1e-12)


def test_no_placement_beats_the_window_bound_and_it_is_tighter_than_the_classic(small):
    graph, cluster, evaluator, every, runtimes = small
    found = window_bound(graph, cluster, evaluator.costs, time_limit_s=30)
    assert found.status == "optimal"
    classic = pe.lower_bound(graph, cluster)
    assert found.value_s >= classic and found.parts["windows"] > found.parts["critical_path"]
    assert runtimes.min() >= found.value_s
    assert found.value_s > 1.3 * classic  # the windows see that one die cannot take both LSTM layers at once


def test_the_relaxation_and_cp_sat_bound_hold(small):
    graph, cluster, evaluator, every, runtimes = small
    result = pe.solve_exact(graph, cluster, evaluator.costs, time_limit_s=10)
    assert result.status in ("OPTIMAL", "FEASIBLE") and result.placement is not None
    assert result.bound_s <= result.makespan_s + 1e-12
    assert runtimes.min() >= result.bound_s
    assert result.placement.shape == (graph.n_groups,) and evaluator(result.placement).ok
    assert pe.lower_bound(graph, cluster, method="cp_sat", time_limit_s=5) <= runtimes.min()


def test_the_model_schedule_obeys_the_relaxed_model(small):
    graph, cluster, evaluator, every, _ = small
    placement = every[len(every) // 2]
    starts, makespan = model_schedule(graph, cluster, evaluator.costs.seconds, placement)
    model = relax(graph, cluster, evaluator.costs.seconds, makespan)
    dev = placement[graph.group]
    ticks = np.floor(starts / model.tick_s).astype(np.int64)
    ends = ticks + model.duration[np.arange(graph.n_ops), dev]
    src, dst = model.edges[:, 0], model.edges[:, 1]
    assert np.all(ticks[dst] >= ends[src])
    for k, e in enumerate(model.cross.tolist()):
        u, v = model.edges[e]
        assert ticks[v] >= ends[u] + model.lag[k, dev[u], dev[v]]
    assert ends.max() <= 1_000_001


def test_blocks_split_groups_into_a_dag_in_topological_order(small):
    graph, cluster, evaluator, _, _ = small
    found = blocks(graph, cluster, evaluator.costs.seconds)
    assert found.of_op.shape == (graph.n_ops,) and found.n_blocks >= graph.n_groups
    assert np.array_equal(found.group[found.of_op], graph.group)  # a block holds one group's ops
    assert np.all(found.edges[:, 0] < found.edges[:, 1])  # every edge goes forward: a DAG, numbered in order
    level = levels(graph)
    for b in range(found.n_blocks):
        assert len(np.unique(level[found.of_op == b])) == 1
    # a block on a GPU lasts its ops' summed seconds there
    gpu = int(np.flatnonzero(np.asarray(cluster.concurrency) == 1)[0])
    assert np.allclose(np.bincount(found.of_op, evaluator.costs.seconds[:, gpu]), found.seconds[:, gpu])
    # lags: none on one device, a transfer's worth between devices of different groups
    cross = found.group[found.edges[:, 0]] != found.group[found.edges[:, 1]]
    assert np.all(found.lag_s[:, np.arange(3), np.arange(3)] == 0) and np.all(found.lag_s[~cross] == 0)
    assert np.all(found.lag_s[cross][:, 1, 2] >= cluster.transfer_overhead_s)


def test_cp_sat_proves_the_block_model_and_no_placement_schedules_below_it(small):
    graph, cluster, evaluator, every, runtimes = small
    found = blocks(graph, cluster, evaluator.costs.seconds)
    list_makespans = np.array([block_schedule(graph, cluster, found, p)[1] for p in every])
    result = pe.solve_exact(graph, cluster, evaluator.costs, time_limit_s=20, model="blocks", workers=2)
    assert result.model == "blocks" and result.status == "OPTIMAL"
    tick = list_makespans.max() / 1_000_000  # the model's ticks round durations down: a tick a block at most
    assert result.makespan_s <= list_makespans.min() + tick  # a list schedule is one schedule the model admits
    assert result.makespan_s >= list_makespans.min() * 0.5
    assert block_schedule(graph, cluster, found, result.placement)[1] >= result.makespan_s - found.n_blocks * tick
    assert evaluator(result.placement).ok
    with pytest.raises(ArgumentError, match="'relaxed', 'blocks'"):
        pe.solve_exact(graph, cluster, evaluator.costs, model="ops")


def test_the_block_schedule_obeys_the_block_model(small):
    graph, cluster, evaluator, every, _ = small
    found = blocks(graph, cluster, evaluator.costs.seconds)
    placement = every[len(every) // 3]
    starts, makespan = block_schedule(graph, cluster, found, placement)
    model = block_model(graph, cluster, found, makespan)
    dev = placement[model.group]
    ticks = np.floor(starts / model.tick_s).astype(np.int64)
    ends = ticks + model.duration[np.arange(model.n_ops), dev]
    for k, e in enumerate(model.cross.tolist()):
        u, v = model.edges[e]
        assert ticks[v] >= ends[u] + model.lag[k, dev[u], dev[v]]
    assert np.all(ticks[model.edges[:, 1]] >= ends[model.edges[:, 0]])
    for d in range(cluster.n_devices):  # one block at a time on every device
        on = np.flatnonzero(dev == d)
        order = on[np.argsort(ticks[on])]
        assert np.all(ticks[order[1:]] >= ends[order[:-1]])


def test_a_crashed_solver_process_raises_and_leaves_the_caller_usable(small, monkeypatch):
    graph, cluster, evaluator, _, _ = small
    model = relax(graph, cluster, evaluator.costs.seconds, 1.0)
    monkeypatch.setattr(isolated, "CHILD_MODULE", "placement_env.exact.no_such_module")
    with pytest.raises(SolverError, match="exited with code 1"):
        isolated.solve_isolated(model, cluster, time_limit_s=1)
    assert evaluator(np.zeros(graph.n_groups, np.int64)).runtime_s > 0


def test_bad_bound_arguments_name_what_is_accepted():
    with pytest.raises(ArgumentError, match="'classic', 'windows', 'cp_sat'"):
        pe.lower_bound("rnnlm-tiny", "paper-2gpu", method="exact")
    with pytest.raises(ArgumentError, match="time_limit_s"):
        pe.bound("rnnlm-tiny", "paper-2gpu", time_limit_s=0)


def test_cp_sat_method_records_the_solver_and_spends_at_most_its_budget(small):
    graph, cluster, evaluator, _, runtimes = small
    problem = pe.Problem.make(graph, cluster, budget=6)
    solution = pe.solve(pe.method("cp_sat", time_limit_s=5), problem)
    assert solution.evaluations <= 6
    assert solution.info["solver_status"] in ("OPTIMAL", "FEASIBLE")
    assert solution.info["solver_bound_s"] <= runtimes.min()
    assert evaluator(solution.placement).runtime_s <= problem.best.runtime_s + 1e-15
    assert solution.info["solver_model"] == "relaxed"
    blocked = pe.solve(pe.method("cp_sat", time_limit_s=5, model="blocks"), pe.Problem.make(graph, cluster, budget=6))
    assert blocked.info["solver_model"] == "blocks/1" and blocked.evaluations <= 6
    assert evaluator(blocked.placement).ok


def test_problem_record_takes_json_scalars_only(small):
    graph, cluster, _, _, _ = small
    problem = pe.Problem.make(graph, cluster)
    problem.record(status="OPTIMAL", seconds=np.float64(1.5), solutions=3, proven=None)
    assert problem.info == {"status": "OPTIMAL", "seconds": 1.5, "solutions": 3, "proven": None}
    with pytest.raises(MethodArgumentError, match="record"):
        problem.record(bound=float("nan"))
    with pytest.raises(MethodArgumentError, match="record"):
        problem.record(placement=[1, 2])


def test_a_row_with_malformed_method_info_is_refused():
    row = {"suite": "s", "task": "t", "benchmark": "b", "cluster": "paper-2gpu", "runtime": "sim", "method": "m",
           "seed": 0, "budget": 0, "placement": [0], "runtime_s": 1.0, "ok": True, "failure": "", "message": "",
           "evaluations": 0, "wall_s": 0.0, "lower_bound_s": 0.5, "versions": {}}
    assert check_row({**row, "method_info": {"solver_status": "OPTIMAL", "solver_bound_s": 0.7}}, "here")
    with pytest.raises(ResultsFormatError, match="method_info"):
        check_row({**row, "method_info": {"solver": [1]}}, "here")


def test_bounds_files_give_gaps_and_skip_tasks_they_have(tmp_path):
    task = Task("rnnlm-tiny-2gpu", "rnnlm-tiny", "paper-2gpu")
    path = tmp_path / "bounds.jsonl"
    written = write_bounds("mine", path, method="windows", time_limit_s=10, tasks=[task], progress=False)
    assert len(written) == 1 and written[0]["bound_s"] >= pe.lower_bound("rnnlm-tiny", "paper-2gpu")
    assert write_bounds("mine", path, method="windows", time_limit_s=10, tasks=[task], progress=False) == []
    bounds = read_bounds([path])
    assert list(bounds.values()) == [written[0]["bound_s"]]
    assert gap(2.0, 1.0) == pytest.approx(1.0) and gap(None, 1.0) is None and gap(1.0, 0.0) is None
    path.write_text(json.dumps({"benchmark": "x"}) + "\n")
    with pytest.raises(ResultsFormatError, match="line 1"):
        read_bounds([path])


@pytest.mark.slow
@pytest.mark.parametrize("benchmark, cluster", [("rnnlm", "k80-4gpu"), ("inception_v3", "k80-2gpu")])
def test_no_stored_placebench_row_beats_the_window_bound(benchmark, cluster):
    from placement_env.harness import read_rows

    graph = pe.load_benchmark(benchmark)
    rows = [r for r in read_rows("docs/placebench/paper.jsonl") if r["ok"] and r["benchmark"] == benchmark
            and r["cluster"] == cluster and r["versions"]["opgraph"] == graph.digest]
    found = pe.bound(graph, cluster, method="windows", time_limit_s=60)
    assert len(rows) > 100 and found.status == "optimal"
    fastest = min(r["runtime_s"] for r in rows)
    assert fastest >= found.value_s
    assert fastest / found.value_s - 1 < 0.25  # within 25% of the best possible: the bound is tight, not just valid
