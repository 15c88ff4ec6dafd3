"""A static estimate of each device's peak memory under a placement, with no simulated step.

:func:`sequential_peak_bytes` runs the graph's ops one at a time in op index order (a topological order)
and keeps the simulator's liveness rules without its clock: an op's outputs are allocated when it runs and
freed after the last consumer on its own device; an output consumed on another device also has a copy there,
from the time it is produced until its last consumer there; persistent bytes (variables) stay all step.

What it leaves out, against the simulated runtime: the order in which parallel devices interleave (ops run
as soon as their inputs arrive, so more activations can be alive at once), buffer forwarding (views that
alias their input count as new buffers here) and sums accumulated near full memory. On the generalisation
suites' graphs the simulated peak is 0.83-1.13x this estimate (``python -m experiments.memory_estimate``).

It is what a placer that may not evaluate anything (zero-shot) can know about memory: a graph analysis,
O(ops + edges) in array code (a few milliseconds at 10,000 ops).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .opgraph import OpGraph
from .placement import check_placement

__all__ = ["SequentialMemory", "sequential_memory", "sequential_peak_bytes"]


@dataclass(frozen=True)
class SequentialMemory:
    """What :func:`sequential_memory` found: ``peak_bytes`` [n_devices] int64 and, per device, ``peak_op``: the
    op index at whose run the peak is reached; ``at_peak_bytes`` [n_groups, n_devices]: each group's bytes
    alive on each device at that device's peak (its resident bytes there, its outputs and the copies of other
    groups' outputs it consumes there), i.e. what moving the group elsewhere could take off that peak."""

    peak_bytes: np.ndarray
    peak_op: np.ndarray
    at_peak_bytes: np.ndarray


def sequential_peak_bytes(graph: OpGraph, cluster: Any, placement: Any) -> np.ndarray:
    """[n_devices] int64: each device's peak bytes in use when ``graph``'s ops run one at a time in index order
    with ``placement`` (one device per group) on ``cluster`` (see the module docstring)."""
    return sequential_memory(graph, cluster, placement).peak_bytes


def sequential_memory(graph: OpGraph, cluster: Any, placement: Any) -> SequentialMemory:
    """The :class:`SequentialMemory` of ``placement`` (one device per group) of ``graph`` on ``cluster``."""
    group_device = check_placement(graph, cluster, placement)
    n_dev, n = cluster.n_devices, graph.n_ops
    dev = group_device[graph.group]
    out_op = np.repeat(np.arange(n), np.diff(graph.output_ptr))  # producer of each output
    data = graph.edge_src_output >= 0
    src, dst = graph.edge_src[data], graph.edge_dst[data]
    out = graph.output_ptr[src] + graph.edge_src_output[data]  # global output index of each data edge
    local = dev[dst] == dev[src]
    # buffers: every output on its producer's device, from its producer to its last consumer there ...
    free_own = out_op.copy()
    np.maximum.at(free_own, out[local], dst[local])
    # ... and a copy on each other device that consumes it, from its producer to its last consumer there
    copies, which = np.unique(out[~local] * n_dev + dev[dst[~local]], return_inverse=True)
    last_use = np.zeros(copies.size, np.int64)
    np.maximum.at(last_use, which, dst[~local])
    copy_out = copies // n_dev
    buffer_device = np.concatenate([dev[out_op], copies % n_dev])
    buffer_start = np.concatenate([out_op, out_op[copy_out]])
    buffer_end = np.concatenate([free_own, last_use]) + 1  # freed after that op has run
    size = graph.output_bytes.astype(np.int64)
    buffer_bytes = np.concatenate([size, size[copy_out]])
    # the group a buffer is charged to: an output's producer; a copy's last consumer on its device
    buffer_group = np.concatenate([graph.group[out_op], graph.group[last_use]])
    delta = np.zeros((n_dev, n + 1), np.int64)
    np.add.at(delta, (buffer_device, buffer_start), buffer_bytes)
    np.add.at(delta, (buffer_device, buffer_end), -buffer_bytes)
    live = np.cumsum(delta, axis=1)
    peak_op = live.argmax(axis=1)
    resident = np.bincount(dev, weights=graph.persistent_bytes, minlength=n_dev).astype(np.int64)
    alive = (buffer_start <= peak_op[buffer_device]) & (peak_op[buffer_device] < buffer_end)
    at_peak = np.zeros((graph.n_groups, n_dev), np.int64)
    np.add.at(at_peak, (buffer_group[alive], buffer_device[alive]), buffer_bytes[alive])
    at_peak[np.arange(graph.n_groups), group_device] += np.asarray(graph.group_persistent_bytes, np.int64)
    return SequentialMemory(peak_bytes=resident + live[np.arange(n_dev), peak_op], peak_op=peak_op,
                            at_peak_bytes=at_peak)
