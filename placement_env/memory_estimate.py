"""A static estimate of each device's peak memory under a placement, with no simulated step.

:func:`sequential_peak_bytes` runs the graph's ops one at a time and keeps the simulator's liveness rules
without its clock: an op's outputs are allocated when it runs and freed after the last consumer on its own
device; an output consumed on another device also has a copy there, from the time it is produced until its
last consumer there; persistent bytes (variables) stay all step.

The order the ops run in is op index order (a topological order), or, given the ops' compute times
(``seconds``, [n_ops, n_devices], e.g. ``Evaluator.costs.seconds``), the order of their earliest starts:
each op starts when the last of its inputs' producers (and control predecessors) finishes, each taking its
time on its own device, with no queueing and no transfer time (:func:`earliest_starts`). Devices run in
parallel, so an op of a device whose predecessors lie on other devices runs when they are done, not at its
place in index order; the earliest-start order keeps that (a GPU holding a model's first layers keeps their
forward activations while later GPUs compute, which index order leaves out; docs/findings.md compares the two
orders with the simulated peak).

What it leaves out, against the simulated runtime: queueing on busy devices and links, buffer forwarding (views
that alias their input count as new buffers here) and sums accumulated near full memory.

It is what a placer that may not evaluate anything (zero-shot) can know about memory: a graph analysis,
O(ops + edges) in compiled loops, plus a sort for the earliest-start order (under a millisecond at 10,000 ops).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from numba import njit

from .opgraph import OpGraph
from .placement import check_placement

__all__ = ["SequentialMemory", "earliest_starts", "sequential_memory", "sequential_peak_bytes"]


@dataclass(frozen=True)
class SequentialMemory:
    """What :func:`sequential_memory` found: ``peak_bytes`` [n_devices] int64 and, per device, ``peak_op``: the
    op index at whose run the peak is reached; ``at_peak_bytes`` [n_groups, n_devices]: each group's bytes
    alive on each device at that device's peak (its resident bytes there, its outputs and the copies of other
    groups' outputs it consumes there), i.e. what moving the group elsewhere could take off that peak."""

    peak_bytes: np.ndarray
    peak_op: np.ndarray
    at_peak_bytes: np.ndarray


def sequential_peak_bytes(graph: OpGraph, cluster: Any, placement: Any, seconds: Any = None) -> np.ndarray:
    """[n_devices] int64: each device's peak bytes in use when ``graph``'s ops run one at a time with
    ``placement`` (one device per group) on ``cluster``, in index order or, given ``seconds``, in the order of
    their earliest starts (see the module docstring)."""
    return sequential_memory(graph, cluster, placement, seconds).peak_bytes


@njit(cache=True)
def _earliest_starts(edge_src, edge_dst, duration):
    start = np.zeros(duration.size)
    for e in range(edge_src.size):  # edges sorted by source, and sources before destinations
        finish = start[edge_src[e]] + duration[edge_src[e]]
        if finish > start[edge_dst[e]]:
            start[edge_dst[e]] = finish
    return start


def earliest_starts(graph: OpGraph, op_device: np.ndarray, seconds: Any) -> np.ndarray:
    """[n_ops] float64: each op's earliest start when it starts as soon as all its predecessors (data and control
    edges) have finished, op ``i`` taking ``seconds[i, op_device[i]]``, with no queueing and no transfer time."""
    seconds = np.asarray(seconds, np.float64)
    if seconds.ndim != 2 or seconds.shape[0] != graph.n_ops or seconds.shape[1] <= int(op_device.max(initial=0)):
        raise ValueError(f"seconds has shape {seconds.shape}; expected ({graph.n_ops}, n_devices): each op's "
                         f"compute time on each device of the cluster")
    duration = np.ascontiguousarray(seconds[np.arange(graph.n_ops), op_device])
    return _earliest_starts(graph.edge_src, graph.edge_dst, duration)


