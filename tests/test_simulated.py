"""The simulated runtime on hand-made graphs with known answers, plus a lower-bound check on a benchmark."""
import dataclasses

import numpy as np
import pytest

import placement_env as pe
from placement_env import InvalidPlacementError, OpGraph
from placement_env.cluster import Cluster, Device
from placement_env.runtime.simulated import SimulationPlan, plan_for, simulate, simulate_batch

BW = 1e9  # bytes/s on every link
LAT = 1e-3  # s on every link


def make_cluster(kinds=("GPU", "GPU"), concurrency=None, memory=2**30, bw=BW, lat=LAT):
    devices = []
    for i, kind in enumerate(kinds):
        devices.append(Device(
            name=f"{kind.lower()}:{i}", kind=kind, peak_flops=1e12, memory_bandwidth=1e11,
            memory_bytes=memory, concurrency=(concurrency[i] if concurrency else 1),
            tf_device=f"/job:localhost/replica:0/task:0/device:{kind}:{i}"))
    n = len(devices)
    bandwidth = np.full((n, n), float(bw))
    latency = np.full((n, n), float(lat))
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    return Cluster("test", tuple(devices), bandwidth, latency)


def make_graph(n_ops, edges=(), outputs=None, persistent=None, device_mask=None, group=None):
    """``edges``: (src, dst, src_output, bytes), src_output -1 for control; ``outputs[i]``: list of byte sizes."""
    outputs = outputs if outputs is not None else [[8]] * n_ops
    ptr = np.concatenate([[0], np.cumsum([len(o) for o in outputs])])
    flat = [b for o in outputs for b in o]
    edges = sorted(edges)
    return OpGraph(
        name="tiny", op_names=[f"op{i}" for i in range(n_ops)], op_types=["MatMul"] * n_ops,
        flops=np.ones(n_ops), persistent_bytes=persistent if persistent is not None else np.zeros(n_ops),
        device_mask=device_mask if device_mask is not None else np.full(n_ops, 3),
        colocation=np.arange(n_ops), group=group if group is not None else np.arange(n_ops),
        output_ptr=ptr, output_dims=np.full((len(flat), 8), -1), output_dtypes=["float32"] * len(flat),
        output_bytes=flat, edge_src=[e[0] for e in edges], edge_dst=[e[1] for e in edges],
        edge_src_output=[e[2] for e in edges], edge_bytes=[e[3] for e in edges])


def seconds(values, n_devices=2):
    return np.repeat(np.asarray(values, float)[:, None], n_devices, axis=1)


def test_chain_on_one_device_is_the_sum_of_op_times():
    g = make_graph(3, [(0, 1, 0, 8), (1, 2, 0, 8)], group=np.zeros(3, int))
    c = make_cluster()
    m = simulate(g, c, seconds([1.0, 2.0, 3.0]), [0])
    assert m.ok and m.runtime == "sim"
    assert m.runtime_s == pytest.approx(6.0)
    assert m.busy_s.tolist() == pytest.approx([6.0, 0.0])
    assert m.bytes_moved == 0


def test_independent_ops_on_two_gpus_run_in_parallel():
    g = make_graph(2)
    c = make_cluster()
    assert simulate(g, c, seconds([1.0, 2.5]), [0, 1]).runtime_s == pytest.approx(2.5)
    assert simulate(g, c, seconds([1.0, 2.5]), [1, 1]).runtime_s == pytest.approx(3.5)


def test_cross_device_edge_costs_latency_plus_bytes_over_bandwidth():
    nbytes = 4_000_000
    g = make_graph(2, [(0, 1, 0, nbytes)], outputs=[[nbytes], []])
    c = make_cluster()
    m = simulate(g, c, seconds([1.0, 2.0]), [0, 1], schedule=True)
    assert m.runtime_s == pytest.approx(1.0 + LAT + nbytes / BW + 2.0, rel=1e-12)
    assert m.bytes_moved == nbytes
    s = m.schedule
    assert s.transfer_src_op.tolist() == [0] and s.transfer_bytes.tolist() == [nbytes]
    assert s.transfer_start[0] == pytest.approx(1.0) and s.op_start[1] == pytest.approx(s.transfer_end[0])
    # same device: free
    assert simulate(g, c, seconds([1.0, 2.0]), [1, 1]).runtime_s == pytest.approx(3.0)


