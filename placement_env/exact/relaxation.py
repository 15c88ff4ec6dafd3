"""The simulator's semantics relaxed into integer data an exact solver can take (:class:`RelaxedModel`).

A placement's simulated step (:mod:`placement_env.runtime.simulated`) is one schedule that obeys every rule below;
the relaxed model keeps only rules of that kind, each in a form the simulated step never breaks, so the fastest
schedule of the relaxed model, over every placement, is never slower than the fastest successful (not out of
memory, every kernel available) simulated placement. That makes a solver's proven bound on it a lower bound on the
simulator's step time (``docs/optimality.md`` derives each rule). Times are integer ticks, every duration and lag
rounded down.

Kept, as a relaxation:

* each group on one device that has kernels for all of its ops;
* an op lasts at least its ``op_seconds`` on its device, on a device of several lanes ``op_seconds / min(1,
  op_share)`` (processor sharing never runs an op faster than its share of the device);
* a device of one lane (a GPU) runs one op at a time; a device of ``concurrency`` lanes at most that many, and its
  ops' whole-device work is at most ``min(1, concurrency * op_share)`` of the step (the throughput it shares out);
* an op starts after each input has arrived: a same-device input when its producer ends; a data input from another
  device ``transfer_overhead_s`` + the slowest link of the route (its latency + bytes / bandwidth) after, plus the
  send and receive tasks of a host transfer; a control input ``transfer_overhead_s`` + the pair's latency after;
* the persistent bytes (variables) placed on a device fit its memory.

Relaxed away (the model is never slower than the simulator for them): queueing on links and copy streams, the
host transfers' tasks as work on their devices' lanes, the executor's order among ready ops (the model may order
ops freely), and memory other than the persistent bytes (activations, received copies).

Tightened: nothing. The model's makespan of a placement can be far below the simulator's; its optimum is a bound.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..opgraph import OpGraph
from ..placement import allowed_devices

__all__ = ["RelaxedModel", "device_rates", "list_schedule", "model_schedule", "relax", "ticks", "transfer_seconds"]

TICKS_PER_HORIZON = 1_000_000  # a horizon of H seconds is cut into this many ticks (rounding costs < 1e-6 H per op)
SHARE_SCALE = 1000  # a device's throughput share as an integer over this scale (rounded up: still a relaxation)


@dataclass(frozen=True)
class RelaxedModel:
    """The relaxed placement-and-schedule problem of one graph, cluster and op costs, in integer ticks.

    ``duration[i, d]``: op ``i``'s shortest time on device ``d``; ``work[i, d]``: its whole-device work there;
    ``throughput[d]``: the share of ``SHARE_SCALE`` of a device's work per tick; ``lanes[d]``: its capacity (the
    relaxed model: its concurrency) and ``demand[i, d]``: how much of it op ``i`` holds while it runs there (1 in
    the relaxed model; a device of capacity 1 with every demand 1 runs one op at a time);
    ``edges``: [k, 2] (producer op, consumer op) of every edge; ``cross``: the edges between different groups, with
    ``lag[k, a, b]`` the shortest delay of cross edge ``k`` with its producer on ``a`` and consumer on ``b``
    (0 when ``a == b``). ``persistent[g]``: group ``g``'s persistent bytes; ``capacity[d]``: device memory.
    """

    tick_s: float
    n_groups: int
    group: np.ndarray
    allowed: np.ndarray
    duration: np.ndarray
    work: np.ndarray
    throughput: np.ndarray
    lanes: np.ndarray
    demand: np.ndarray
    edges: np.ndarray
    cross: np.ndarray
    lag: np.ndarray
    persistent: np.ndarray
    capacity: np.ndarray

    @property
    def n_ops(self) -> int:
        return int(self.group.shape[0])

    @property
    def n_devices(self) -> int:
        return int(self.lanes.shape[0])


def device_rates(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """Per device, (the most of its speed one op gets, the most work per second all its ops together get): on a
    device of one lane an op runs alone at full speed (1, 1); on a device of several lanes (processor sharing) an op
    gets at most ``min(1, op_share)`` and all together ``min(1, concurrency * op_share)``."""
    concurrency = np.asarray(cluster.concurrency, np.int64)
    op_share = np.asarray(cluster.op_share, np.float64)
    shared = concurrency > 1
    return (np.where(shared, np.minimum(1.0, op_share), 1.0),
            np.where(shared, np.minimum(1.0, concurrency * op_share), 1.0))


def ticks(seconds: np.ndarray, tick_s: float) -> np.ndarray:
    """``seconds`` in whole ticks, rounded down (a relaxation never lengthens anything)."""
    return np.floor(np.asarray(seconds, np.float64) / tick_s * (1 - 1e-12)).astype(np.int64)


def transfer_seconds(cluster: Cluster, n_bytes: np.ndarray, data: np.ndarray) -> np.ndarray:
    """[k, n_devices, n_devices]: the shortest delay between a producer's end and its consumer's start for ``k``
    edges of ``n_bytes`` each, per (producer device, consumer device): 0 on one device; for a data edge
    (``data``) the fixed overhead, the route's slowest link alone and the host transfer's two tasks; for a control
    edge the fixed overhead and the pair's latency (what the simulator charges either, without any queue)."""
    n = cluster.n_devices
    n_bytes = np.asarray(n_bytes, np.float64)
    routes = cluster.routes
    route = np.zeros((len(n_bytes), n, n))
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            links = routes.resources[routes.pointer[a * n + b]:routes.pointer[a * n + b + 1]]
            for link in links.tolist():
                through = routes.resource_latency[link] + n_bytes / routes.resource_bandwidth[link]
                route[:, a, b] = np.maximum(route[:, a, b], through)
    host = cluster.host_transfer
    tasks = 2 * (host.per_tensor_s + n_bytes / host.bandwidth) if host is not None else np.zeros(len(n_bytes))
    control = np.broadcast_to(np.asarray(cluster.latency, np.float64), route.shape)
    lag = cluster.transfer_overhead_s + np.where(np.asarray(data)[:, None, None], route + tasks[:, None, None], control)
    lag[:, np.arange(n), np.arange(n)] = 0.0
    return lag


