"""Measured runtime: run a placed training step for real on TF servers and time it.

``MeasuredRuntime(cluster).measure(graph, placement)`` pins every op of the GraphDef to its
device, has a driver process (:mod:`.driver`) run ``steps`` steps and returns the median of the
steps after ``warmup`` as ``Measurement.runtime_s`` (protocol of HDP: 10 steps, drop 5, median of
5); :meth:`MeasuredRuntime.profile` also reads every op's own time from traced steps. For a
``local:N`` cluster the driver starts N local workers in a private network namespace
(:class:`~.driver.LocalWorkers`); for a cluster from ``cluster_from_spec``
(``cluster.remote_target``) it measures on the user's running TF servers
(:class:`~.driver.RemoteDriver`) with the same protocol.

Failures of the machinery -- a worker that dies or stops, a server that cannot be reached, a
driver that does not start or does not answer -- are retried on fresh workers up to ``retries``
times, then give ``failure="infrastructure"``, which says nothing about the placement (the env and
``Problem`` raise InfrastructureError rather than charge it). A measurement that runs past its
timeout gives ``failure="timeout"`` within about a second of it; the default timeout scales with
the graph (:mod:`.timeouts`). Graphs with ops that are not on the allowlist of a training step's
ops are refused before any worker starts (:mod:`.allowlist`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ClusterConfigError
from ..opgraph import OpGraph
from ..placement import INFRASTRUCTURE, Measurement, check_placement, op_devices
from .allowlist import check_allow_ops
from .driver import START_TIMEOUT_S, TIMEOUT_MARGIN_S, DriverProcess, LocalWorkers, RemoteDriver
from .timeouts import default_timeout_s

DEFAULT_RETRIES = 2  # fresh tries after an infrastructure failure, before reporting it


def _seconds(value: Any, *, positive: bool) -> bool:
    """``value`` is a finite number of seconds (> 0 if ``positive``, else >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return False
    return value > 0 if positive else value >= 0


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

    ``timeout_s`` bounds one try at measuring a placement on running workers (import, session,
    init, steps, traces); None: scaled to the graph (:func:`~.timeouts.default_timeout_s`). Starting
    workers has its own limit (``START_TIMEOUT_S``). ``retries``: fresh tries after an
    infrastructure failure. ``margin_s``: how long past the timeout to wait for a driver that
    stopped answering. ``allow_ops``: op type names, beyond the allowlist of a training step's ops
    (:mod:`.allowlist`), that the workers may run for a graph you trust; the workers' private root
    still confines them.
    """

    def __init__(self, cluster: Cluster, *, steps: int = 10, warmup: int = 5, timeout_s: float | None = None,
                 retries: int = DEFAULT_RETRIES, isolate: bool = True, allow_exposed_workers: bool = False,
                 margin_s: float = TIMEOUT_MARGIN_S, allow_ops: Any = ()) -> None:
        if not 0 <= warmup < steps:
            raise ValueError(f"warmup = {warmup}, steps = {steps}: need 0 <= warmup < steps")
        if timeout_s is not None and not _seconds(timeout_s, positive=True):
            raise ValueError(f"timeout_s = {timeout_s!r}: a positive number of seconds, or None (scaled to the graph)")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries = {retries!r}: a whole number >= 0 (fresh tries after an infrastructure failure)")
        if not _seconds(margin_s, positive=False):
            raise ValueError(f"margin_s = {margin_s!r}: a number of seconds >= 0")
        if cluster.local_workers == 0 and not cluster.remote_target:
            raise ClusterConfigError(
                f"cluster {cluster.name!r} has no TF servers to measure on: the measured runtime needs a "
                '"local:N" cluster (N local TF workers) or a running TF cluster from cluster_from_spec '
                "(a remote_target)")
        self.cluster, self.steps, self.warmup, self.timeout_s, self.margin_s = cluster, steps, warmup, timeout_s, margin_s
        self.retries = retries
        self.allow_ops = check_allow_ops(allow_ops)
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

    def timeout_for(self, graph: OpGraph, trace_steps: int = 0) -> float:
        """The timeout of one try at measuring ``graph``: ``timeout_s``, or the graph's default for the
        init, ``steps`` and traced runs."""
        if self.timeout_s is not None:
            return float(self.timeout_s)
        return default_timeout_s(graph, self.cluster, 1 + self.steps + max(int(trace_steps), 1))

    def longest_s(self, graph: OpGraph, trace_steps: int = 0) -> float:
        """The longest one measurement of ``graph`` can take: every try starting workers and running into
        its timeout and the margin."""
        return (1 + self.retries) * (START_TIMEOUT_S + self.timeout_for(graph, trace_steps) + self.margin_s)

    def _tries(self, graph_def: bytes, devices: dict[str, str], request: dict) -> tuple[dict, list[str]]:
        """The driver's answer of the first try that the machinery did not fail (or of the last try),
        and the messages of the infrastructure failures before it."""
        failures: list[str] = []
        while True:
            answer = self.workers.measure(graph_def, devices, margin_s=self.margin_s, allow_ops=self.allow_ops,
                                          **request)
            if not answer.get("infrastructure") or len(failures) == self.retries:
                return answer, failures
            failures.append(answer.get("message", ""))

    def _run(self, graph: OpGraph, placement: Any, timeout_s: float | None, **request: Any) -> tuple[Measurement, dict]:
        """Send the placed step to the driver; the Measurement (extra: step times) and the raw answer."""
        checked = check_placement(graph, self.cluster, placement)
        if not graph.graph_def or not graph.train_op:
            raise ValueError(f"graph {graph.name!r} carries no GraphDef / train_op to execute")
        tf_devices = np.array([d.tf_device for d in self.cluster.devices], dtype=object)
        per_op = tf_devices[op_devices(graph, checked)]
        devices = dict(zip(graph.op_names.tolist(), per_op.tolist()))
        timeout = self.timeout_for(graph, request.get("trace_steps", 0)) if timeout_s is None else float(timeout_s)
        answer, failures = self._tries(graph.graph_def, devices, dict(
            train_op=graph.train_op, init_op=graph.init_op, feeds=graph.feeds, steps=self.steps, timeout_s=timeout,
            **request))
        if answer.get("infrastructure"):
            failures = [*failures, answer.get("message", "")]
            return Measurement(runtime_s=float("nan"), ok=False, failure=INFRASTRUCTURE, placement=checked,
                               message=f"{failures[-1]} (the machinery failed on {len(failures)} tr"
                                       f"{'y' if len(failures) == 1 else 'ies'}; the placement was not measured)",
                               runtime="measured", extra={"timeout_s": timeout, "infrastructure_failures": failures}
                               ), answer
        extra: dict[str, Any] = {"timeout_s": timeout, "infrastructure_failures": failures}
        if not answer.get("ok"):
            return Measurement(runtime_s=float("nan"), ok=False, failure=answer.get("failure", "error"),
                               message=answer.get("message", ""), placement=checked, runtime="measured",
                               extra=extra), answer
        times = [float(t) for t in answer["step_times_s"]]
        return Measurement(
            runtime_s=float(np.median(times[self.warmup:])), ok=True, placement=checked, runtime="measured",
            extra={**extra, "step_times_s": times, "timed_step_times_s": times[self.warmup:],
                   "setup_s": float(answer.get("setup_s", 0.0)), "init_s": float(answer.get("init_s", 0.0))}), answer

    def measure(self, graph: OpGraph, placement: Any, *, timeout_s: float | None = None,
                trace: bool = False) -> Measurement:
        """Run ``steps`` steps of ``graph`` placed by ``placement`` (one device per group).

        ``runtime_s`` is the median of the steps after ``warmup``; ``extra`` holds every step time,
        ``setup_s`` (import + session + init), ``init_s``, the ``timeout_s`` of each try and the
        messages of the ``infrastructure_failures`` (the tries the machinery failed). ``trace=True``
        runs one more, untimed step with a full trace and puts ``{tf device: nodes run}`` in
        ``extra["trace_devices"]``.
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