@njit(cache=True)
def _sequential_memory(dev, order, group, n_groups, output_ptr, output_bytes, persistent_bytes, edge_src, edge_dst,
                       edge_src_output, n_dev):
    """Each device's peak bytes, the step at which it is reached, and each group's bytes alive on each device at
    that step but its resident bytes (see :func:`sequential_memory`): one pass over the data edges for each
    buffer's last use, one over the buffers for the bytes in use at each step."""
    n = dev.size
    n_out = output_bytes.size
    step = np.empty(n, np.int64)  # when each op runs
    for t in range(n):
        step[order[t]] = t
    out_op = np.empty(n_out, np.int64)  # the producer of each output
    for i in range(n):
        for o in range(output_ptr[i], output_ptr[i + 1]):
            out_op[o] = i
    # every output lives on its producer's device from its producer to its last consumer there (own_last), and a
    # copy on each other device that consumes it from its producer to its last consumer there (copy_last, -1: none)
    own_last = np.empty(n_out, np.int64)
    for o in range(n_out):
        own_last[o] = step[out_op[o]]
    copy_last = np.full((n_out, n_dev), -1, np.int64)
    for e in range(edge_src.size):
        if edge_src_output[e] < 0:  # a control edge
            continue
        o = output_ptr[edge_src[e]] + edge_src_output[e]
        j = edge_dst[e]
        d = dev[j]
        if d == dev[edge_src[e]]:
            own_last[o] = max(own_last[o], step[j])
        else:
            copy_last[o, d] = max(copy_last[o, d], step[j])
    # bytes in use after each step, per device: +bytes at a buffer's first step, -bytes after its last
    delta = np.zeros((n_dev, n + 1), np.int64)
    for o in range(n_out):
        first = step[out_op[o]]
        size = output_bytes[o]
        home = dev[out_op[o]]
        delta[home, first] += size
        delta[home, own_last[o] + 1] -= size
        for d in range(n_dev):
            if copy_last[o, d] >= 0:
                delta[d, first] += size
                delta[d, copy_last[o, d] + 1] -= size
    resident = np.zeros(n_dev, np.int64)  # persistent bytes (variables), there all step
    for i in range(n):
        resident[dev[i]] += persistent_bytes[i]
    peak_step = np.zeros(n_dev, np.int64)  # the first step at which the device's bytes in use are highest
    peak_live = np.zeros(n_dev, np.int64)
    for d in range(n_dev):
        live = 0
        for t in range(n + 1):
            live += delta[d, t]
            if t == 0 or live > peak_live[d]:
                peak_live[d] = live
                peak_step[d] = t
    # the buffers alive at each device's peak, charged to a group: an output's producer, a copy's last consumer
    at_peak = np.zeros((n_groups, n_dev), np.int64)
    for o in range(n_out):
        first = step[out_op[o]]
        home = dev[out_op[o]]
        if first <= peak_step[home] <= own_last[o]:
            at_peak[group[out_op[o]], home] += output_bytes[o]
        for d in range(n_dev):
            if copy_last[o, d] >= 0 and first <= peak_step[d] <= copy_last[o, d]:
                at_peak[group[order[copy_last[o, d]]], d] += output_bytes[o]
    return resident + peak_live, peak_step, at_peak


def sequential_memory(graph: OpGraph, cluster: Any, placement: Any, seconds: Any = None) -> SequentialMemory:
    """The :class:`SequentialMemory` of ``placement`` (one device per group) of ``graph`` on ``cluster``, ops in
    index order, or in the order of their :func:`earliest_starts` given ``seconds`` [n_ops, n_devices]."""
    group_device = check_placement(graph, cluster, placement)
    n_dev, n = cluster.n_devices, graph.n_ops
    dev = group_device[graph.group]
    # order[t]: the op that runs t-th (index order, or earliest starts, ties by index)
    order = np.arange(n) if seconds is None else np.argsort(earliest_starts(graph, dev, seconds), kind="stable")
    peak, peak_step, at_peak = _sequential_memory(
        dev, order, graph.group, graph.n_groups, graph.output_ptr, np.asarray(graph.output_bytes, np.int64),
        np.asarray(graph.persistent_bytes, np.int64), graph.edge_src, graph.edge_dst, graph.edge_src_output, n_dev)
    at_peak[np.arange(graph.n_groups), group_device] += np.asarray(graph.group_persistent_bytes, np.int64)
    return SequentialMemory(peak_bytes=peak, peak_op=order[peak_step], at_peak_bytes=at_peak)