def test_cross_device_control_edge_costs_only_latency():
    g = make_graph(2, [(0, 1, -1, 0)], outputs=[[10**9], []])
    m = simulate(g, make_cluster(), seconds([1.0, 2.0]), [0, 1])
    assert m.runtime_s == pytest.approx(3.0 + LAT) and m.bytes_moved == 0


def test_one_link_serialises_two_transfers():
    nbytes = 1_000_000
    g = make_graph(2, [(0, 1, 0, nbytes), (0, 1, 1, nbytes)], outputs=[[nbytes, nbytes], []])
    m = simulate(g, make_cluster(), seconds([1.0, 1.0]), [0, 1], schedule=True)
    one = LAT + nbytes / BW
    assert m.runtime_s == pytest.approx(1.0 + 2 * one + 1.0)
    s = m.schedule
    assert s.transfer_start.tolist() == pytest.approx([1.0, 1.0 + one])
    # two links in opposite directions / to different devices do not interfere
    g2 = make_graph(3, [(0, 1, 0, nbytes), (0, 2, 1, nbytes)], outputs=[[nbytes, nbytes], [], []])
    m2 = simulate(g2, make_cluster(("GPU", "GPU", "GPU")), seconds([1.0, 1.0, 1.0], 3), [0, 1, 2])
    assert m2.runtime_s == pytest.approx(1.0 + one + 1.0)


def test_tensor_for_two_consumers_on_one_device_is_sent_once():
    nbytes = 1_000_000
    g = make_graph(3, [(0, 1, 0, nbytes), (0, 2, 0, nbytes)], outputs=[[nbytes], [], []])
    c = make_cluster()
    m = simulate(g, c, seconds([1.0, 1.0, 1.0]), [0, 1, 1], schedule=True)
    assert m.bytes_moved == nbytes and len(m.schedule.transfer_bytes) == 1
    assert m.runtime_s == pytest.approx(1.0 + LAT + nbytes / BW + 2.0)  # one GPU lane: consumers in turn
    # consumers on two other devices: two transfers on two links
    m3 = simulate(g, make_cluster(("GPU",) * 3), seconds([1.0, 1.0, 1.0], 3), [0, 1, 2])
    assert m3.bytes_moved == 2 * nbytes and m3.runtime_s == pytest.approx(1.0 + LAT + nbytes / BW + 1.0)


def test_cpu_lanes_share_the_device_so_work_is_conserved():
    # concurrency lets ready ops start at once, but they share the device: three unit ops take 3 s
    # however many lanes there are; only the schedule differs
    g = make_graph(3)
    t = seconds([1.0, 1.0, 1.0], 1)
    for conc, starts, ends in [(1, [0, 1, 2], [1, 2, 3]), (2, [0, 0, 2], [2, 2, 3]), (3, [0, 0, 0], [3, 3, 3])]:
        m = simulate(g, make_cluster(("CPU",), concurrency=[conc]), t, [0, 0, 0], schedule=True)
        assert m.runtime_s == pytest.approx(3.0) and m.busy_s.tolist() == pytest.approx([3.0])
        assert m.schedule.op_start.tolist() == pytest.approx(starts)
        assert m.schedule.op_end.tolist() == pytest.approx(ends)


def run_schedule(costs, concurrency, edges=(), kind="CPU"):
    g = make_graph(len(costs), edges)
    m = simulate(g, make_cluster((kind,), concurrency=[concurrency]), seconds(costs, 1), [0] * len(costs),
                 schedule=True)
    assert m.ok
    return m, m.schedule.op_start, m.schedule.op_end


def test_one_op_alone_on_a_shared_device_runs_at_full_speed():
    m, start, end = run_schedule([1.5], 4)
    assert start.tolist() == [0.0] and end.tolist() == [1.5] and m.runtime_s == 1.5


