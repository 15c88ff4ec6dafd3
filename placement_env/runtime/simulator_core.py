"""The compiled (numba) event loop of the simulated runtime.

:mod:`placement_env.runtime.simulated` documents the model and prepares the arrays;
:func:`simulate_core` runs one placement (:mod:`.simulator_batch` a batch). It takes plain arrays
only, so numba compiles it once (cached on disk) for every graph and cluster.

With ``record`` true, :func:`simulate_core` also keeps the memory timeline: the time and the bytes
in use on every device after each non-zero change. With ``record`` false it keeps nothing more and
does the same arithmetic in the same order, so every number is the same either way.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .heaps import ev_pop, ev_push, ready_pop, ready_push
from .simulator_events import EV_CONTROL, EV_OP, EV_TRANSFER, EV_TRANSFER_START, add_in, note, release

__all__ = ["simulate_core"]

_TIE_REL = 1e-12  # relative tolerance for simultaneous completions on a shared device


# ---------------------------------------------------------------------------------------------
# The compiled core.


@njit(cache=True, inline="always")
def _service(elapsed, k, share):
    """Whole-device service each of ``k`` active ops receives in ``elapsed`` seconds: 1/k of the
    device each, but never more than ``share`` (the most one op can use)."""
    if share * k >= 1.0:
        return elapsed / k
    return elapsed * share


@njit(cache=True, inline="always")
def _real_time(service, k, share):
    """Seconds for each of ``k`` active ops to receive ``service`` (the inverse of ``_service``)."""
    if share * k >= 1.0:
        return service * k
    return service / share


@njit(cache=True)
def simulate_core(dev, op_seconds, out_ptr, edge_dst, edge_gout, edge_bytes, in_ptr, edge_slot, slot_gout, slot_dst,
                  output_ptr, output_bytes, op_output_bytes, forward_slot, out_forward_slot, persistent, concurrency,
                  op_share,
                  latency, route_ptr, route_res, res_bandwidth, res_latency, transfer_overhead, copy_stream, host_cost,
                   is_sum, accumulating, ready_fifo, record):
    """One step of the placement ``dev`` (device per op); see the simulated runtime's module docstring.

    A sum (``is_sum``) placed on a device with ``accumulating`` true allocates its output when its
    first data input arrives and frees each input as soon as it arrives (it is added in at once).

    With a ``host_cost`` (seconds per tensor and per byte of a host transfer, then the step's cost for any op off
    device 0, added to the makespan; empty: none), every
    transfer is also CPU work on both ends: a send task on its source device before the
    interconnect and a receive task on its destination after it, each
    ``host_fixed + bytes * host_per_byte`` seconds of one lane. Tasks wait in the devices' ready
    sets as negative codes ``2 * tid + end - n_tasks`` (end 0: send, 1: receive; an op waits as its
    index; each set holds code + n_tasks), so a device starts
    its waiting tasks, oldest transfer first, before its waiting ops (TF encodes a tensor in the
    thread of the ``_Send`` that produced it, and decodes it as soon as the RPC's response is in).

    With ``copy_stream`` (per ordered device pair, the stream that performs its copies or -1; empty: no
    streams), a transfer is a copy on that stream: each stream performs one copy at a time, in the order they
    are put on it, from its start (the fixed overhead, then the route) to its end.

    A device starts its waiting ops lowest op index first, or with ``ready_fifo`` in the order they became
    ready (TF's executor: a ready op is queued and run in that order). Ops wait as their sequence key
    ``key``: the op index, or with ``ready_fifo`` the count of ops made ready before it (``op_of[key]``: the op).

    Returns (makespan, peak, busy, bytes_moved, ops started, op_start, op_end, then per transfer its
    source op, output, source device, destination device, start, end and bytes, then the memory
    timeline's times and bytes in use [changes, device]: only the initial state unless ``record``).
    """
    n = dev.shape[0]
    m = edge_dst.shape[0]
    n_dev = concurrency.shape[0]
    n_out = output_bytes.shape[0]
    host_on = host_cost.shape[0] > 0
    host_fixed = host_cost[0] if host_on else 0.0
    host_per_byte = host_cost[1] if host_on else 0.0
    n_tasks = 2 * m if host_on else 0  # codes of the host transfers' send and receive tasks

    # ---- per-placement preparation: transfers, reference counts, in-degrees ----
    # Arrays over all edges or outputs are set as they are used rather than filled first: at
    # 50,000 ops the fills cost more than the rest of the preparation.
    # Index arrays take the plan's index type (int32 where it fits: less memory to wait on). A data
    # edge's per-placement state is kept at its slot among its consumer's in-edges (in_ptr), the order
    # in which an op's end frees its inputs.
    slot_tid = np.empty(m, in_ptr.dtype)  # transfer of a data in-edge, -1 for a local one
    t_src = np.empty(m, np.int64)
    t_out = np.empty(m, np.int64)
    t_sdev = np.empty(m, np.int64)
    t_ddev = np.empty(m, np.int64)
    t_bytes = np.empty(m, np.int64)
    t_refs = np.empty(m, in_ptr.dtype)  # consumers of the received copy
    t_head = np.empty(m, in_ptr.dtype)  # linked list of the in-edges a transfer serves
    slot_next = np.empty(m, in_ptr.dtype)
    t_ptr = np.zeros(n + 1, in_ptr.dtype)  # transfers of op i: t_ptr[i]:t_ptr[i+1]
    out_refs = np.zeros(n_out, in_ptr.dtype)  # local consumers + outbound transfers per output
    remaining = in_ptr[1:] - in_ptr[:-1]  # inputs not yet arrived, per op
    seconds = np.empty(n)  # each op's seconds on its device
    n_t = 0
    for i in range(n):
        di = dev[i]
        seconds[i] = op_seconds[i, di]
        t_ptr[i] = n_t
        for e in range(out_ptr[i], out_ptr[i + 1]):
            o = edge_gout[e]
            if o < 0:
                continue
            j = edge_dst[e]
            dj = dev[j]
            k = edge_slot[e]
            if dj == di:
                out_refs[o] += 1
                slot_tid[k] = -1
            else:
                tid = t_ptr[i]  # this op's transfer of output o to device dj, if it has one yet
                while tid < n_t and (t_out[tid] != o or t_ddev[tid] != dj):
                    tid += 1
                if tid == n_t:
                    n_t += 1
                    t_refs[tid] = 0
                    t_head[tid] = -1
                    t_src[tid] = i
                    t_out[tid] = o
                    t_sdev[tid] = di
                    t_ddev[tid] = dj
                    t_bytes[tid] = edge_bytes[e]
                    out_refs[o] += 1
                slot_tid[k] = tid
                t_refs[tid] += 1
                slot_next[k] = t_head[tid]
                t_head[tid] = k
    t_ptr[n] = n_t

    # ---- state ----
    mem = np.zeros(n_dev, np.int64)
    busy = np.zeros(n_dev)
    for i in range(n):
        mem[dev[i]] += persistent[i]
    peak = mem.copy()
    early = np.zeros(m, np.bool_)  # in-edge slots whose buffer an accumulating sum already freed
    sum_allocated = np.zeros(n, np.bool_)
    n_trace = 1 + n + n_out + 2 * m if record else 1  # at most: allocations, output frees, copies in/out
    mem_time = np.zeros(n_trace)
    mem_trace = np.empty((n_trace, n_dev), np.int64)
    mem_trace[0] = mem
    n_notes = 1
    free_lanes = concurrency.copy()
    # Processor sharing on the devices with concurrency > 1 ("shared"): a virtual clock per device
    # (whole-device service received by each active op) advancing at 1/k while k ops are active,
    # a min-heap of the active ops keyed by virtual finish time, and the real time of the device's
    # next completion, kept out of the event heap (there are few shared devices; scanning them is
    # cheaper than re-posting an event each time k changes). A device of concurrency 1 runs one op
    # or task at a time: its end is next_done, and run_item names it (an op by its index, a task as
    # n + n_tasks + its code, so that ops ending at one instant come first, as in the event heap).
    shared = np.empty(n_dev, np.int64)
    n_shared = 0
    max_conc = 1
    for d in range(n_dev):
        if concurrency[d] > 1:
            shared[n_shared] = d
            n_shared += 1
            if concurrency[d] > max_conc:
                max_conc = concurrency[d]
    if max_conc > n + n_tasks:
        max_conc = n + n_tasks + 1
    v_clock = np.zeros(n_dev)
    v_time = np.zeros(n_dev)  # real time at which v_clock was last brought up to date
    active = np.zeros(n_dev, np.int64)
    act_keys = np.empty(n_dev * max_conc)  # device d's heap at [d * max_conc, d * max_conc + active[d])
    act_vals = np.empty(n_dev * max_conc, np.int64)
    next_done = np.full(n_dev, np.inf)
    run_item = np.zeros(n_dev, np.int64)
    busy_since = np.zeros(n_dev)
    done = np.empty(n + n_tasks + 1, in_ptr.dtype)  # the ops (and tasks) that end at the current instant
    n_words = (n + n_tasks + 63) >> 6
    ready0 = np.zeros((n_dev, n_words), np.uint64)
    ready1 = np.zeros((n_dev, (n_words + 63) >> 6), np.uint64)
    ready_low = np.full(n_dev, ready1.shape[1], np.int64)
    ready_size = np.zeros(n_dev, np.int64)
    op_of = np.empty(n if ready_fifo else 0, np.int64)  # with ready_fifo, the op waiting under each key
    n_readied = 0  # ops made ready so far: the next key with ready_fifo
    # (an op is made ready in four places below, each written out: as one inlined helper it made a single step of
    # NMT on k80-2gpu 1.5x slower, 1.54 against 1.04 ms, docs/findings.md)
    for i in range(n):
        if remaining[i] == 0:
            d = dev[i]
            key = i
            if ready_fifo:
                key = n_readied
                op_of[key] = i
                n_readied += 1
            ready_push(ready0, ready1, ready_low, ready_size, d, key + n_tasks)
    # The event heap holds the transfers' starts and ends and the control edges' arrivals: value =
    # kind * cap + index (a transfer or an edge), cap a power of two above every index, so that the
    # kind is a shift away.
    cap_bits = 1
    while (1 << cap_bits) <= m:
        cap_bits += 1
    cap = 1 << cap_bits
    ev_keys = np.empty(2 * m + 1)
    ev_vals = np.empty(2 * m + 1, np.int64)
    n_ev = 0
    res_free = np.zeros(res_bandwidth.shape[0])  # when each directed link of the interconnect is next free
    # The copy streams (three per device; only GPUs' are used): the copy each is performing (-1: none), and
    # the copies waiting for it, a FIFO linked list (head, tail; t_wait_next: the next waiting copy).
    streams_on = copy_stream.shape[0] > 0
    n_streams = 3 * n_dev if streams_on else 0
    stream_copy = np.full(n_streams, -1, np.int64)
    stream_head = np.full(n_streams, -1, np.int64)
    stream_tail = np.full(n_streams, -1, np.int64)
    t_wait_next = np.empty(m if streams_on else 0, np.int64)
    n_timed, n_t_timed = (n, n_t) if record else (0, 0)  # start and end times are part of the record
    op_start = np.full(n_timed, np.nan)
    op_end = np.full(n_timed, np.nan)
    t_start = np.full(n_t_timed, np.nan)
    t_end = np.full(n_t_timed, np.nan)
    bytes_moved = 0
    makespan = 0.0
    started = 0
    now = 0.0

    while True:
        # start ready ops on free lanes, lowest key first
        for d in range(n_dev):
            if free_lanes[d] == 0 or ready_size[d] == 0:
                continue
            is_shared = concurrency[d] > 1
            if is_shared:  # bring the virtual clock up to now before k changes
                if active[d] > 0:
                    v_clock[d] += _service(now - v_time[d], active[d], op_share[d])
                else:
                    busy_since[d] = now
                v_time[d] = now
            while free_lanes[d] > 0 and ready_size[d] > 0:
                i = ready_pop(ready0, ready1, ready_low, ready_size, d) - n_tasks
                if ready_fifo and i >= 0:
                    i = op_of[i]
                free_lanes[d] -= 1
                if i < 0:  # a host transfer's send or receive task: one thread's work
                    dur = host_fixed + t_bytes[(i + n_tasks) >> 1] * host_per_byte
                    if is_shared:  # whole-device service that takes `dur` alone
                        active[d] = ev_push(act_keys, act_vals, d * max_conc, active[d], v_clock[d] + dur * op_share[d], i)
                    else:
                        busy[d] += dur
                        next_done[d] = now + dur
                        run_item[d] = n + n_tasks + i
                    continue
                started += 1
                dur = seconds[i]
                if record:
                    op_start[i] = now
                alloc = 0
                # (`accumulating`, a flag per device, is tested before the per-op and per-edge flags:
                # it is always in cache, and false on most devices)
                if not (accumulating[d] and sum_allocated[i]):
                    alloc = op_output_bytes[i]
                if alloc > 0:
                    mem[d] += alloc
                    if mem[d] > peak[d]:
                        peak[d] = mem[d]
                    n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, alloc)
                if is_shared:
                    active[d] = ev_push(act_keys, act_vals, d * max_conc, active[d], v_clock[d] + dur, i)
                else:
                    busy[d] += dur
                    next_done[d] = now + dur
                    run_item[d] = i
            if is_shared:  # the device's next completion in real time
                t_done = now + _real_time(act_keys[d * max_conc] - v_clock[d], active[d], op_share[d])
                next_done[d] = t_done if t_done > now else now
        # the next instant: the event heap's head or a device's next completion
        now = ev_keys[0] if n_ev > 0 else np.inf
        for d in range(n_dev):
            if next_done[d] < now:
                now = next_done[d]
        if now == np.inf:
            break
        # ops ending now: first those of concurrency-1 devices (op index order), then each shared
        # device's (device order; within one, ops whose virtual finish ties within _TIE_REL, in op
        # index order)
        n_done = 0
        for d in range(n_dev):
            if concurrency[d] > 1 or next_done[d] != now:
                continue
            next_done[d] = np.inf
            v = run_item[d]
            k = n_done
            while k > 0 and done[k - 1] > v:
                done[k] = done[k - 1]
                k -= 1
            done[k] = v
            n_done += 1
        for k in range(n_done):
            if done[k] >= n:
                done[k] -= n + n_tasks
        for s in range(n_shared):
            d = shared[s]
            if next_done[d] != now:
                continue
            first = n_done
            v_done = act_keys[d * max_conc]
            v_last = v_done + v_done * _TIE_REL
            while active[d] > 0 and act_keys[d * max_conc] <= v_last:
                v_done = act_keys[d * max_conc]
                i = act_vals[d * max_conc]
                active[d] = ev_pop(act_keys, act_vals, d * max_conc, active[d])
                k = n_done  # insertion into op index order
                while k > first and done[k - 1] > i:
                    done[k] = done[k - 1]
                    k -= 1
                done[k] = i
                n_done += 1
            v_clock[d] = v_done
            v_time[d] = now
            if active[d] > 0:
                t_done = now + _real_time(act_keys[d * max_conc] - v_done, active[d], op_share[d])
                next_done[d] = t_done  # > now up to rounding; if equal it is handled next round
            else:
                next_done[d] = np.inf
                busy[d] += now - busy_since[d]
        # Then everything of this instant, one item at a time: the ops and tasks in `done`, then the
        # other events in (kind, index) order. Each item may put transfers onto the interconnect
        # (first_send:end_send) and have one arrive (`arrived`); both are done in one place below,
        # written out rather than called, since a compiled call per transfer (even one numba
        # inlines) costs NMT 10%.
        f = 0
        while f < n_done or (n_ev > 0 and ev_keys[0] == now):
            if f < n_done:
                kind = EV_OP
                idx = done[f]
                f += 1
            else:
                code = ev_vals[0]
                n_ev = ev_pop(ev_keys, ev_vals, 0, n_ev)
                kind = code >> cap_bits
                idx = code - kind * cap
            first_send = 0
            end_send = 0
            arrived = -1
            if kind == EV_OP and idx < 0:  # a host transfer's task: a send goes on, a receive arrives
                tid = (idx + n_tasks) >> 1
                if (idx + n_tasks) & 1 == 0:
                    free_lanes[t_sdev[tid]] += 1
                    first_send = tid
                    end_send = tid + 1
                else:
                    free_lanes[t_ddev[tid]] += 1
                    if record:
                        t_end[tid] = now
                    arrived = tid
            elif kind == EV_OP:
                i = idx
                di = dev[i]
                if record:
                    op_end[i] = now
                if now > makespan:
                    makespan = now
                free_lanes[di] += 1
                # free inputs whose last local consumer this was (an alias keeps the input it forwards)
                for k in range(in_ptr[i], in_ptr[i + 1]):
                    if slot_gout[k] >= 0 and k != forward_slot[i] and not early[k]:
                        n_notes = release(k, di, slot_gout, slot_tid, out_refs, t_refs, output_bytes, t_bytes,
                                          out_forward_slot, mem, record, mem_time, mem_trace, n_notes, now)
                # outputs nobody consumes
                for o in range(output_ptr[i], output_ptr[i + 1]):
                    if out_refs[o] == 0:
                        mem[di] -= output_bytes[o]
                        n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, output_bytes[o])
                        if out_forward_slot[o] >= 0:
                            n_notes = release(out_forward_slot[o], di, slot_gout, slot_tid, out_refs, t_refs,
                                              output_bytes, t_bytes, out_forward_slot, mem, record, mem_time,
                                              mem_trace, n_notes, now)
                # successors: local ones and control edges; data transfers below
                for e in range(out_ptr[i], out_ptr[i + 1]):
                    j = edge_dst[e]
                    dj = dev[j]
                    if dj == di:
                        remaining[j] -= 1
                        if remaining[j] == 0:
                            key = j
                            if ready_fifo:
                                key = n_readied
                                op_of[key] = j
                                n_readied += 1
                            ready_push(ready0, ready1, ready_low, ready_size, dj, key + n_tasks)
                        if accumulating[dj] and edge_gout[e] >= 0 and is_sum[j]:
                            n_notes = add_in(edge_slot[e], j, dj, early, sum_allocated, op_output_bytes, output_bytes,
                                             slot_gout, slot_tid, out_refs, t_refs, t_bytes, out_forward_slot, mem, peak,
                                             record, mem_time, mem_trace, n_notes, now)
                    elif edge_gout[e] < 0:
                        n_ev = ev_push(ev_keys, ev_vals, 0, n_ev, now + transfer_overhead + latency[di, dj],
                                       EV_CONTROL * cap + e)
                if host_on:  # first the sender encodes each transfer (a task on its device)
                    for tid in range(t_ptr[i], t_ptr[i + 1]):
                        ready_push(ready0, ready1, ready_low, ready_size, di, 2 * tid)
                else:
                    first_send = t_ptr[i]
                    end_send = t_ptr[i + 1]
            elif kind == EV_TRANSFER:  # off the interconnect: the sender's copy is released
                tid = idx
                if streams_on:  # its stream takes up the next copy waiting for it, if any
                    s = copy_stream[t_sdev[tid] * n_dev + t_ddev[tid]]
                    if s >= 0:
                        waiting = stream_head[s]
                        stream_copy[s] = waiting
                        if waiting >= 0:
                            first_send = waiting
                            end_send = waiting + 1
                            stream_head[s] = t_wait_next[waiting]
                o = t_out[tid]
                out_refs[o] -= 1
                if out_refs[o] == 0:
                    mem[t_sdev[tid]] -= output_bytes[o]
                    n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, output_bytes[o])
                    n_notes = release(out_forward_slot[o], t_sdev[tid], slot_gout, slot_tid, out_refs, t_refs,
                                      output_bytes, t_bytes, out_forward_slot, mem, record, mem_time, mem_trace,
                                      n_notes, now)
                if host_on:  # then the receiver decodes it (a task on its device)
                    dj = t_ddev[tid]
                    ready_push(ready0, ready1, ready_low, ready_size, dj, 2 * tid + 1)
                else:
                    arrived = tid
            elif kind == EV_TRANSFER_START:
                dj = t_ddev[idx]
                mem[dj] += t_bytes[idx]
                if mem[dj] > peak[dj]:
                    peak[dj] = mem[dj]
                n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, t_bytes[idx])
            else:  # EV_CONTROL
                j = edge_dst[idx]
                remaining[j] -= 1
                if remaining[j] == 0:
                    dj = dev[j]
                    key = j
                    if ready_fifo:
                        key = n_readied
                        op_of[key] = j
                        n_readied += 1
                    ready_push(ready0, ready1, ready_low, ready_size, dj, key + n_tasks)
            # Put each transfer on its route after the fixed overhead: it streams through every
            # directed link of the route at once; each link serves its transfers FIFO, each for
            # latency + bytes / bandwidth. It starts once all its links have begun and ends when
            # the last is done; the received copy lives from its start. A copy whose stream is
            # busy waits for it instead (the stream starts it when its current copy ends).
            for tid in range(first_send, end_send):
                dj = t_ddev[tid]
                pair = t_sdev[tid] * n_dev + dj
                if streams_on:
                    s = copy_stream[pair]
                    if s >= 0 and stream_copy[s] != tid:
                        if stream_copy[s] >= 0:
                            t_wait_next[tid] = -1
                            if stream_head[s] < 0:
                                stream_head[s] = tid
                            else:
                                t_wait_next[stream_tail[s]] = tid
                            stream_tail[s] = tid
                            continue
                        stream_copy[s] = tid
                bytes_moved += t_bytes[tid]
                ready_at = now + transfer_overhead
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
                if record:
                    t_start[tid] = start
                    t_end[tid] = end
                if start == now:
                    mem[dj] += t_bytes[tid]
                    if mem[dj] > peak[dj]:
                        peak[dj] = mem[dj]
                    n_notes = note(record, mem_time, mem_trace, n_notes, now, mem, t_bytes[tid])
                else:
                    n_ev = ev_push(ev_keys, ev_vals, 0, n_ev, start, EV_TRANSFER_START * cap + tid)
                n_ev = ev_push(ev_keys, ev_vals, 0, n_ev, end, EV_TRANSFER * cap + tid)
            # A transfer that arrived: each edge it serves counts as an input of its consumer.
            if arrived >= 0:
                k = t_head[arrived]
                while k >= 0:
                    j = slot_dst[k]
                    dj = dev[j]
                    remaining[j] -= 1
                    if remaining[j] == 0:
                        key = j
                        if ready_fifo:
                            key = n_readied
                            op_of[key] = j
                            n_readied += 1
                        ready_push(ready0, ready1, ready_low, ready_size, dj, key + n_tasks)
                    if accumulating[dj] and is_sum[j]:
                        n_notes = add_in(k, j, dj, early, sum_allocated, op_output_bytes, output_bytes, slot_gout,
                                         slot_tid, out_refs, t_refs, t_bytes, out_forward_slot, mem, peak, record,
                                         mem_time, mem_trace, n_notes, now)
                    k = slot_next[k]

    if host_on and host_cost[2] > 0.0:  # the master's RunGraph RPC to another worker (HostTransfer.remote_step_s)
        for i in range(n):
            if dev[i] != 0:
                makespan += host_cost[2]
                break

    return (makespan, peak, busy, bytes_moved, started, op_start, op_end,
            t_src[:n_t].copy(), t_out[:n_t].copy(), t_sdev[:n_t].copy(), t_ddev[:n_t].copy(), t_start, t_end,
            t_bytes[:n_t].copy(), mem_time[:n_notes].copy(), mem_trace[:n_notes].copy())