def relax(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, horizon_s: float) -> RelaxedModel:
    """The relaxed model of ``graph`` on ``cluster`` with ``op_seconds`` [n_ops, n_devices] (the simulator's), in
    ticks of ``horizon_s / TICKS_PER_HORIZON`` (``horizon_s``: a step time the optimum does not exceed)."""
    op_seconds = np.asarray(op_seconds, np.float64)
    if op_seconds.shape != (graph.n_ops, cluster.n_devices):
        raise ValueError(f"op_seconds has shape {op_seconds.shape}; expected (n_ops, n_devices) = "
                         f"({graph.n_ops}, {cluster.n_devices})")
    if not (np.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s = {horizon_s!r}; expected a step time > 0 in seconds")
    tick = horizon_s / TICKS_PER_HORIZON
    share, rate = device_rates(cluster)
    concurrency = np.asarray(cluster.concurrency, np.int64)
    throughput = np.ceil(rate * SHARE_SCALE)
    src, dst = graph.edge_src.astype(np.int64), graph.edge_dst.astype(np.int64)
    crossing = np.flatnonzero(graph.group[src] != graph.group[dst])
    lag = transfer_seconds(cluster, graph.edge_bytes[crossing], graph.edge_src_output[crossing] >= 0)
    return RelaxedModel(
        tick_s=tick, n_groups=graph.n_groups, group=graph.group.astype(np.int64),
        allowed=allowed_devices(graph, cluster), duration=ticks(op_seconds / share[None, :], tick),
        work=ticks(op_seconds, tick), throughput=throughput.astype(np.int64), lanes=concurrency,
        demand=np.ones((graph.n_ops, cluster.n_devices), np.int64),
        edges=np.stack([src, dst], axis=1), cross=crossing, lag=ticks(lag, tick),
        persistent=graph.group_persistent_bytes.astype(np.int64), capacity=cluster.memory_bytes.astype(np.int64))


def model_schedule(graph: OpGraph, cluster: Cluster, op_seconds: np.ndarray, placement: np.ndarray
                   ) -> tuple[np.ndarray, float]:
    """A schedule of ``placement`` that the relaxed model admits: (each op's start in seconds, the makespan).

    Ops start in index order (a topological order) as soon as their inputs have arrived (with the model's lags)
    and a lane is free; a device of several lanes uses at most as many as its throughput allows at the op's
    share (so its work stays within it). Its makespan bounds the model's optimum from above: the horizon.
    """
    op_seconds = np.asarray(op_seconds, np.float64)
    dev = np.asarray(placement, np.int64)[graph.group]
    share, rate = device_rates(cluster)
    lanes = np.maximum(1, np.minimum(np.asarray(cluster.concurrency, np.int64), np.floor(rate / share + 1e-9)))
    duration = op_seconds[np.arange(graph.n_ops), dev] / share[dev]
    src, dst = graph.edge_src.astype(np.int64), graph.edge_dst.astype(np.int64)
    lag = transfer_seconds(cluster, graph.edge_bytes, graph.edge_src_output >= 0)
    return list_schedule(duration, dev, lanes, src, dst, lag[np.arange(len(src)), dev[src], dev[dst]])


def list_schedule(duration: np.ndarray, device: np.ndarray, lanes: np.ndarray, src: np.ndarray, dst: np.ndarray,
                  edge_lag: np.ndarray) -> tuple[np.ndarray, float]:
    """(each task's start, the makespan) when tasks, in index order (a topological order), start as soon as every
    input has arrived (its producer's end plus the edge's ``edge_lag``) and a lane of their ``device`` is free;
    ``lanes[d]``: how many tasks device ``d`` runs at once."""
    n = len(duration)
    order = np.argsort(dst, kind="stable")
    ptr = np.searchsorted(dst[order], np.arange(n + 1))
    src_sorted, lag_sorted = src[order], np.asarray(edge_lag, np.float64)[order]
    free = [np.zeros(int(k)) for k in lanes]
    start = np.zeros(n)
    end = np.zeros(n)
    for i in range(n):
        lo, hi = ptr[i], ptr[i + 1]
        ready = float(np.max(end[src_sorted[lo:hi]] + lag_sorted[lo:hi])) if hi > lo else 0.0
        lane_free = free[device[i]]
        lane = int(np.argmin(lane_free))
        start[i] = max(ready, lane_free[lane])
        end[i] = lane_free[lane] = start[i] + duration[i]
    return start, float(end.max(initial=0.0))
