"""The compiled (numba) batch of the simulated runtime: :func:`simulate_many` runs
:func:`~placement_env.runtime.simulator_core.simulate_core` for one or many placements in one call (on
one thread; :func:`simulate_many_parallel` on several; :func:`simulate_step_recorded` one placement with
its schedule), and :func:`accumulating_devices` decides where a step is rerun with grappler's sum
accumulation.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .simulator_core import simulate_core

__all__ = ["DEVICE_INDEX", "accumulating_devices", "simulate_many", "simulate_many_parallel", "simulate_row",
           "simulate_step_recorded"]

# The type of a device index per op: int16 (clusters have at most 32,767 devices), so that the device of
# each op, read at random by the loop, takes a quarter of the cache of int64.
DEVICE_INDEX = np.int16

# Grappler's memory optimizer rewrites a device's sums into accumulations once its (static) peak
# passes this share of the device's memory (memory_optimizer.cc, SchedulingPass: 0.8).
_SUM_REWRITE_SHARE = 0.8


@njit(cache=True)
def accumulating_devices(dev, is_sum, peak, capacity):
    """Per device: whether a step with ``peak`` bytes there would have its sums (``is_sum``, placed by
    ``dev``) rewritten into accumulations. All false when there is nothing to rewrite."""
    n_dev = capacity.shape[0]
    has_sum = np.zeros(n_dev, np.bool_)
    for i in range(dev.shape[0]):
        if is_sum[i]:
            has_sum[dev[i]] = True
    out = np.zeros(n_dev, np.bool_)
    for d in range(n_dev):
        out[d] = has_sum[d] and peak[d] > _SUM_REWRITE_SHARE * capacity[d]
    return out


@njit(cache=True, inline="always")
def _simulate_step(dev, capacity, record, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot,
                   slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot,
                   persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth, res_latency,
                   transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo):
    """:func:`simulate_core` of ``dev`` (device per op), run a second time with accumulating sums where its first
    run's peak calls for it. Inlined, so that each caller passes ``record`` as a constant: with a constant the
    compiler drops the record's branches from the loop, which made a step 2.5-3x faster (docs/findings.md). It
    takes at most 30 arguments: CPython passes a call of more than 30 as ``*args``, which numba cannot inline."""
    none = np.zeros(capacity.shape[0], np.bool_)  # no device accumulating
    res = simulate_core(dev, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot, slot_gout,
                        slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot, persistent,
                        concurrency, op_share, latency, route_ptr, route_res, res_bandwidth, res_latency,
                        transfer_overhead, copy_stream, host_cost, is_sum, none, ready_fifo, record)
    rewrite = accumulating_devices(dev, is_sum, res[1], capacity)
    if rewrite.any():
        res = simulate_core(dev, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot, slot_gout,
                            slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot,
                            persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth,
                            res_latency, transfer_overhead, copy_stream, host_cost, is_sum, rewrite, ready_fifo, record)
    return res


@njit(cache=True)
def simulate_step_recorded(dev, capacity, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot,
                           slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot,
                           out_forward_slot, persistent, concurrency, op_share, latency, route_ptr, route_res,
                           res_bandwidth, res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo):
    """One step of ``dev`` (device per op) as :func:`simulate_core` returns it, with the record of its schedule and
    memory timeline."""
    return _simulate_step(dev, capacity, True, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot,
                          slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot,
                          out_forward_slot, persistent, concurrency, op_share, latency, route_ptr, route_res,
                          res_bandwidth, res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo)


@njit(cache=True)
def simulate_row(r, placements, group, capacity, runtimes, peaks, busys, moved, op_seconds, out_ptr, edge_dst,
                 edge_gout, edge_bytes, in_ptr, edge_slot, slot_gout, slot_dst, output_ptr, output_bytes,
                 op_output_bytes, forward_slot, out_forward_slot, persistent, concurrency, op_share, latency, route_ptr,
                 route_res, res_bandwidth, res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo):
    """Row ``r`` of :func:`simulate_many`: the step of ``placements[r]`` (device per group; ``group``: group per
    op), written to row r of the outputs. The arguments from ``op_seconds`` on are the core's."""
    dev = np.empty(group.shape[0], DEVICE_INDEX)
    for i in range(group.shape[0]):
        dev[i] = placements[r, group[i]]
    res = _simulate_step(dev, capacity, False, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot,
                         slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot,
                         persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth, res_latency,
                         transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo)
    runtimes[r] = res[0]
    peaks[r] = res[1]
    busys[r] = res[2]
    moved[r] = res[3]


@njit(cache=True)
def simulate_many(placements, group, capacity, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot,
                  slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot,
                  persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth, res_latency,
                  transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo):
    """:func:`simulate_row` for every row of ``placements``, one after another. Returns (runtimes, peaks
    [k, device], busy seconds [k, device], bytes moved); records no schedule."""
    k, n_dev = placements.shape[0], capacity.shape[0]
    out = (np.empty(k), np.empty((k, n_dev), np.int64), np.empty((k, n_dev)), np.empty(k, np.int64))
    for r in range(k):
        simulate_row(r, placements, group, capacity, *out, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr,
                     edge_slot, slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot,
                     out_forward_slot, persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth,
                     res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo)
    return out


@njit(cache=True, parallel=True)
def simulate_many_parallel(placements, group, capacity, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr,
                           edge_slot, slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot,
                           out_forward_slot, persistent, concurrency, op_share, latency, route_ptr, route_res,
                           res_bandwidth, res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo):
    """:func:`simulate_many` with the rows shared out over numba's threads (``numba.set_num_threads``); the
    same results. A separate function, so that a batch on one thread never starts numba's thread pool; not
    the same Python function compiled twice, because numba's on-disk cache keys a function by its code
    and signature, not by ``parallel``, so the two compilations would overwrite each other (numba #6845).
    The core's arguments are passed one by one, as in :func:`simulate_many`: packed into one tuple, both
    batches ran about 1.5-2x slower (docs/findings.md)."""
    k, n_dev = placements.shape[0], capacity.shape[0]
    out = (np.empty(k), np.empty((k, n_dev), np.int64), np.empty((k, n_dev)), np.empty(k, np.int64))
    for r in prange(k):
        simulate_row(r, placements, group, capacity, *out, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr,
                     edge_slot, slot_gout, slot_dst, output_ptr, output_bytes, op_output_bytes, forward_slot,
                     out_forward_slot, persistent, concurrency, op_share, latency, route_ptr, route_res, res_bandwidth,
                     res_latency, transfer_overhead, copy_stream, host_cost, is_sum, ready_fifo)
    return out
