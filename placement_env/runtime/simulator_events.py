"""Compiled (numba) steps of the simulator's event loop that several events share: the memory
timeline, freeing buffers and a sum adding an input in. :mod:`placement_env.runtime.simulator_core`
runs the loop (and writes out the per-transfer steps itself: a compiled call per transfer is slow).
"""
from __future__ import annotations

from numba import njit

__all__ = ["EV_CONTROL", "EV_OP", "EV_TRANSFER", "EV_TRANSFER_START", "add_in", "note", "release"]

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
def release(k, d, slot_gout, slot_tid, out_refs, t_refs, output_bytes, t_bytes, out_forward_slot, mem, record,
             mem_time, mem_trace, n_notes, now):
    """A consumer on device ``d`` is done with the buffer of its in-edge at slot ``k`` (of the in-edges
    in consumer order; ``slot_gout``: the output it carries, ``slot_tid``: its transfer or -1): drop one
    reference to it and free it on ``d`` when none is left. A freed output that forwards its input's buffer
    (an alias, ``out_forward_slot``) then releases that buffer in turn. Returns the memory timeline's new
    length."""
    while k >= 0:
        o = slot_gout[k]
        tid = slot_tid[k]
        k = -1
        if tid < 0:
            out_refs[o] -= 1
            if out_refs[o] == 0:
                mem[d] -= output_bytes[o]
                n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, output_bytes[o])
                k = out_forward_slot[o]
        else:
            t_refs[tid] -= 1
            if t_refs[tid] == 0:
                mem[d] -= t_bytes[tid]
                n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, t_bytes[tid])
    return n_notes


@njit(cache=True)
def add_in(k, j, d, early, sum_allocated, op_output_bytes, output_bytes, slot_gout, slot_tid, out_refs, t_refs, t_bytes,
            out_forward_slot, mem, peak, record, mem_time, mem_trace, n_notes, now):
    """The data in-edge at slot ``k`` of the accumulating sum ``j`` on device ``d`` has arrived: allocate the
    sum's output if this is its first input, add the input in and free it. Returns the timeline's length."""
    if not sum_allocated[j]:
        sum_allocated[j] = True
        alloc = op_output_bytes[j]
        if alloc > 0:
            mem[d] += alloc
            if mem[d] > peak[d]:
                peak[d] = mem[d]
            n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, alloc)
    early[k] = True
    return release(k, d, slot_gout, slot_tid, out_refs, t_refs, output_bytes, t_bytes, out_forward_slot, mem,
                    record, mem_time, mem_trace, n_notes, now)
