"""The simulator's Schedule: immutable, and consistent with its Measurement and the documented model.

The memory timeline is checked against an independent reading of the memory model (the
simulated runtime's docstring): each output lives on its producer's device from the producer's
start until the producer, its last local consumer and its last send have ended; each received
copy lives from its transfer's start until its last consumer there has ended.
"""
import dataclasses

import numpy as np
import pytest

from placement_env.costs import analytical_costs
from placement_env.runtime.simulated import simulate, simulate_batch
from placement_env.schedule import Schedule


def placements(graph, cluster, n, seed):
    rng = np.random.default_rng(seed)
    result = rng.integers(0, cluster.n_devices, (n, graph.n_groups))
    result[:, (graph.group_device_mask & 0b10) == 0] = 0  # CPU-only groups on cpu:0
    return result


@pytest.fixture(scope="module")
def runs(tiny, paper2):
    seconds = analytical_costs(tiny, paper2).seconds
    return [(simulate(tiny, paper2, seconds, p, schedule=True), simulate(tiny, paper2, seconds, p))
            for p in placements(tiny, paper2, 12, 0)]


def reference_memory(graph, s, times):
    """Bytes in use per device after all changes at each of ``times``, from the documented model."""
    dev, start, end = s.op_device, s.op_start, s.op_end
    src, dst, slot = (np.asarray(a, np.int64) for a in (graph.edge_src, graph.edge_dst, graph.edge_src_output))
    data = slot >= 0
    gout = graph.output_ptr[src] + np.maximum(slot, 0)
    local = data & (dev[dst] == dev[src])
    owner = np.repeat(np.arange(graph.n_ops), np.diff(graph.output_ptr))
    out_free = end[owner].copy()
    np.maximum.at(out_free, gout[local], end[dst[local]])
    np.maximum.at(out_free, s.transfer_output, s.transfer_end)
    transfer = {(int(o), int(d)): t for t, (o, d) in enumerate(zip(s.transfer_output, s.transfer_dst_device))}
    remote = np.flatnonzero(data & ~local)
    tids = np.array([transfer[int(gout[e]), int(dev[dst[e]])] for e in remote], np.int64)
    copy_free = s.transfer_end.copy()
    np.maximum.at(copy_free, tids, end[dst[remote]])
    alloc = [(dev[owner], start[owner], out_free, graph.output_bytes),
             (s.transfer_dst_device, s.transfer_start, copy_free, s.transfer_bytes)]
    used = np.zeros((s.n_devices, len(times)), np.int64)
    used += np.bincount(dev, weights=graph.persistent_bytes, minlength=s.n_devices).astype(np.int64)[:, None]
    for where, t0, t1, nbytes in alloc:
        live = (t0[:, None] <= times[None, :]) & (t1[:, None] > times[None, :])  # [allocation, time]
        for d in range(s.n_devices):
            mine = where == d
            used[d] += (np.asarray(nbytes, np.int64)[mine, None] * live[mine]).sum(axis=0)
    return used


def test_schedule_agrees_with_its_measurement(tiny, runs):
    for m, plain in runs:
        s = m.schedule
        assert isinstance(s, Schedule) and plain.schedule is None
        assert s.makespan == m.runtime_s == plain.runtime_s
        np.testing.assert_array_equal(s.memory_peak, m.peak_bytes)
        np.testing.assert_array_equal(m.peak_bytes, plain.peak_bytes)
        np.testing.assert_array_equal(m.busy_s, plain.busy_s)
        assert int(s.transfer_bytes.sum()) == m.bytes_moved == plain.bytes_moved
        np.testing.assert_array_equal(s.op_device, m.placement[tiny.group])
        np.testing.assert_array_equal(s.link_bytes.sum(), m.bytes_moved)


def test_transfers_name_their_tensor_and_link(tiny, runs):
    for m, _ in runs:
        s = m.schedule
        assert len(s.transfer_src_op) > 0
        np.testing.assert_array_equal(s.transfer_src_device, s.op_device[s.transfer_src_op])
        assert np.all(s.transfer_src_device != s.transfer_dst_device)
        first, last = tiny.output_ptr[s.transfer_src_op], tiny.output_ptr[s.transfer_src_op + 1]
        assert np.all((first <= s.transfer_output) & (s.transfer_output < last))
        pairs = set(zip(s.transfer_output.tolist(), s.transfer_dst_device.tolist()))
        assert len(pairs) == len(s.transfer_output)  # one transfer per (output, destination)
        assert np.all(s.transfer_start >= s.op_end[s.transfer_src_op])
        assert np.all(s.transfer_end > s.transfer_start)
        np.testing.assert_array_equal(s.links[s.transfer_link][:, 0], s.transfer_src_device)
        np.testing.assert_array_equal(s.links[s.transfer_link][:, 1], s.transfer_dst_device)


def test_memory_timeline_is_the_memory_model(tiny, runs):
    for m, _ in runs:
        s = m.schedule
        persistent = np.bincount(m.placement[tiny.group], weights=tiny.persistent_bytes, minlength=s.n_devices)
        assert s.memory_in_use.shape == (s.n_devices, len(s.memory_time))
        assert s.memory_time[0] == 0.0 and np.all(np.diff(s.memory_time) >= 0)
        np.testing.assert_array_equal(s.memory_in_use[:, 0], persistent.astype(np.int64))
        np.testing.assert_array_equal(s.memory_in_use[:, -1], persistent.astype(np.int64))  # only variables left
        assert np.all(np.count_nonzero(np.diff(s.memory_in_use, axis=1), axis=0) == 1)  # one device per change
        times, last = np.unique(s.memory_time[::-1], return_index=True)
        settled = s.memory_in_use[:, len(s.memory_time) - 1 - last]  # after the last change of each instant
        np.testing.assert_array_equal(settled, reference_memory(tiny, s, times))


def test_shared_devices_and_batch(tiny, paper2):
    """A CPU with several lanes (processor sharing) keeps the same agreement; batches record no schedule."""
    seconds = analytical_costs(tiny, paper2).seconds
    batch = placements(tiny, paper2, 4, 1)
    batch[:, : tiny.n_groups // 2] = 0  # many ops share the CPU
    for p, plain in zip(batch, simulate_batch(tiny, paper2, seconds, batch)):
        m = simulate(tiny, paper2, seconds, p, schedule=True)
        assert plain.schedule is None and m.runtime_s == plain.runtime_s == m.schedule.makespan
        np.testing.assert_array_equal(m.schedule.memory_peak, plain.peak_bytes)


def test_schedule_is_immutable_and_checked(runs):
    s = runs[0][0].schedule
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.op_start = s.op_end  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        s.op_start[0] = 1.0
    values = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}
    with pytest.raises(ValueError, match="transfer_end has length"):
        Schedule(**{**values, "transfer_end": s.transfer_end[:-1]})
    with pytest.raises(ValueError, match="memory_in_use has shape"):
        Schedule(**{**values, "memory_in_use": s.memory_in_use[0]})
