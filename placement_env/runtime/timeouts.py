"""How long a measured evaluation may take by default: a multiple of the graph's single-device step.

A fixed default either cuts off big graphs (a 10-step NMT measurement on one CPU core takes many
minutes) or waits far too long on small ones. :func:`default_timeout_s` scales with the graph:
:data:`SETUP_ALLOWANCE_S` for importing it, creating the session and the per-step RPCs, plus
:data:`STEP_FACTOR` times the analytical estimate of every step run op after op on the cluster's
slowest device (:func:`single_device_step_s`).
"""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..opgraph import OpGraph

SETUP_ALLOWANCE_S = 60.0  # import, session and init of a graph on a busy machine, and per-step RPCs
STEP_FACTOR = 10.0  # how much slower than the analytical estimate a real step may run


def single_device_step_s(graph: OpGraph, cluster: Cluster) -> float:
    """Analytical time of one step of ``graph`` run op after op on the cluster's slowest device: its
    FLOPs at the device's achieved rate, its output bytes at the achieved memory bandwidth and the
    device's per-op overhead for every op."""
    flops, moved = float(np.sum(graph.flops)), float(np.sum(graph.output_bytes))
    return max(flops / (d.peak_flops * d.compute_efficiency) + moved / (d.memory_bandwidth * d.memory_efficiency)
               + graph.n_ops * d.op_overhead_s for d in cluster.devices)


def default_timeout_s(graph: OpGraph, cluster: Cluster, runs: int) -> float:
    """The timeout of a measurement that runs ``graph`` ``runs`` times (init, timed and traced steps)."""
    return SETUP_ALLOWANCE_S + STEP_FACTOR * runs * single_device_step_s(graph, cluster)
