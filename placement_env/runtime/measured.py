"""Measured runtime: run a placed training step for real on TF servers and time it.

``MeasuredRuntime(cluster).measure(graph, placement)`` pins every op of the GraphDef to its
device, has a driver process (:mod:`.driver`) run ``steps`` steps and returns the median of the
steps after ``warmup`` as ``Measurement.runtime_s`` (protocol of HDP: 10 steps, drop 5, median of
5); :meth:`MeasuredRuntime.profile` also reads every op's own time from traced steps. For a
``local:N`` cluster the driver starts N local workers in a private network namespace
(:class:`~.driver.LocalWorkers`); for a cluster from ``cluster_from_spec``
(``cluster.remote_target``) it measures on the user's running TF servers
(:class:`~.driver.RemoteDriver`) with the same protocol.

A worker that dies or a driver that does not answer in time gives a failed Measurement
("crash" / "timeout"); the driver's whole process group is killed and the next measurement
starts a fresh one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ClusterConfigError
from ..opgraph import OpGraph
from ..placement import Measurement, check_placement, op_devices
from .driver import TIMEOUT_MARGIN_S, DriverProcess, LocalWorkers, RemoteDriver


def _op_profile_arrays(graph: OpGraph, op_profile: dict[str, dict]) -> dict[str, Any]:
    """Per-op arrays of the driver's ``op_profile`` (``{node: {"device", "seconds": [per traced
    step]}}``): ``op_seconds`` (median seconds), ``op_traced``, ``op_device`` and the
    ``untracked_nodes`` that are not ops of ``graph`` (with their median seconds)."""
    seconds = np.zeros(graph.n_ops)
    traced = np.zeros(graph.n_ops, dtype=bool)
    device = np.full(graph.n_ops, "", dtype=object)
    untracked: dict[str, float] = {}
    index = graph.index_by_name
    for name, entry in op_profile.items():
        median = float(np.median(entry["seconds"]))
        i = index.get(name)
        if i is None:
            untracked[name] = median
            continue
        seconds[i], traced[i], device[i] = median, True, entry["device"]
    return {"op_seconds": seconds, "op_traced": traced, "op_device": device, "untracked_nodes": untracked}


class MeasuredRuntime:
    """Step time of a placement measured on real TF workers (``runtime="measured"``).

    For a ``local:N`` cluster (``cluster.local_workers > 0``) it starts N local workers on first
    use (see :class:`LocalWorkers`); for a cluster from ``cluster_from_spec``
    (``cluster.remote_target``) a driver that measures on those running servers (see
    :class:`RemoteDriver`; ``isolate``/``allow_exposed_workers`` do not apply, no server is
    started). Use it as a context manager or call :meth:`close`.
    """

    def __init__(self, cluster: Cluster, *, steps: int = 10, warmup: int = 5, timeout_s: float = 600.0,
                 isolate: bool = True, allow_exposed_workers: bool = False, margin_s: float = TIMEOUT_MARGIN_S) -> None:
        if not 0 <= warmup < steps:
            raise ValueError(f"warmup = {warmup}, steps = {steps}: need 0 <= warmup < steps")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s = {timeout_s}: must be positive")
        if cluster.local_workers == 0 and not cluster.remote_target:
            raise ClusterConfigError(
                f"cluster {cluster.name!r} has no TF servers to measure on: the measured runtime needs a "
                '"local:N" cluster (N local TF workers) or a running TF cluster from cluster_from_spec '
                "(a remote_target)")
        self.cluster, self.steps, self.warmup, self.timeout_s, self.margin_s = cluster, steps, warmup, timeout_s, margin_s
        self._isolate, self._allow_exposed = isolate, allow_exposed_workers
        self._workers: DriverProcess | None = None

    @property
    def workers(self) -> DriverProcess:
        if self._workers is None:
            if self.cluster.remote_target:
                self._workers = RemoteDriver(self.cluster.remote_target)
            else:
                self._workers = LocalWorkers(self.cluster.local_workers, isolate=self._isolate,
                                             allow_exposed_workers=self._allow_exposed)
        return self._workers

    def _run(self, graph: OpGraph, placement: Any, timeout_s: float | None, **request: Any) -> tuple[Measurement, dict]:
        """Send the placed step to the driver; the Measurement (extra: step times) and the raw answer."""
        checked = check_placement(graph, self.cluster, placement)
        if not graph.graph_def or not graph.train_op:
            raise ValueError(f"graph {graph.name!r} carries no GraphDef / train_op to execute")
        tf_devices = np.array([d.tf_device for d in self.cluster.devices], dtype=object)
        per_op = tf_devices[op_devices(graph, checked)]
        devices = dict(zip(graph.op_names.tolist(), per_op.tolist()))
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        answer = self.workers.measure(graph.graph_def, devices, train_op=graph.train_op, init_op=graph.init_op,
                                      feeds=graph.feeds, steps=self.steps, timeout_s=timeout, margin_s=self.margin_s,
                                      **request)
        if not answer.get("ok"):
            if answer.get("failure") == "timeout" and self._workers is not None:
                self._workers.close()  # workers may still be busy with the cancelled step: start clean
            return Measurement(runtime_s=float("nan"), ok=False, failure=answer.get("failure", "error"),
                               message=answer.get("message", ""), placement=checked, runtime="measured"), answer
        times = [float(t) for t in answer["step_times_s"]]
        return Measurement(
            runtime_s=float(np.median(times[self.warmup:])), ok=True, placement=checked, runtime="measured",
            extra={"step_times_s": times, "timed_step_times_s": times[self.warmup:],
                   "setup_s": float(answer.get("setup_s", 0.0)), "init_s": float(answer.get("init_s", 0.0))}), answer

    def measure(self, graph: OpGraph, placement: Any, *, timeout_s: float | None = None,
                trace: bool = False) -> Measurement:
        """Run ``steps`` steps of ``graph`` placed by ``placement`` (one device per group).

        ``runtime_s`` is the median of the steps after ``warmup``; ``extra`` holds every step time,
        ``setup_s`` (import + session + init) and ``init_s``. ``trace=True`` runs one more, untimed
        step with a full trace and puts ``{tf device: nodes run}`` in ``extra["trace_devices"]``.
        """
        m, answer = self._run(graph, placement, timeout_s, trace=trace)
        if m.ok and trace:
            m.extra["trace_devices"] = answer.get("trace_devices", {})
        return m

    def profile(self, graph: OpGraph, placement: Any, *, trace_steps: int = 5,
                timeout_s: float | None = None) -> Measurement:
        """Measure ``placement`` like :meth:`measure`, then run ``trace_steps`` more steps with
        ``RunOptions(trace_level=FULL_TRACE)`` and read every op's execution time from the step stats.

        On success ``extra`` also holds ``op_seconds`` (float array [n_ops]: the median over the traced
        steps of each op's time; 0 for ops the trace does not list, e.g. pruned ones), ``op_traced``
        (bool [n_ops]: the op is in the trace), ``op_device`` (the TF device that ran each traced op,
        "" if none), ``untracked_nodes`` (nodes in the trace that are not ops of the graph, e.g.
        ``_Send``/``_Recv`` and ``_SOURCE``, with their median seconds) and ``traced_step_times_s``
        (wall times of the traced steps, slower than untraced ones).
        """
        if trace_steps < 1:
            raise ValueError(f"trace_steps = {trace_steps}: must be >= 1")
        m, answer = self._run(graph, placement, timeout_s, trace=True, trace_steps=int(trace_steps))
        if not m.ok:
            return m
        m.extra.update({"trace_devices": answer.get("trace_devices", {}),
                        "traced_step_times_s": [float(t) for t in answer.get("traced_step_times_s", [])],
                        **_op_profile_arrays(graph, answer.get("op_profile", {}))})
        return m

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()

    def __enter__(self) -> "MeasuredRuntime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
