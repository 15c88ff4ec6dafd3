"""Measured per-op costs: every op's kernel time from full traces of a real training step.

The measured alternative to :func:`placement_env.costs.analytical_costs`: the same
:class:`~placement_env.costs.OpCosts`, but timed on the real local workers
(``RunOptions(trace_level=FULL_TRACE)``, median over traced steps) instead of derived by grappler.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster import Cluster
from ..costs import OpCosts, op_type_key
from ..opgraph import OpGraph
from ..placement import single_device
from ..runtime.measured import MeasuredRuntime

__all__ = ["measured_costs"]


def measured_costs(graph: OpGraph, cluster: Cluster, *, runtime: Any = None, steps: int = 5,
                   timeout_s: float | None = None) -> OpCosts:
    """Seconds of every op on every device of ``cluster``, measured from full traces of a real step.

    For every distinct device type of the cluster (see :func:`placement_env.costs.op_type_key`) the
    whole graph is placed on that type's first device (every group there; a group without a kernel
    for that kind goes to the first device that has one) and profiled with ``steps`` traced steps
    after the runtime's own timed steps; each op's cost is the median over the traced steps of its
    kernel time (``op_end_rel - op_start_rel`` from ``RunMetadata.step_stats``), copied to every
    device of the type. On a ``local:N`` cluster all workers are identical single-threaded
    processes on one host, so one run with everything on worker 0 fills every column; with
    everything on one worker no ``_Send``/``_Recv`` pairs run, so op times are not inflated by
    transfers and no op waits on the network.

    Ops absent from the trace (pruned from the step, constant-folded by grappler, initialisers)
    cost 0 s and are counted in ``n_unreported`` (the maximum over device types). Trace nodes
    that are not ops of the graph (``_SOURCE``, grappler's folded constants, ``_Send``/``_Recv``)
    are ignored. ``runtime``: a MeasuredRuntime to profile with (default: a new one, closed at
    the end).
    """
    own = runtime is None
    rt = MeasuredRuntime(cluster, steps=4, warmup=2) if own else runtime
    try:
        columns: dict[tuple, np.ndarray] = {}
        unreported = 0
        for d, device in enumerate(cluster.devices):
            key = op_type_key(device)
            if key in columns:
                continue
            placement = single_device(graph, cluster, d)
            m = rt.profile(graph, placement, trace_steps=steps, timeout_s=timeout_s)
            if not m.ok:
                raise RuntimeError(f"profiling {graph.name!r} on {device.name} failed ({m.failure}): {m.message}")
            columns[key] = np.asarray(m.extra["op_seconds"], dtype=np.float64)
            unreported = max(unreported, int(graph.n_ops - np.count_nonzero(m.extra["op_traced"])))
    finally:
        if own:
            rt.close()
    seconds = np.stack([columns[op_type_key(d)] for d in cluster.devices], axis=1)
    return OpCosts(seconds=seconds, source=f"measured on {cluster.name}", n_unreported=unreported)
