"""The order in which a device starts its waiting ops: lowest op index first, or with ``Cluster.ready_fifo`` in
the order they became ready, as TF's executor runs its ready queue."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster import Cluster
from placement_env.cluster.presets import PRESETS
from placement_env.runtime.simulated import model_changed_since, simulate, simulate_batch
from test_simulated import make_cluster, make_graph, seconds


def fifo_cluster(on: bool) -> Cluster:
    return dataclasses.replace(make_cluster(bw=1e12, lat=0.0), ready_fifo=on)


def late_low_index():
    """gpu:0 runs op0 (1 s), which readies op3 and op4 at t=1; op2 waits for op1 on gpu:1 (1.5 s, a control
    edge), so it is ready at t=1.5, after op4 but with a lower index."""
    edges = [(0, 3, 0, 8), (0, 4, 0, 8), (1, 2, -1, 0)]
    graph = make_graph(5, edges, outputs=[[8]] * 5)
    return graph, seconds([1.0, 1.5, 1.0, 1.0, 1.0]), [0, 1, 0, 0, 0]


@pytest.mark.parametrize("on, order", [(False, [0, 3, 2, 4]), (True, [0, 3, 4, 2])])
def test_a_device_starts_its_waiting_ops_by_index_or_by_when_they_became_ready(on, order):
    graph, costs, placement = late_low_index()
    m = simulate(graph, fifo_cluster(on), costs, placement, schedule=True)
    start = m.schedule.op_start
    on_gpu0 = [0, 2, 3, 4]
    assert sorted(on_gpu0, key=lambda i: start[i]) == order
    assert start[order].tolist() == pytest.approx([0.0, 1.0, 2.0, 3.0])
    assert m.runtime_s == pytest.approx(4.0)


def test_batches_equal_single_steps():
    graph, costs, _ = late_low_index()
    rng = np.random.default_rng(0)
    placements = rng.integers(0, 2, size=(16, graph.n_groups))
    for on in (False, True):
        cluster = fifo_cluster(on)
        single = [simulate(graph, cluster, costs, p).runtime_s for p in placements]
        batch = simulate_batch(graph, cluster, costs, placements)
        assert [m.runtime_s for m in batch] == single


def test_the_option_is_on_for_the_as_built_and_modern_presets_only():
    for name, on in (("k80-2gpu", True), ("k80-4gpu", True), ("dgx1-v100-4gpu", True), ("dgx-h100-8gpu", True),
                     ("paper-2gpu", False), ("paper-4gpu", False), ("local:2", False)):
        assert pe.load_cluster(name).ready_fifo is on, name
    assert set(PRESETS) == {"paper-2gpu", "paper-4gpu", "k80-2gpu", "k80-4gpu", "dgx1-v100-4gpu", "dgx-h100-8gpu"}


def test_the_option_round_trips_through_json_changes_the_digest_and_makes_old_rows_stale():
    off, on = fifo_cluster(False), fifo_cluster(True)
    assert Cluster.from_json(on.to_json()).ready_fifo and on.digest != off.digest
    assert '"ready_fifo"' not in off.to_json()
    assert model_changed_since("3", on) and not model_changed_since("3", off)
