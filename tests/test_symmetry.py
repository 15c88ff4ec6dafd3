"""Device symmetries of a cluster and canonical placements (placement_env/cluster/symmetry.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster.symmetry import canonical_placement, device_symmetries


def test_k80_symmetries_keep_boards_together():
    assert device_symmetries(pe.load_cluster("k80-2gpu")).tolist() == [[0, 1, 2], [0, 2, 1]]
    four = {tuple(p) for p in device_symmetries(pe.load_cluster("k80-4gpu"))}
    # dies 1, 2 share board 0's switch and dies 3, 4 board 1's: swap dies within a board, or the boards
    assert four == {(0, 1, 2, 3, 4), (0, 2, 1, 3, 4), (0, 1, 2, 4, 3), (0, 2, 1, 4, 3),
                    (0, 3, 4, 1, 2), (0, 4, 3, 1, 2), (0, 3, 4, 2, 1), (0, 4, 3, 2, 1)}
    # the ideal machine has a private link per pair: any GPU relabelling
    assert len(device_symmetries(pe.load_cluster("paper-4gpu"))) == 24


def test_too_many_alike_devices_leave_the_identity_alone():
    nine = pe.load_cluster("local:9")
    assert device_symmetries(nine).tolist() == [list(range(9))]
    assert not device_symmetries(nine).flags.writeable


def test_unlike_devices_are_not_swapped():
    cluster = pe.load_cluster("k80-2gpu")
    devices = list(cluster.devices)
    devices[2] = dataclasses.replace(devices[2], memory_bytes=devices[2].memory_bytes // 2)
    smaller = dataclasses.replace(cluster, devices=tuple(devices))
    assert device_symmetries(smaller).tolist() == [[0, 1, 2]]


def test_a_symmetry_leaves_the_simulated_step_unchanged(tiny):
    cluster = pe.load_cluster("k80-4gpu")
    problem = pe.Problem.make(tiny, cluster)
    rng = np.random.default_rng(0)
    for _ in range(3):
        placement = rng.integers(1, cluster.n_devices, tiny.n_groups)
        placement = np.where(problem.allowed[np.arange(tiny.n_groups), placement], placement, 0)
        runtimes = {pe.evaluate(tiny, cluster, perm[placement]).runtime_s for perm in device_symmetries(cluster)}
        assert len(runtimes) == 1


def test_canonical_placement_is_one_per_orbit():
    symmetries = device_symmetries(pe.load_cluster("k80-4gpu"))
    placement = np.array([0, 4, 4, 3, 1, 2, 0])
    forms = {tuple(canonical_placement(perm[placement], symmetries)) for perm in symmetries}
    assert forms == {(0, 1, 1, 2, 3, 4, 0)}
    assert canonical_placement(np.array([], np.int64), symmetries).size == 0
    with pytest.raises(ValueError, match="devices 0..4"):
        canonical_placement([0, 5], symmetries)
    with pytest.raises(ValueError, match="expected \\[k >= 1, n_devices\\]"):
        canonical_placement([0, 1], symmetries[0])
