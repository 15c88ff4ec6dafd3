"""Compiled (numba) steps of the simulator's event loop that several events share: the memory
timeline, freeing buffers, a sum adding an input in, putting a transfer on its route, and a
transfer's arrival. :mod:`placement_env.runtime.simulator_core` runs the loop.
"""
from __future__ import annotations

from numba import njit

from .heaps import ev_push, int_push

__all__ = ["EV_CONTROL", "EV_OP", "EV_TRANSFER", "EV_TRANSFER_START", "add_in", "deliver", "note", "release", "send"]

# Event kinds, in the order events of one instant are processed.
EV_OP = 0
EV_TRANSFER = 1
EV_CONTROL = 2
EV_TRANSFER_START = 3  # a queued transfer reaches the head of its link: its copy is allocated


@njit(cache=True, inline="always")
def note(record, mem_time, mem_trace, n_notes, now, mem, change):
    """With ``record``, append the bytes in use after a non-zero change at ``now``; the new count."""
    if record and change != 0:
        mem_time[n_notes] = now
        mem_trace[n_notes] = mem
        return n_notes + 1
    return n_notes


@njit(cache=True)
def release(e, d, edge_gout, edge_tid, out_refs, t_refs, output_bytes, t_bytes, out_forward_edge, mem, record,
             mem_time, mem_trace, n_notes, now):
    """A consumer on device ``d`` is done with in-edge ``e``'s buffer: drop one reference to it and
    free it on ``d`` when none is left. A freed output that forwards its input's buffer (an alias)
    then releases that buffer in turn. Returns the memory timeline's new length."""
    while e >= 0:
        o = edge_gout[e]
        tid = edge_tid[e]
        e = -1
        if tid < 0:
            out_refs[o] -= 1
            if out_refs[o] == 0:
                mem[d] -= output_bytes[o]
                n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, output_bytes[o])
                e = out_forward_edge[o]
        else:
            t_refs[tid] -= 1
            if t_refs[tid] == 0:
                mem[d] -= t_bytes[tid]
                n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, t_bytes[tid])
    return n_notes


@njit(cache=True)
def add_in(e, j, d, early, sum_allocated, output_ptr, output_bytes, edge_gout, edge_tid, out_refs, t_refs, t_bytes,
            out_forward_edge, mem, peak, record, mem_time, mem_trace, n_notes, now):
    """Data in-edge ``e`` of the accumulating sum ``j`` on device ``d`` has arrived: allocate the
    sum's output if this is its first input, add the input in and free it. Returns the timeline's length."""
    if not sum_allocated[j]:
        sum_allocated[j] = True
        alloc = 0
        for o in range(output_ptr[j], output_ptr[j + 1]):
            alloc += output_bytes[o]
        if alloc > 0:
            mem[d] += alloc
            if mem[d] > peak[d]:
                peak[d] = mem[d]
            n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, alloc)
    early[e] = True
    return release(e, d, edge_gout, edge_tid, out_refs, t_refs, output_bytes, t_bytes, out_forward_edge, mem,
                    record, mem_time, mem_trace, n_notes, now)


@njit(cache=True)
def send(tid, ready_at, route_ptr, route_res, res_free, res_latency, res_bandwidth, t_sdev, t_ddev, t_bytes, t_start,
          t_end, mem, peak, record, mem_time, mem_trace, n_notes, ev_keys, ev_vals, n_ev, cap, now):
    """Put transfer ``tid`` on its route from ``ready_at``: it streams through every directed link
    of the route at once; each link serves its transfers FIFO, each for latency + bytes / bandwidth.
    It starts once all its links have begun and ends when the last is done. Returns (events, notes)."""
    n_dev = mem.shape[0]
    dj = t_ddev[tid]
    pair = t_sdev[tid] * n_dev + dj
    start = ready_at
    end = ready_at
    for k in range(route_ptr[pair], route_ptr[pair + 1]):
        r = route_res[k]
        begin = res_free[r] if res_free[r] > ready_at else ready_at
        finish = begin + res_latency[r] + t_bytes[tid] / res_bandwidth[r]
        res_free[r] = finish
        if begin > start:
            start = begin
        if finish > end:
            end = finish
    t_start[tid] = start
    t_end[tid] = end
    if start == now:  # the received copy lives from the transfer's start
        mem[dj] += t_bytes[tid]
        if mem[dj] > peak[dj]:
            peak[dj] = mem[dj]
        n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, t_bytes[tid])
    else:
        n_ev = ev_push(ev_keys, ev_vals, n_ev, start, EV_TRANSFER_START * cap + tid)
    n_ev = ev_push(ev_keys, ev_vals, n_ev, end, EV_TRANSFER * cap + tid)
    return n_ev, n_notes


@njit(cache=True)
def deliver(tid, t_head, e_next, edge_dst, dev, remaining, ready, ready_size, is_sum, accumulating, early,
             sum_allocated, output_ptr, output_bytes, edge_gout, edge_tid, out_refs, t_refs, t_bytes, out_forward_edge,
             mem, peak, record, mem_time, mem_trace, n_notes, now):
    """Transfer ``tid`` has arrived: each edge it serves counts as an input of its consumer. Returns the notes."""
    e = t_head[tid]
    while e >= 0:
        j = edge_dst[e]
        dj = dev[j]
        remaining[j] -= 1
        if remaining[j] == 0:
            ready_size[dj] = int_push(ready[dj], ready_size[dj], j)
        if is_sum[j] and accumulating[dj]:
            n_notes = add_in(e, j, dj, early, sum_allocated, output_ptr, output_bytes, edge_gout,
                              edge_tid, out_refs, t_refs, t_bytes, out_forward_edge, mem, peak, record,
                              mem_time, mem_trace, n_notes, now)
        e = e_next[e]
    return n_notes
