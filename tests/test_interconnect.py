"""The simulator on a real interconnect: shared ports and slots, full duplex, fixed transfer cost,
and CPUs whose one op uses only some of their cores."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from placement_env.cluster import Cluster
from placement_env.runtime.simulated import simulate, simulate_batch
from test_simulated import make_graph, seconds
from test_topology import two_boards

GB = 1e9
NBYTES = 10**9  # 1 GB: the link time (1/12 s) dwarfs every latency


def fan_out(n_destinations: int) -> tuple:
    """Op 0 sends one 1 GB tensor to each of ops 1..n (each on its own device); ops cost nothing."""
    edges = [(0, k, k - 1, NBYTES) for k in range(1, n_destinations + 1)]
    g = make_graph(n_destinations + 1, edges, outputs=[[NBYTES] * n_destinations] + [[]] * n_destinations)
    return g, seconds(np.zeros(n_destinations + 1), 5)


def test_four_transfers_out_of_one_gpu_share_its_port():
    cluster = two_boards()
    g1, c1 = fan_out(1)
    one = simulate(g1, cluster, c1, [1, 0]).runtime_s  # gpu:0 -> cpu:0
    g4, c4 = fan_out(4)
    four = simulate(g4, cluster, c4, [1, 0, 2, 3, 4]).runtime_s  # gpu:0 -> cpu, gpu:1, gpu:2, gpu:3
    assert one == pytest.approx(NBYTES / (12 * GB), rel=1e-3)
    assert four >= 3.5 * one and four == pytest.approx(4 * one, rel=1e-3)


def test_the_ideal_machine_sends_four_transfers_at_once():
    ideal = two_boards()
    ideal = Cluster(ideal.name, ideal.devices, ideal.bandwidth, ideal.latency)  # same links, no topology
    g4, c4 = fan_out(4)
    g1, c1 = fan_out(1)
    assert simulate(g4, ideal, c4, [1, 0, 2, 3, 4]).runtime_s == pytest.approx(
        simulate(g1, ideal, c1, [1, 0]).runtime_s, rel=1e-4)  # the routes' latencies differ by microseconds


def test_two_gpus_behind_one_slot_share_its_host_bandwidth():
    cluster = two_boards()
    # ops 0 (gpu:0) and 1 (gpu:1) each send 1 GB to op 2 and op 3 on the CPU
    g = make_graph(4, [(0, 2, 0, NBYTES), (1, 3, 0, NBYTES)], outputs=[[NBYTES], [NBYTES], [], []])
    costs = seconds(np.zeros(4), 5)
    same_board = simulate(g, cluster, costs, [1, 2, 0, 0]).runtime_s
    two_boards_ = simulate(g, cluster, costs, [1, 3, 0, 0]).runtime_s
    one = NBYTES / (12 * GB)
    assert same_board == pytest.approx(2 * one, rel=1e-3)  # one slot: one after the other
    assert two_boards_ == pytest.approx(one, rel=1e-3)  # a slot each: at once


def test_opposite_directions_do_not_interfere():
    cluster = two_boards()
    g = make_graph(4, [(0, 2, 0, NBYTES), (1, 3, 0, NBYTES)], outputs=[[NBYTES], [NBYTES], [], []])
    both_ways = simulate(g, cluster, seconds(np.zeros(4), 5), [1, 0, 0, 1]).runtime_s  # gpu:0 -> cpu, cpu -> gpu:0
    assert both_ways == pytest.approx(NBYTES / (12 * GB), rel=1e-3)


def test_every_cross_device_tensor_pays_the_fixed_overhead():
    cluster = dataclasses.replace(two_boards(), transfer_overhead_s=1e-3)
    small = 8
    g = make_graph(3, [(0, 1, 0, small), (1, 2, 0, small)], outputs=[[small], [small], []])
    costs = seconds(np.zeros(3), 5)
    m = simulate(g, cluster, costs, [1, 2, 1])  # gpu:0 -> gpu:1 -> gpu:0: two transfers
    hop = 1e-3 + cluster.latency[1, 2] + small / cluster.bandwidth[1, 2]
    assert m.runtime_s == pytest.approx(2 * hop, rel=1e-9)
    control = make_graph(2, [(0, 1, -1, 0)], outputs=[[], []])
    assert simulate(control, cluster, seconds(np.zeros(2), 5), [1, 2]).runtime_s == pytest.approx(
        1e-3 + cluster.latency[1, 2])


def test_a_cpu_op_uses_only_its_share_of_the_cores():
    base = two_boards()
    cpu = dataclasses.replace(base.devices[0], op_share=0.25)  # 18 lanes; one op keeps a quarter busy
    cluster = dataclasses.replace(base, devices=(cpu, *base.devices[1:]))
    g = make_graph(8)
    one_second = seconds(np.ones(8), 5)
    assert simulate(g, cluster, one_second, [0] + [1] * 7).runtime_s == pytest.approx(7.0)  # gpu:0 runs 7 in turn
    lone = make_graph(1)
    assert simulate(lone, cluster, seconds([1.0], 5), [0]).runtime_s == pytest.approx(4.0)
    four = make_graph(4)
    assert simulate(four, cluster, seconds(np.ones(4), 5), [0] * 4).runtime_s == pytest.approx(4.0)  # all at once
    eight = make_graph(8)
    assert simulate(eight, cluster, one_second, [0] * 8).runtime_s == pytest.approx(8.0)  # the device is full


def test_views_share_their_input_buffer_until_their_own_consumers_are_done():
    # op0 -> Reshape op1 -> op2, each 1 s on device 0; op0's output is 100 bytes
    g = make_graph(3, [(0, 1, 0, 100), (1, 2, 0, 100)], outputs=[[100], [100], []])
    g = dataclasses.replace(g, op_types=np.array(["MatMul", "Reshape", "MatMul"]))
    costs = seconds([1.0, 1.0, 1.0], 5)
    plain = two_boards()
    forwarding = dataclasses.replace(plain, buffer_forwarding=True)
    copies = simulate(g, plain, costs, [1, 1, 1], schedule=True)
    shared = simulate(g, forwarding, costs, [1, 1, 1], schedule=True)
    assert copies.peak_bytes[1] == 200 and shared.peak_bytes[1] == 100
    assert shared.runtime_s == copies.runtime_s == 3.0
    timeline = shared.schedule
    in_use_at = lambda t: timeline.memory_in_use[1, np.searchsorted(timeline.memory_time, t, side="right") - 1]
    assert in_use_at(2.5) == 100 and in_use_at(3.0) == 0  # alive through op2, freed when it ends
    # a view on another device forwards the received copy, which then lives until op2 ends there
    across = simulate(g, forwarding, costs, [1, 2, 2], schedule=True)
    assert across.peak_bytes.tolist() == [0, 100, 100, 0, 0]


def sum_of_three(memory):
    """ops 0-2 (100-byte outputs, 1 s each) feed the AddN op3; one GPU-like device of ``memory`` bytes."""
    g = make_graph(4, [(0, 3, 0, 100), (1, 3, 0, 100), (2, 3, 0, 100)], outputs=[[100], [100], [100], [100]])
    g = dataclasses.replace(g, op_types=np.array(["MatMul", "MatMul", "MatMul", "AddN"]))
    cluster = dataclasses.replace(two_boards(), accumulate_sums=True)
    devices = tuple(dataclasses.replace(d, memory_bytes=memory) for d in cluster.devices)
    return g, dataclasses.replace(cluster, devices=devices)


def test_a_device_near_full_adds_the_inputs_of_a_large_sum_as_they_arrive():
    g, roomy = sum_of_three(memory=1000)  # peak 400 <= 80% of 1000: no rewrite, all inputs live at once
    costs = seconds([1.0, 1.0, 1.0, 1.0], 5)
    kept = simulate(g, roomy, costs, [1, 1, 1, 1])
    assert kept.ok and kept.peak_bytes[1] == 400
    g, tight = sum_of_three(memory=450)  # 400 > 360: grappler rewrites the sum into an accumulation
    added = simulate(g, tight, costs, [1, 1, 1, 1], schedule=True)
    assert added.ok and added.peak_bytes[1] == 200  # the accumulator plus one input being produced
    assert added.runtime_s == kept.runtime_s == 4.0
    in_use_at = lambda t: added.schedule.memory_in_use[1, np.searchsorted(added.schedule.memory_time, t, side="right") - 1]
    assert in_use_at(1.5) == 200 and in_use_at(3.5) == 100
    # an input received from another device is added in (and its copy freed) when it arrives: at
    # t = 1 the accumulator, op1's output and the arriving copy of op2's output, then 200 again
    across = simulate(g, tight, costs, [1, 1, 2, 1], schedule=True)
    assert across.ok and across.peak_bytes[1] == 300
    assert across.schedule.memory_in_use[1, -2] == 100  # op1's output added in; only the sum is left
    # without the cluster's accumulate_sums a 350-byte device cannot hold the four buffers
    g, small = sum_of_three(memory=350)
    assert not simulate(g, dataclasses.replace(small, accumulate_sums=False), costs, [1, 1, 1, 1]).ok
    assert simulate(g, small, costs, [1, 1, 1, 1]).ok
    batch = simulate_batch(g, small, costs, np.array([[1, 1, 1, 1], [1, 1, 2, 1]]))
    assert [m.peak_bytes[1] for m in batch] == [200, 300]


def test_the_dgx_presets_share_nvswitch_ports_and_pcie_switch_uplinks_but_not_nvlinks():
    import placement_env as pe

    h100 = pe.load_cluster("dgx-h100-8gpu")
    g1, _ = fan_out(1)
    g3, _ = fan_out(3)
    one = simulate(g1, h100, seconds(np.zeros(2), 9), [1, 2]).runtime_s  # gpu:0 -> gpu:1 over the NVSwitch
    three = simulate(g3, h100, seconds(np.zeros(4), 9), [1, 2, 3, 4]).runtime_s  # gpu:0 -> gpu:1, 2, 3
    assert one == pytest.approx(NBYTES / (450 * GB), rel=1e-2)
    assert three == pytest.approx(3 * one, rel=1e-2)  # one GPU's 450 GB/s port, shared
    # the links alone (with its copy streams, gpu:0's one device-to-device stream makes the two below take turns:
    # tests/test_copy_streams.py)
    dgx1 = dataclasses.replace(pe.load_cluster("dgx1-v100-4gpu"), copy_streams=False)
    # gpu:0 -> gpu:1 (one NVLink) and gpu:0 -> gpu:3 (two) at once: point-to-point links, no sharing
    g2, _ = fan_out(2)
    both = simulate(g2, dgx1, seconds(np.zeros(3), 5), [1, 2, 4]).runtime_s
    assert both == pytest.approx(NBYTES / (25 * GB), rel=1e-2)
    # gpu:0 and gpu:1 share PCIe switch 0's uplink to the host; gpu:0 and gpu:2 do not
    g = make_graph(4, [(0, 2, 0, NBYTES), (1, 3, 0, NBYTES)], outputs=[[NBYTES], [NBYTES], [], []])
    costs = seconds(np.zeros(4), 5)
    one_switch = simulate(g, dgx1, costs, [1, 2, 0, 0]).runtime_s
    two_switches = simulate(g, dgx1, costs, [1, 3, 0, 0]).runtime_s
    assert one_switch == pytest.approx(2 * NBYTES / (12 * GB), rel=1e-2)
    assert two_switches == pytest.approx(NBYTES / (12 * GB), rel=1e-2)