def test_two_equal_ops_share_a_concurrency_2_device():
    c = 0.7
    m, start, end = run_schedule([c, c], 2)
    assert start.tolist() == [0.0, 0.0]
    assert end.tolist() == pytest.approx([2 * c, 2 * c], rel=1e-12)
    assert end[0] == end[1]  # they finish in the same instant
    assert m.runtime_s == pytest.approx(2 * c, rel=1e-12) and m.busy_s.tolist() == pytest.approx([2 * c])


def test_unequal_ops_share_until_the_short_one_ends():
    c = 0.5
    m, start, end = run_schedule([c, 3 * c], 2)
    # both at rate 1/2 until op0 has had c (t = 2c); op1 then has 2c left at full speed
    assert end.tolist() == pytest.approx([2 * c, 4 * c], rel=1e-12)
    assert m.runtime_s == pytest.approx(4 * c, rel=1e-12)
    m, start, end = run_schedule([3 * c, c], 2)  # op order does not matter
    assert end.tolist() == pytest.approx([4 * c, 2 * c], rel=1e-12)


def test_third_op_waits_for_a_lane_then_shares():
    m, start, end = run_schedule([1.0, 2.0, 1.0], 2)
    # op0, op1 share: op0 ends at 2 (op1 has 1 left); op2 starts at 2 and shares with op1: both end at 4
    assert start.tolist() == pytest.approx([0.0, 0.0, 2.0])
    assert end.tolist() == pytest.approx([2.0, 4.0, 4.0])
    assert m.runtime_s == pytest.approx(4.0)


def test_zero_cost_op_on_a_shared_device_completes_at_once():
    m, start, end = run_schedule([2.0, 0.0, 1.0], 2, edges=[(1, 2, 0, 8)])
    # op1 costs nothing: it ends at 0 and op2 starts at once, sharing with op0
    assert start.tolist() == [0.0, 0.0, 0.0] and end[1] == 0.0
    assert end.tolist() == pytest.approx([3.0, 0.0, 2.0])


def test_completions_that_tie_up_to_rounding_end_together():
    # op0 (0.1) ends at t=0.2, op1 then starts with virtual finish 0.1 + 0.2 != 0.3 in floating point,
    # but it must end in the same instant as op2 (virtual finish 0.3)
    assert 0.1 + 0.2 != 0.3
    m, start, end = run_schedule([0.1, 0.2, 0.3], 3, edges=[(0, 1, 0, 8)])
    assert end[0] == pytest.approx(0.2) and start[1] == end[0]
    assert end[1] == end[2] and end[2] == pytest.approx(0.6)


def test_concurrency_1_is_fifo_at_full_speed():
    for kind in ("GPU", "CPU"):
        m, start, end = run_schedule([1.0, 2.0, 0.5], 1, kind=kind)
        assert start.tolist() == [0.0, 1.0, 3.0] and end.tolist() == [1.0, 3.0, 3.5] and m.runtime_s == 3.5
        assert m.busy_s.tolist() == [3.5]


def test_busy_time_is_the_union_of_active_intervals():
    # cpu: op0 and op3 share [0, 2]; op1 runs on the gpu; op2 on the cpu after it, alone
    nbytes = 1000
    g = make_graph(4, [(0, 1, 0, nbytes), (1, 2, 0, nbytes)], outputs=[[nbytes], [nbytes], [8], [8]])
    c = make_cluster(("CPU", "GPU"), concurrency=[2, 1])
    m = simulate(g, c, seconds([1.0, 2.0, 1.0, 1.0]), [0, 1, 0, 0], schedule=True)
    s = m.schedule
    hop = LAT + nbytes / BW
    assert s.op_end.tolist() == pytest.approx([2.0, 4.0 + hop, 5.0 + 2 * hop, 2.0])
    assert m.runtime_s == pytest.approx(5.0 + 2 * hop)
    cpu = s.op_device == 0
    assert float(np.sum(s.op_end[cpu] - s.op_start[cpu])) == pytest.approx(5.0)  # not this
    assert m.busy_s.tolist() == pytest.approx([3.0, 2.0])  # [0, 2] and [4 + 2 hop, 5 + 2 hop]


