"""The block model of placement and schedule: a graph's ops gathered into blocks that run whole, small enough for
CP-SAT to solve to a proof (:func:`blocks`, :func:`block_model`).

A block is the set of one group's ops at one *level* and in one *slice*. An op's level is the most group changes
on any path from a source to it (an edge within a group keeps the level, an edge between groups adds one); its
slice is which of ``slices`` equal parts of the critical path its earliest start falls in. Along every edge the
level and the earliest start never fall, and the level rises between groups, so the blocks form a DAG whatever
cycles the groups form between them, and a block's ops all share its group's device. More slices make smaller
blocks: a layer's early ops on one device can then feed the next layer on another before its late ops run, as in
the simulator.

In the model a block runs as one task:

* on a device of one lane (a GPU) it lasts its ops' summed seconds there;
* on a device of several lanes (processor sharing, a CPU) the longer of its ops' longest path inside the block at
  their share of the device and its ops' work at the device's throughput (``relaxation.device_rates``), holding
  an even part of the device all that time (its work over its duration; the blocks running at once hold at most
  the whole device);
* it starts when every block feeding it has ended and, from a block on another device, the tensors it reads from
  that block have arrived: one transfer of their summed bytes (the fixed overhead, the route's slowest link alone
  and a host transfer's two tasks, ``relaxation.transfer_seconds``), or a control edge's overhead and latency;
* the persistent bytes on each device fit its memory; each group on one device that has kernels for all its ops.

So, against the simulator, the model *tightens* (a block's ops run back to back after all its inputs, none of
them overlapping another block's ops on a GPU or starting on a partial input; a block on a CPU holds an even part
of it throughout) and *relaxes* (no queueing on links or copy streams, transfers between different block pairs overlap
freely, the executor's first-in-first-out order is replaced by the best order of blocks, memory other than
variables is left out). Its optimum is neither a bound on nor the simulator's optimum: it is a placement, proven
best for this coarser semantics, for the simulator to run. The lower bounds are the relaxed model's
(:mod:`.relaxation`) and the window program's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..cluster.checks import bad_argument, check_number
from ..opgraph import OpGraph
from ..placement import allowed_devices
from .bounds import heads_and_tails
from .relaxation import SHARE_SCALE, TICKS_PER_HORIZON, RelaxedModel, device_rates, list_schedule, ticks, transfer_seconds

__all__ = ["Blocks", "block_model", "blocks"]


@dataclass(frozen=True)
class Blocks:
    """A graph's blocks in seconds: ``of_op[i]``: op ``i``'s block (blocks numbered in a topological order);
    ``group[b]``: block ``b``'s group; ``seconds[b, d]``: how long block ``b`` runs on device ``d``; ``work[b, d]``:
    its ops' summed seconds there (what it asks of the device's throughput); ``edges``: [k, 2] (producer block,
    consumer block), one per pair; ``lag_s[k, a, b]``: edge ``k``'s delay with its producer on ``a`` and consumer
    on ``b`` (0 when ``a == b``)."""

    of_op: np.ndarray
    group: np.ndarray
    seconds: np.ndarray
    work: np.ndarray
    edges: np.ndarray
    lag_s: np.ndarray

    @property
    def n_blocks(self) -> int:
        return int(self.group.shape[0])


def levels(graph: OpGraph) -> np.ndarray:
    """Per op, the most group changes on a path from a source to it (op indices are a topological order)."""
    src, dst, group = graph.edge_src.astype(np.int64), graph.edge_dst.astype(np.int64), graph.group
    order = np.argsort(dst, kind="stable")
    ptr = np.searchsorted(dst[order], np.arange(graph.n_ops + 1))
    feeding = src[order]
    level = np.zeros(graph.n_ops, np.int64)
    for i in range(graph.n_ops):
        producers = feeding[ptr[i]:ptr[i + 1]]
        if producers.size:
            level[i] = np.max(level[producers] + (group[producers] != group[i]))
    return level


def _longest_inside(of_op: np.ndarray, src: np.ndarray, dst: np.ndarray, seconds: np.ndarray, n_blocks: int
                    ) -> np.ndarray:
    """Per block, the longest path of ``seconds`` (per op) over the edges inside it."""
    inside = of_op[src] == of_op[dst]
    order = np.argsort(dst[inside], kind="stable")
    s, d = src[inside][order], dst[inside][order]
    ptr = np.searchsorted(d, np.arange(len(of_op) + 1))
    path = seconds.astype(np.float64).copy()
    for i in range(len(of_op)):
        if ptr[i + 1] > ptr[i]:
            path[i] += path[s[ptr[i]:ptr[i + 1]]].max()
    longest = np.zeros(n_blocks)
    np.maximum.at(longest, of_op, path)
    return longest


def _slice_of(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, slices: int) -> np.ndarray:
    """Per op, which of ``slices`` equal parts of the critical path its head (earliest start, every op at its
    fastest allowed device and every edge free) falls in. Along an edge the head never falls, so cutting a
    group's ops at one level by slice keeps the blocks a DAG."""
    if slices == 1:
        return np.zeros(graph.n_ops, np.int64)
    fastest = np.where(allowed_devices(graph, cluster)[graph.group], op_seconds, np.inf).min(axis=1)
    fastest = np.where(np.isfinite(fastest), fastest, 0.0)
    head, _ = heads_and_tails(graph, fastest)
    span = float((head + fastest).max(initial=0.0))
    if span <= 0:
        return np.zeros(graph.n_ops, np.int64)
    return np.minimum(np.floor(head / span * slices), slices - 1).astype(np.int64)


