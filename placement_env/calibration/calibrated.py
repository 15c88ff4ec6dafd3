"""The calibrated cluster: fitted op-cost scales, per-op overheads and link written into a Cluster.

Device speeds are written as peak FLOP/s and memory bandwidth, so that grappler's analytical op
costs (:func:`~placement_env.costs.analytical_costs`) on the calibrated cluster reproduce the
fitted op costs; the result can be saved as JSON and used like any other cluster.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..cluster import Cluster, HostTransfer
from ..costs import OpCosts, analytical_costs
from ..opgraph import OpGraph
from .fit import FitResult, with_link

__all__ = ["calibrated_cluster", "speed_scale"]


def calibrated_cluster(cluster: Cluster, speed_scale: np.ndarray, bandwidth: float, latency: float,
                       op_overhead_s: np.ndarray | None = None, host_transfer: HostTransfer | None = None) -> Cluster:
    """``cluster`` with device ``d`` ``speed_scale[d]`` times slower (peak FLOP/s and memory bandwidth
    divided by it, which multiplies grappler's analytical op costs by it), ``op_overhead_s[d]`` per op
    (if given), every link set to (bandwidth, latency) and ``host_transfer`` (if given)."""
    devices = []
    for d, (dev, s) in enumerate(zip(cluster.devices, np.asarray(speed_scale, dtype=float))):
        changes: dict[str, Any] = {"peak_flops": float(dev.peak_flops / s), "memory_bandwidth": float(dev.memory_bandwidth / s)}
        if op_overhead_s is not None:
            changes["op_overhead_s"] = float(op_overhead_s[d])
        devices.append(dataclasses.replace(dev, **changes))
    if host_transfer is not None:
        cluster = dataclasses.replace(cluster, host_transfer=host_transfer)
    return with_link(dataclasses.replace(cluster, devices=tuple(devices)), bandwidth, latency)


def speed_scale(graph: OpGraph, cluster: Cluster, base: OpCosts, raw: np.ndarray, fit: FitResult) -> np.ndarray:
    """Per device, how many times slower than analytical costs the fitted op costs are.

    ``raw``: the base op costs without per-op overhead, as fitted. For analytical ``base`` costs
    that is the fitted scale itself; for other costs (measured) it is the ratio of the fitted
    costs' total to grappler's analytical total on that device.
    """
    if base.analytical:
        return fit.scale
    grappler = analytical_costs(graph, cluster).seconds - cluster.op_overhead_s[None, :]
    return np.array([(raw[:, d] * fit.scale[d]).sum() / max(grappler[:, d].sum(), 1e-300)
                     for d in range(cluster.n_devices)])
