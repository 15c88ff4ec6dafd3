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
place in index order; the earliest-start order keeps that. On the generalisation suites' multi-GPU
placements of GPT-2 and BERT, index order leaves out up to 17-19% of a GPU's simulated peak (the GPU with the
first layers holds its forward activations while the later GPUs compute); the earliest-start order comes
within 4% of it (``python -m experiments.memory_estimate``).

What it leaves out, against the simulated runtime: queueing on busy devices and links, buffer forwarding (views
that alias their input count as new buffers here) and sums accumulated near full memory.

It is what a placer that may not evaluate anything (zero-shot) can know about memory: a graph analysis,
O(ops + edges) in array code (a few milliseconds at 10,000 ops).
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
    return _earliest_starts(np.asarray(graph.edge_src, np.int64), np.asarray(graph.edge_dst, np.int64), duration)


def sequential_memory(graph: OpGraph, cluster: Any, placement: Any, seconds: Any = None) -> SequentialMemory:
    """The :class:`SequentialMemory` of ``placement`` (one device per group) of ``graph`` on ``cluster``, ops in
    index order, or in the order of their :func:`earliest_starts` given ``seconds`` [n_ops, n_devices]."""
    group_device = check_placement(graph, cluster, placement)
    n_dev, n = cluster.n_devices, graph.n_ops
    dev = group_device[graph.group]
    # order[t]: the op that runs t-th; step[i]: when op i runs (index order, or earliest starts, ties by index)
    order = np.arange(n) if seconds is None else np.argsort(earliest_starts(graph, dev, seconds), kind="stable")
    step = np.empty(n, np.int64)
    step[order] = np.arange(n)
    out_op = np.repeat(np.arange(n), np.diff(graph.output_ptr))  # producer of each output
    data = graph.edge_src_output >= 0
    src, dst = graph.edge_src[data], graph.edge_dst[data]
    out = graph.output_ptr[src] + graph.edge_src_output[data]  # global output index of each data edge
    local = dev[dst] == dev[src]
    # buffers: every output on its producer's device, from its producer to its last consumer there ...
    free_own = step[out_op]
    np.maximum.at(free_own, out[local], step[dst[local]])
    # ... and a copy on each other device that consumes it, from its producer to its last consumer there
    copies, which = np.unique(out[~local] * n_dev + dev[dst[~local]], return_inverse=True)
    last_use = np.zeros(copies.size, np.int64)
    np.maximum.at(last_use, which, step[dst[~local]])
    copy_out = copies // n_dev
    buffer_device = np.concatenate([dev[out_op], copies % n_dev])
    buffer_start = np.concatenate([step[out_op], step[out_op[copy_out]]])
    buffer_end = np.concatenate([free_own, last_use]) + 1  # freed after that op has run
    size = graph.output_bytes.astype(np.int64)
    buffer_bytes = np.concatenate([size, size[copy_out]])
    # the group a buffer is charged to: an output's producer; a copy's last consumer on its device
    buffer_group = np.concatenate([graph.group[out_op], graph.group[order[last_use]]])
    delta = np.zeros((n_dev, n + 1), np.int64)
    np.add.at(delta, (buffer_device, buffer_start), buffer_bytes)
    np.add.at(delta, (buffer_device, buffer_end), -buffer_bytes)
    live = np.cumsum(delta, axis=1)
    peak_step = live.argmax(axis=1)
    resident = np.bincount(dev, weights=graph.persistent_bytes, minlength=n_dev).astype(np.int64)
    alive = (buffer_start <= peak_step[buffer_device]) & (peak_step[buffer_device] < buffer_end)
    at_peak = np.zeros((graph.n_groups, n_dev), np.int64)
    np.add.at(at_peak, (buffer_group[alive], buffer_device[alive]), buffer_bytes[alive])
    at_peak[np.arange(graph.n_groups), group_device] += np.asarray(graph.group_persistent_bytes, np.int64)
    return SequentialMemory(peak_bytes=resident + live[np.arange(n_dev), peak_step], peak_op=order[peak_step],
                            at_peak_bytes=at_peak)