def reference_processor_sharing(costs, concurrency, edges):
    """A plain step-by-step processor-sharing schedule of a DAG on one device (no transfers)."""
    n = len(costs)
    preds = [set() for _ in range(n)]
    for a, b, *_ in edges:
        preds[b].add(a)
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    left = np.array(costs, float)
    running, finished, now = [], set(), 0.0
    while len(finished) < n:
        ready = [i for i in range(n) if np.isnan(start[i]) and preds[i] <= finished]
        for i in ready[: concurrency - len(running)]:
            start[i] = now
            running.append(i)
        k = len(running)
        step = min(left[i] for i in running)
        now += step * k
        for i in running:
            left[i] -= step
        for i in [i for i in running if left[i] <= 1e-9]:
            end[i] = now
            running.remove(i)
            finished.add(i)
    return start, end


@pytest.mark.parametrize("concurrency", [2, 3, 5])
def test_shared_device_matches_a_reference_schedule(concurrency):
    rng = np.random.default_rng(concurrency)
    n = 40
    edges = sorted({(int(a), j, 0, 8) for j in range(1, n) for a in rng.choice(j, size=min(j, 2), replace=False)
                    if rng.random() < 0.3})
    costs = np.round(rng.random(n) * 4) / 4 + 0.25  # multiples of 1/4: exact in binary
    m, start, end = run_schedule(costs, concurrency, edges=edges)
    ref_start, ref_end = reference_processor_sharing(costs, concurrency, edges)
    np.testing.assert_allclose(start, ref_start, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(end, ref_end, rtol=1e-9, atol=1e-9)
    assert m.busy_s[0] == pytest.approx(costs.sum())


def test_batch_equals_single_runs_with_sharing():
    rng = np.random.default_rng(5)
    g, t = random_graph(rng, n_ops=90)
    c = make_cluster(("CPU", "CPU", "GPU"), concurrency=[4, 3, 1])
    placements = rng.integers(0, 3, size=(6, g.n_groups))
    singles = [simulate(g, c, t, p) for p in placements]
    for a, b in zip(singles, simulate_batch(g, c, t, placements)):
        assert a.runtime_s == b.runtime_s and a.busy_s.tolist() == b.busy_s.tolist()
        assert a.peak_bytes.tolist() == b.peak_bytes.tolist() and a.bytes_moved == b.bytes_moved


def test_peak_memory_of_a_chain_frees_inputs_after_their_last_consumer():
    # op0 -> op1 -> op2 on one device: peak is op0's and op1's outputs together, plus variables
    g = make_graph(3, [(0, 1, 0, 100), (1, 2, 0, 50)], outputs=[[100], [50], [7]], persistent=[1000, 0, 0])
    m = simulate(g, make_cluster(), seconds([1.0, 1.0, 1.0]), [0, 0, 0])
    assert m.peak_bytes.tolist() == [1000 + 150, 0]
    # across devices the copy lives on the receiver, the original until the transfer ends
    m2 = simulate(g, make_cluster(), seconds([1.0, 1.0, 1.0]), [0, 1, 1])
    assert m2.peak_bytes.tolist() == [1100, 150]


def test_oom_when_persistent_bytes_exceed_capacity():
    g = make_graph(2, persistent=[600, 600])
    c = make_cluster(memory=1000)
    m = simulate(g, c, seconds([1.0, 1.0]), [0, 0])
    assert not m.ok and m.failure == "oom" and "gpu:0" in m.message
    assert m.peak_bytes[0] >= 1200 and m.runtime_s == pytest.approx(2.0)
    assert simulate(g, c, seconds([1.0, 1.0]), [0, 1]).ok


def test_cpu_only_op_on_gpu_is_no_kernel():
    g = make_graph(2, device_mask=[3, 1])
    c = make_cluster(("CPU", "GPU"), concurrency=[4, 1])
    m = simulate(g, c, seconds([1.0, 1.0]), [0, 1])
    assert not m.ok and m.failure == "no_kernel"
    assert "group 1" in m.message and "MatMul" in m.message and "op1" in m.message
    assert simulate(g, c, seconds([1.0, 1.0]), [1, 0]).ok


@pytest.mark.parametrize("bad", [[0], [0.0, 1.0], [0, 2], [-1, 0], [[0, 1]], [True, False]])
def test_invalid_placements_raise(bad):
    g = make_graph(2)
    with pytest.raises(InvalidPlacementError):
        simulate(g, make_cluster(), seconds([1.0, 1.0]), bad)


def random_graph(rng, n_ops=60, n_dev=3):
    edges = {}
    outputs = [[int(rng.integers(0, 1000)) for _ in range(int(rng.integers(0, 3)))] for _ in range(n_ops)]
    for j in range(1, n_ops):
        for i in rng.choice(j, size=min(j, int(rng.integers(0, 4))), replace=False):
            i = int(i)
            if outputs[i] and rng.random() < 0.8:
                k = int(rng.integers(len(outputs[i])))
                edges[(i, j)] = (i, j, k, outputs[i][k])
            else:
                edges[(i, j)] = (i, j, -1, 0)
    group = np.arange(n_ops) // 3
    return make_graph(n_ops, list(edges.values()), outputs=outputs, group=group,
                      persistent=rng.integers(0, 100, n_ops)), rng.random((n_ops, n_dev))


def test_deterministic_and_batch_equals_one_by_one():
    rng = np.random.default_rng(0)
    g, t = random_graph(rng)
    c = make_cluster(("CPU", "GPU", "GPU"), concurrency=[2, 1, 1])
    placements = rng.integers(0, 3, size=(8, g.n_groups))
    singles = [simulate(g, c, t, p, schedule=True) for p in placements]
    again = [simulate(g, c, t, p, schedule=True) for p in placements]
    batch = simulate_batch(g, c, t, placements)
    for a, b, s in zip(singles, again, batch):
        assert a.runtime_s == b.runtime_s == s.runtime_s
        assert a.peak_bytes.tolist() == b.peak_bytes.tolist() == s.peak_bytes.tolist()
        assert a.busy_s.tolist() == s.busy_s.tolist() and a.bytes_moved == s.bytes_moved
        for f in dataclasses.fields(a.schedule):
            np.testing.assert_array_equal(getattr(a.schedule, f.name), getattr(b.schedule, f.name))
    # the plan object gives the same answers
    plan = SimulationPlan(g, c, t)
    assert [m.runtime_s for m in plan.run_batch(placements)] == [m.runtime_s for m in singles]


def test_plan_for_shares_one_plan_per_op_seconds_value():
    rng = np.random.default_rng(2)
    g, t = random_graph(rng, n_ops=300)
    c = make_cluster(("CPU", "GPU", "GPU"), concurrency=[2, 1, 1])
    plan = plan_for(g, c, t)
    assert plan_for(g, c, t.copy()) is plan and plan_for(g, c, t.tolist()) is plan  # equal values, any container
    t[0, 0] += 1.0  # in place: the cached plan keeps the values it was built with
    assert plan_for(g, c, t) is not plan and np.array_equal(plan_for(g, c, t).op_seconds, t)
    off_sample = t.copy()
    off_sample[1, 1] += 1.0  # a value the cheap key does not look at
    other = plan_for(g, c, off_sample)
    assert other is not plan_for(g, c, t) and np.array_equal(other.op_seconds, off_sample)
    assert plan_for(g, c, off_sample.copy()) is other
    assert plan_for(g, make_cluster(("CPU", "GPU", "GPU"), concurrency=[2, 1, 1]), t) is not plan_for(g, c, t)


def test_schedule_respects_dependencies_lanes_and_links():
    rng = np.random.default_rng(1)
    g, t = random_graph(rng, n_ops=120)
    c = make_cluster(("CPU", "GPU", "GPU"), concurrency=[2, 1, 1])
    p = rng.integers(0, 3, size=g.n_groups)
    m = simulate(g, c, t, p, schedule=True)
    s = m.schedule
    dev, start, end = s.op_device, s.op_start, s.op_end
    cost = t[np.arange(g.n_ops), dev]
    gpu = dev != 0  # concurrency 1: full speed; the cpu's ops share it, so they take at least their cost
    np.testing.assert_allclose((end - start)[gpu], cost[gpu])
    assert np.all((end - start)[~gpu] >= cost[~gpu] * (1 - 1e-12))
    assert m.busy_s.tolist() == pytest.approx(np.bincount(dev, weights=cost, minlength=3).tolist())
    assert m.runtime_s == pytest.approx(end.max())
    for a, b in zip(g.edge_src, g.edge_dst):
        assert start[b] >= end[a] + (c.latency[dev[a], dev[b]] if dev[a] != dev[b] else 0) - 1e-12
    for d in range(3):  # at most `concurrency` ops at once
        on = np.flatnonzero(dev == d)
        for i in on:
            running = np.sum((start[on] <= start[i]) & (end[on] > start[i]))
            assert running <= c.concurrency[d]
    ts, te = s.transfer_start, s.transfer_end
    for a in range(len(ts)):  # one transfer at a time per directed link
        same = (s.transfer_src_device == s.transfer_src_device[a]) & (
            s.transfer_dst_device == s.transfer_dst_device[a])
        assert np.sum(same & (ts < te[a] - 1e-12) & (te > ts[a] + 1e-12)) == 1
    assert m.bytes_moved == s.transfer_bytes.sum()


def test_benchmark_runtime_is_above_the_lower_bound():
    g = pe.load_benchmark("rnnlm-tiny")
    c = pe.load_cluster("paper-2gpu")
    t = g.flops[:, None] / c.peak_flops[None, :] + 1e-6
    fastest = t.min(axis=1)
    finish = fastest.copy()  # critical path with every op at its fastest device, no communication
    for s_, d_ in zip(g.edge_src, g.edge_dst):  # edges are sorted by source: a topological sweep
        finish[d_] = max(finish[d_], finish[s_] + fastest[d_])
    bound = max(finish.max(), fastest.sum() / c.n_devices)
    rng = np.random.default_rng(0)
    gpu_ok = (g.group_device_mask & 2) != 0
    placements = np.where(gpu_ok, rng.integers(1, 3, size=(5, g.n_groups)), 0)
    for m in simulate_batch(g, c, t, placements):
        assert m.runtime_s >= bound * (1 - 1e-9)
        assert m.busy_s.sum() >= fastest.sum() * (1 - 1e-9)
    one = simulate(g, c, t, np.where(gpu_ok, 1, 0))
    assert one.ok and one.bytes_moved >= 0 and one.runtime_s >= bound


def test_a_batch_gives_the_same_results_on_two_threads_and_rejects_bad_thread_counts():
    import numba

    rng = np.random.default_rng(1)
    n = 40
    edges = [(int(a), int(b), 0, int(rng.integers(8, 10**6))) for a, b in
             {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(80)}]
    g = make_graph(n, edges, outputs=[[10**6]] * n)
    c = make_cluster(("CPU", "GPU", "GPU"), concurrency=(4, 1, 1))
    costs = seconds(rng.uniform(0.0, 0.01, n), 3)
    placements = rng.integers(0, 3, (33, n))
    evaluator = pe.Evaluator(g, c, costs=costs)
    one = [(m.runtime_s, m.peak_bytes.tolist(), m.busy_s.tolist()) for m in evaluator.batch(placements)]
    most = numba.config.NUMBA_NUM_THREADS
    two = pe.Evaluator(g, c, costs=costs, threads=min(2, most))
    assert [(m.runtime_s, m.peak_bytes.tolist(), m.busy_s.tolist()) for m in two.batch(placements)] == one
    assert numba.get_num_threads() == most  # the caller's setting is restored
    for bad in (0, most + 1, 1.5, True):
        with pytest.raises(ValueError, match=f"threads={bad!r}; expected an integer from 1 to {most}"):
            pe.Evaluator(g, c, costs=costs, threads=bad)
    with pytest.raises(ValueError, match="threads=2 is for runtime='sim', not 'grappler'"):
        pe.Evaluator(g, c, "grappler", threads=2)
