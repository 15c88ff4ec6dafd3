"""GPU copy streams (``Cluster.copy_streams``): every transfer into or out of a GPU is a copy on one of
its FIFO streams, as TF's GPU device performs it, and the per-tensor cost is work on that stream."""
from __future__ import annotations

import dataclasses

import numba
import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster import Cluster
from placement_env.cluster.presets import PRESETS
from placement_env.errors import ClusterConfigError
from placement_env.runtime.simulated import (SimulationPlan, copy_stream_per_pair, model_changed_since, simulate,
                                             simulate_batch)
from test_simulated import make_cluster, make_graph, seconds

NBYTES = 10**9  # 1 s on every link (1 GB/s, no latency)
OVERHEAD = 0.25  # seconds per tensor
N_DEVICES = 5


def streams_cluster(on: bool = True) -> Cluster:
    """cpu:0, cpu:1, gpu:2, gpu:3, gpu:4: a private 1 GB/s link per ordered pair, so that only the streams make
    transfers wait for each other."""
    c = make_cluster(kinds=("CPU", "CPU", "GPU", "GPU", "GPU"), bw=1e9, lat=0.0)
    return dataclasses.replace(c, transfer_overhead_s=OVERHEAD, copy_streams=on)


def sends(pairs: list[tuple[int, int]], nbytes: int = NBYTES) -> tuple:
    """Ops 0..k-1 each send one tensor to ops k..2k-1; ``pairs``: (source device, destination device) of each."""
    k = len(pairs)
    edges = [(i, k + i, 0, nbytes) for i in range(k)]
    graph = make_graph(2 * k, edges, outputs=[[nbytes]] * k + [[]] * k)
    placement = [a for a, _ in pairs] + [b for _, b in pairs]
    return graph, seconds(np.zeros(2 * k), N_DEVICES), placement


def test_tf_chooses_the_stream_by_direction():
    c = streams_cluster()
    n = c.n_devices
    stream = copy_stream_per_pair(c).reshape(n, n)
    host_to_device, device_to_host, device_to_device = 0, 1, 2
    assert stream[0, 1] == -1  # CPU -> CPU: no stream
    assert stream[0, 2] == stream[1, 2] == 3 * 2 + host_to_device  # CPU -> GPU: the receiver's
    assert stream[2, 0] == stream[2, 1] == 3 * 2 + device_to_host  # GPU -> CPU: the sender's
    assert stream[2, 3] == 3 * 2 + device_to_device and stream[3, 2] == 3 * 3 + device_to_device  # the sender's
    assert copy_stream_per_pair(streams_cluster(on=False)).size == 0


def test_two_copies_into_one_gpu_queue_on_its_stream_while_a_copy_out_of_it_overlaps_them():
    # cpu:0 -> gpu:2 and cpu:1 -> gpu:2 (gpu:2's host-to-device stream), gpu:2 -> cpu:0 (its device-to-host)
    g, costs, placement = sends([(0, 2), (1, 2), (2, 0)])
    m = simulate(g, streams_cluster(), costs, placement, schedule=True)
    s = m.schedule
    one = OVERHEAD + 1.0
    assert s.transfer_start.tolist() == pytest.approx([OVERHEAD, one + OVERHEAD, OVERHEAD])
    assert s.transfer_end.tolist() == pytest.approx([one, 2 * one, one])
    assert m.runtime_s == pytest.approx(2 * one)
    # without streams the three use their own links at once
    assert simulate(g, streams_cluster(on=False), costs, placement).runtime_s == pytest.approx(one)


def test_the_per_tensor_cost_is_work_on_the_stream():
    tiny = 8  # bytes: the overhead is all of a copy
    g, costs, same = sends([(0, 2), (1, 2)], tiny)  # both on gpu:2's host-to-device stream
    assert simulate(g, streams_cluster(), costs, same).runtime_s == pytest.approx(2 * OVERHEAD, rel=1e-6)
    g, costs, apart = sends([(0, 2), (1, 3)], tiny)  # gpu:2's and gpu:3's
    assert simulate(g, streams_cluster(), costs, apart).runtime_s == pytest.approx(OVERHEAD, rel=1e-6)
    # without streams the cost is a free delay: two copies into one GPU take it once
    assert simulate(g, streams_cluster(on=False), costs, same).runtime_s == pytest.approx(OVERHEAD, rel=1e-6)


def test_a_gpu_to_gpu_copy_is_on_the_senders_device_to_device_stream():
    c = streams_cluster()
    one = OVERHEAD + 1.0
    g, costs, placement = sends([(2, 3), (2, 4)])  # one sender: its stream performs them in turn
    assert simulate(g, c, costs, placement).runtime_s == pytest.approx(2 * one)
    g, costs, placement = sends([(2, 4), (3, 4)])  # one receiver, two senders: at once
    assert simulate(g, c, costs, placement).runtime_s == pytest.approx(one)
    g, costs, placement = sends([(2, 3), (2, 0), (0, 2)])  # device-to-device, -to-host, host-to-device: at once
    assert simulate(g, c, costs, placement).runtime_s == pytest.approx(one)


