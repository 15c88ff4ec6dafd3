"""The static sequential peak-memory estimate (placement_env/memory_estimate.py)."""
from __future__ import annotations

import numpy as np
import pytest

import placement_env as pe
from tests.test_simulated import make_cluster, make_graph


def test_chain_peak_counts_outputs_until_their_last_consumer_and_copies_on_the_other_device():
    # 0 -> 1 -> 2, and 0 -> 3; op 0's 100 bytes live until op 3 (its last consumer)
    g = make_graph(4, [(0, 1, 0, 100), (1, 2, 0, 10), (0, 3, 0, 100)], outputs=[[100], [10], [1], [1]],
                   persistent=np.array([5, 0, 0, 0]))
    c = make_cluster()
    # all on device 0: 5 resident; at op 1: 100 + 10; at op 2: 100 + 10 + 1; op 1's output freed after op 2
    memory = pe.sequential_memory(g, c, [0, 0, 0, 0])
    assert memory.peak_bytes.tolist() == [5 + 111, 0]
    assert memory.peak_op.tolist()[0] == 2
    # bytes alive at the peak, charged to their producers (and each group's resident bytes)
    assert memory.at_peak_bytes[:, 0].tolist() == [105, 10, 1, 0]
    # op 3 on device 1: op 0's output is freed on device 0 after op 1, its copy lives on device 1 until op 3
    split = pe.sequential_memory(g, c, [0, 0, 0, 1])
    assert split.peak_bytes.tolist() == [115, 101]
    assert split.at_peak_bytes[3, 1] == 100 + 1  # the copy is charged to the group that consumes it
    assert pe.sequential_peak_bytes(g, c, [0, 0, 0, 1]).tolist() == [115, 101]


def test_an_op_of_two_outputs_with_a_copy_read_by_two_consumers_and_a_control_edge():
    # op 0 makes 30 and 40 bytes: the 30 are read by op 3 on its own device, the 40 by ops 1 and 2 on device 1
    # (one copy there, until op 2); the control edge 0 -> 4 carries no buffer
    g = make_graph(5, [(0, 1, 1, 40), (0, 2, 1, 40), (0, 3, 0, 30), (0, 4, -1, 0), (1, 2, 0, 1)],
                   outputs=[[30, 40], [1], [1], [1], [1]])
    memory = pe.sequential_memory(g, make_cluster(), [0, 1, 1, 0, 0])
    # device 0: both outputs at op 0 (the 40 have no consumer there); device 1: the copy, op 1's and op 2's output
    assert memory.peak_bytes.tolist() == [70, 42]
    assert memory.peak_op.tolist() == [0, 2]
    assert memory.at_peak_bytes[:, 0].tolist() == [70, 0, 0, 0, 0]
    assert memory.at_peak_bytes[:, 1].tolist() == [0, 1, 41, 0, 0]  # the copy is charged to its last consumer


def test_earliest_start_order_runs_an_op_when_its_inputs_are_done():
    # two branches from op 0: 0 -> 1 (slow, 10 s, 50 bytes out) -> 2 -> 4, and 0 -> 3 (70 bytes out) -> 4. In
    # index order op 1's output is freed after op 2, before op 3 runs; by earliest starts op 3 (at 1 s) runs
    # before op 2 (at 11 s), while op 1's output waits for op 2
    g = make_graph(5, [(0, 1, 0, 1), (0, 3, 0, 1), (1, 2, 0, 50), (2, 4, 0, 1), (3, 4, 0, 70)],
                   outputs=[[1], [50], [1], [70], [1]])
    c = make_cluster()
    seconds = np.array([[1.0, 1.0], [10.0, 10.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    assert pe.earliest_starts(g, np.zeros(5, np.int64), seconds).tolist() == [0.0, 1.0, 11.0, 1.0, 12.0]
    by_index = pe.sequential_memory(g, c, [0] * 5)
    by_start = pe.sequential_memory(g, c, [0] * 5, seconds)
    assert by_index.peak_bytes[0] == 1 + 1 + 70  # at op 3: op 0's, op 2's and its own output
    assert by_start.peak_bytes[0] == 1 + 50 + 70  # at op 3: op 0's, op 1's and its own output
    assert by_start.peak_op[0] == 3 and by_start.at_peak_bytes[:, 0].tolist() == [1, 50, 0, 70, 0]
    with pytest.raises(ValueError, match=r"seconds has shape \(5, 1\); expected \(5, n_devices\)"):
        pe.sequential_memory(g, c, [0, 0, 0, 0, 1], seconds[:, :1])


def test_estimate_follows_the_simulated_peak_on_a_real_graph(tiny, paper2):
    rng = np.random.default_rng(0)
    problem = pe.Problem.make(tiny, paper2, seed=0)
    placements = rng.integers(0, paper2.n_devices, (8, tiny.n_groups))
    placements = np.where(problem.allowed[np.arange(tiny.n_groups), placements], placements, 0)
    for placement, measured in zip(placements, problem.evaluator.batch(placements)):
        for seconds in (None, problem.costs.seconds):
            estimate = pe.sequential_peak_bytes(tiny, paper2, placement, seconds)
            used = estimate > 0
            assert used.any()
            ratio = measured.peak_bytes[used] / estimate[used]
            assert ratio.min() > 0.75 and ratio.max() < 1.25, ratio


def test_bad_placement_is_rejected_with_the_accepted_range():
    g = make_graph(2)
    with pytest.raises(pe.InvalidPlacementError, match="devices 0..1"):
        pe.sequential_peak_bytes(g, make_cluster(), [0, 2])
    with pytest.raises(pe.InvalidPlacementError, match="expected \\(2,\\)"):
        pe.sequential_peak_bytes(g, make_cluster(), [0])