def blocks(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, slices: int = 1) -> Blocks:
    """The blocks of ``graph`` on ``cluster`` with ``op_seconds`` [n_ops, n_devices] (the simulator's): each
    group's ops at one level, cut into up to ``slices`` parts by when they can first start (more slices: smaller
    blocks, which can overlap across devices as the simulator's ops do, and a larger model)."""
    op_seconds = np.asarray(op_seconds, np.float64)
    if op_seconds.shape != (graph.n_ops, cluster.n_devices):
        raise ValueError(f"op_seconds has shape {op_seconds.shape}; expected (n_ops, n_devices) = "
                         f"({graph.n_ops}, {cluster.n_devices})")
    slices = check_number(slices, "slices", 1, integer=True, error=bad_argument, rule="an integer >= 1")
    keys = np.stack([levels(graph), graph.group.astype(np.int64), _slice_of(graph, cluster, op_seconds, slices)],
                    axis=1)
    # sorted by level, then group, then slice: every edge between blocks rises in level, or stays in its group and
    # level and does not fall in slice, so this is a topological order
    unique, of_op = np.unique(keys, axis=0, return_inverse=True)
    of_op = of_op.reshape(-1)
    n_blocks = len(unique)
    work = np.zeros((n_blocks, cluster.n_devices))
    np.add.at(work, of_op, op_seconds)
    seconds = work.copy()
    share, rate = device_rates(cluster)
    src, dst = graph.edge_src.astype(np.int64), graph.edge_dst.astype(np.int64)
    for d in np.flatnonzero(np.asarray(cluster.concurrency) > 1).tolist():
        seconds[:, d] = np.maximum(_longest_inside(of_op, src, dst, op_seconds[:, d] / share[d], n_blocks),
                                   work[:, d] / rate[d])
    between = of_op[src] != of_op[dst]
    pair = np.stack([of_op[src[between]], of_op[dst[between]]], axis=1)
    pairs, edge_of = np.unique(pair, axis=0, return_inverse=True)
    edge_of = edge_of.reshape(-1)
    # the tensors each pair moves, each counted once (TF sends a tensor once per destination device)
    output = graph.edge_src_output[between]
    data = output >= 0
    _, first = np.unique(np.stack([edge_of[data], src[between][data], output[data]], axis=1), axis=0,
                         return_index=True)
    n_bytes = np.zeros(len(pairs))
    np.add.at(n_bytes, edge_of[data][first], graph.edge_bytes[between][data][first])
    moves_data = np.zeros(len(pairs), bool)
    moves_data[edge_of[data]] = True
    cross = unique[pairs[:, 0], 1] != unique[pairs[:, 1], 1]
    lag = np.zeros((len(pairs), cluster.n_devices, cluster.n_devices))
    lag[cross] = transfer_seconds(cluster, n_bytes[cross], moves_data[cross])
    return Blocks(of_op=of_op, group=unique[:, 1].copy(), seconds=seconds, work=work, edges=pairs.astype(np.int64), lag_s=lag)


def block_schedule(graph: OpGraph, cluster: Cluster, found: Blocks, placement: np.ndarray
                   ) -> tuple[np.ndarray, float]:
    """The blocks' starts in seconds and the makespan of ``placement`` when each block starts as soon as its inputs
    have arrived and its device has no other block running, in block order: a schedule the block model admits."""
    device = np.asarray(placement, np.int64)[found.group]
    k = np.arange(len(found.edges))
    lag = found.lag_s[k, device[found.edges[:, 0]], device[found.edges[:, 1]]]
    return list_schedule(found.seconds[np.arange(found.n_blocks), device], device, np.ones(cluster.n_devices, np.int64),
                         found.edges[:, 0], found.edges[:, 1], lag)


def block_model(graph: OpGraph, cluster: Cluster, found: Blocks, horizon_s: float) -> RelaxedModel:
    """The block model in the solver's form (:class:`~.relaxation.RelaxedModel`, every block an op), in ticks of
    ``horizon_s / TICKS_PER_HORIZON`` (``horizon_s``: a makespan the model's optimum does not exceed). A device of
    one lane runs one block at a time; on a device of several lanes a block holds, for its whole duration, the
    share of the device that its work at the device's throughput takes of it (``SHARE_SCALE`` the whole device,
    ``relaxation.device_rates``), and the blocks running at once hold at most all of it."""
    if not (np.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s = {horizon_s!r}; expected a step time > 0 in seconds")
    tick = horizon_s / TICKS_PER_HORIZON
    _, rate = device_rates(cluster)
    shared = np.asarray(cluster.concurrency) > 1
    duration = ticks(found.seconds, tick)
    with np.errstate(divide="ignore", invalid="ignore"):
        held = np.ceil(SHARE_SCALE * found.work / rate[None, :] / found.seconds)
    demand = np.where(shared[None, :], np.clip(np.nan_to_num(held, nan=1.0), 1, SHARE_SCALE), 1).astype(np.int64)
    cross = np.flatnonzero(found.group[found.edges[:, 0]] != found.group[found.edges[:, 1]])
    return RelaxedModel(
        tick_s=tick, n_groups=graph.n_groups, group=found.group, allowed=allowed_devices(graph, cluster),
        duration=duration, work=ticks(found.work, tick), throughput=np.ceil(rate * SHARE_SCALE).astype(np.int64),
        lanes=np.where(shared, SHARE_SCALE, 1).astype(np.int64), demand=demand, edges=found.edges, cross=cross,
        lag=ticks(found.lag_s[cross], tick), persistent=graph.group_persistent_bytes.astype(np.int64),
        capacity=cluster.memory_bytes.astype(np.int64))