def test_a_stream_serves_its_copies_in_the_order_they_are_put_on_it():
    # ops 0, 1, 2 on gpu:2 end at 0, 1 and 1.5 s; each sends to the CPU on gpu:2's device-to-host stream
    edges = [(0, 3, 0, NBYTES), (1, 4, 0, NBYTES // 2), (2, 5, 0, NBYTES // 4)]
    g = make_graph(6, edges, outputs=[[NBYTES], [NBYTES // 2], [NBYTES // 4], [], [], []],
                   group=np.array([0, 0, 0, 1, 2, 3]))
    costs = seconds([0.0, 1.0, 0.5, 0.0, 0.0, 0.0], N_DEVICES)
    s = simulate(g, streams_cluster(), costs, [2, 0, 0, 0], schedule=True).schedule
    first = OVERHEAD + 1.0  # the first copy ends at 1.25; the second waits for it, the third for the second
    second = first + OVERHEAD + 0.5
    assert s.transfer_end.tolist() == pytest.approx([first, second, second + OVERHEAD + 0.25])


def test_control_edges_take_no_stream():
    g = make_graph(4, [(0, 2, 0, NBYTES), (1, 3, -1, 0)], outputs=[[NBYTES], [], [], []])
    m = simulate(g, streams_cluster(), seconds(np.zeros(4), N_DEVICES), [0, 1, 2, 2])  # control edge cpu:1 -> gpu:2
    assert m.runtime_s == pytest.approx(OVERHEAD + 1.0)


def test_without_gpus_the_option_changes_nothing():
    rng = np.random.default_rng(0)
    g = pe.load_benchmark("synthetic:3")
    local = pe.load_cluster("local:2")
    costs = rng.uniform(1e-5, 1e-3, (g.n_ops, local.n_devices))
    placements = rng.integers(0, local.n_devices, (6, g.n_groups))
    off = simulate_batch(g, local, costs, placements)
    on = simulate_batch(g, dataclasses.replace(local, copy_streams=True), costs, placements)
    assert [m.runtime_s for m in on] == [m.runtime_s for m in off]


def test_batches_equal_single_steps():
    rng = np.random.default_rng(1)
    g = pe.load_benchmark("synthetic:5")
    # in index order: with ready_fifo, the order ops start in can change with the streams either way
    cluster = dataclasses.replace(pe.load_cluster("k80-4gpu"), ready_fifo=False)
    assert cluster.copy_streams
    costs = rng.uniform(1e-5, 1e-3, (g.n_ops, cluster.n_devices))
    placements = rng.integers(0, cluster.n_devices, (8, g.n_groups))
    plan = SimulationPlan(g, cluster, costs)
    single = [plan.run(p) for p in placements]
    recorded = [plan.run(p, schedule=True) for p in placements]
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    for batch in (plan.run_batch(placements), plan.run_batch(placements, threads=threads)):
        assert [m.runtime_s for m in batch] == [m.runtime_s for m in single] == [m.runtime_s for m in recorded]
        assert [m.peak_bytes.tolist() for m in batch] == [m.peak_bytes.tolist() for m in single]
        assert [m.bytes_moved for m in batch] == [m.bytes_moved for m in single]
    off = SimulationPlan(g, dataclasses.replace(cluster, copy_streams=False), costs).run_batch(placements)
    assert [m.runtime_s for m in off] != [m.runtime_s for m in single]  # the streams matter on this graph
    assert all(a.runtime_s >= b.runtime_s for a, b in zip(single, off))  # and only ever delay


def test_the_option_round_trips_through_json_and_changes_the_digest():
    c = streams_cluster()
    off = streams_cluster(on=False)
    assert "copy_streams" not in off.to_json() and '"copy_streams": true' in c.to_json()
    assert Cluster.from_json(c.to_json()) == c and Cluster.from_json(off.to_json()) == off
    assert c != off and hash(c) != hash(off) and c.digest != off.digest
    assert "streams" in c.describe() and "streams" not in off.describe()
    with pytest.raises(ClusterConfigError, match='copy_streams = "yes": must be True or False'):
        dataclasses.replace(c, copy_streams="yes")
    with pytest.raises(ClusterConfigError, match="copy_streams"):
        Cluster.from_dict({**c.to_dict(), "copy_streams": 1})


def test_the_as_built_and_modern_presets_use_copy_streams():
    on = {name: pe.load_cluster(name).copy_streams for name in PRESETS}
    assert on == {"paper-2gpu": False, "paper-4gpu": False, "k80-2gpu": True, "k80-4gpu": True,
                  "dgx1-v100-4gpu": True, "dgx-h100-8gpu": True}
    assert not pe.load_cluster("local:2").copy_streams
    # rows made by the model before the streams are stale on those clusters only
    assert model_changed_since("2", pe.load_cluster("k80-2gpu"))
    assert not model_changed_since("2", pe.load_cluster("paper-2gpu"))


def test_one_senders_copies_over_separate_nvlinks_take_turns_on_its_stream():
    dgx1 = pe.load_cluster("dgx1-v100-4gpu")
    # gpu:0 -> gpu:1 (one NVLink, 25 GB/s) and gpu:0 -> gpu:3 (two): separate links, one device-to-device stream
    g = make_graph(3, [(0, 1, 0, NBYTES), (0, 2, 1, NBYTES)], outputs=[[NBYTES, NBYTES], [], []])
    costs = seconds(np.zeros(3), dgx1.n_devices)
    latency = 2e-6
    turns = simulate(g, dgx1, costs, [1, 2, 4]).runtime_s
    assert turns == pytest.approx(NBYTES / 25e9 + NBYTES / 50e9 + 2 * latency, rel=1e-6)
    at_once = simulate(g, dataclasses.replace(dgx1, copy_streams=False), costs, [1, 2, 4]).runtime_s
    assert at_once == pytest.approx(NBYTES / 25e9 + latency, rel=1e-6)
