"""Measured runtime: run a placed training step for real on TF workers and time it.

``LocalWorkers(n)`` owns one driver process (``python -m placement_env.runtime.local_driver``)
started inside a private network namespace (``unshare --net --map-root-user``), which starts
N ``tf.distribute.Server`` workers on its loopback. TF's gRPC servers listen on 0.0.0.0 without
authentication and run any graph sent to them; in the private namespace nothing outside the
driver can reach them. ``MeasuredRuntime(cluster).measure(graph, placement)`` sends the GraphDef
with every op pinned to its device, runs ``steps`` steps and returns the median of the steps
after ``warmup`` as ``Measurement.runtime_s`` (protocol of HDP: 10 steps, drop 5, median of 5).

For a cluster from ``cluster_from_spec`` (``cluster.remote_target``), ``RemoteDriver`` runs the
same driver program without a namespace and without workers: it connects to the user's running
TF servers (whose exposure is the user's own setup) and measures there with the same protocol.

A worker that dies or a driver that does not answer in time gives a failed Measurement
("crash" / "timeout"); the driver's whole process group is killed and the next measurement
starts a fresh one.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import ClusterConfigError, DriverError, IsolationError
from ..opgraph import OpGraph
from .local_driver import _HEADER, encode
from ..placement import Measurement, check_placement, op_devices

START_TIMEOUT_S = 120.0  # driver + workers importing TF on a loaded 2-core machine
TIMEOUT_MARGIN_S = 30.0  # parent-side allowance over a measurement's own timeout


class _DriverDied(Exception):
    def __init__(self, message: str, failure: str = "crash") -> None:
        super().__init__(message)
        self.failure = failure


_LIVE: "weakref.WeakSet[DriverProcess]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for workers in list(_LIVE):
        workers.close()


def _unshare_command() -> list[str] | None:
    """The prefix that runs a command in a private network namespace, or None if not allowed here."""
    tool = shutil.which("unshare")
    if tool is None:
        return None
    prefix = [tool, "--net", "--map-root-user", "--"]
    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix if probe.returncode == 0 else None


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


class DriverProcess:
    """One ``local_driver`` process and its request protocol; a context manager.

    Subclasses say how to run it: :class:`LocalWorkers` (N workers of its own, in a private network
    namespace) and :class:`RemoteDriver` (no workers; the user's running TF cluster).
    """

    _prefix: list[str] = []  # command prefix (unshare ...); empty: run in this network namespace
    isolated = False  # the driver runs in a private network namespace

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._buffer = b""
        self._lock = threading.Lock()
        self.hello: dict[str, Any] = {}
        self.starts = 0
        self.last_start_s = float("nan")
        _LIVE.add(self)

    def _driver_args(self) -> list[str]:
        """Arguments of ``python -m placement_env.runtime.local_driver``."""
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> "DriverProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id (and process group id) of the current driver."""
        return self._proc.pid if self._proc is not None else None

    @property
    def ports(self) -> list[int]:
        return list(self.hello.get("ports", []))

    @property
    def worker_pids(self) -> list[int]:
        return list(self.hello.get("worker_pids", []))

    def start(self) -> None:
        """Start the driver and its workers unless running; waits for its hello."""
        with self._lock:
            if self.running:
                return
            self._kill()
            begin = time.perf_counter()
            self._log = tempfile.TemporaryFile()
            env = dict(os.environ)
            env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
            command = [*self._prefix, sys.executable, "-m", "placement_env.runtime.local_driver",
                       *self._driver_args()]
            self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                          env=env, start_new_session=True, bufsize=0)
            self._buffer = b""
            try:
                header, _ = self._read(time.monotonic() + START_TIMEOUT_S)
            except _DriverDied as error:
                self._kill()
                raise DriverError(f"local driver did not start: {error}") from None
            if header.get("kind") != "hello":
                message = header.get("message", header)
                log = self._log_tail()
                self._kill()
                raise DriverError(f"local driver did not start: {message}\n{log}")
            if self.isolated and set(header.get("interfaces", [])) - {"lo"}:
                self._kill()
                raise IsolationError(f"driver namespace has interfaces {header['interfaces']}, expected only lo")
            self.hello = header
            self.starts += 1
            self.last_start_s = time.perf_counter() - begin

    def close(self) -> None:
        """Stop the driver and its workers (gracefully, then by killing the process group)."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                try:
                    self._write(encode({"op": "shutdown"}), time.monotonic() + 5)
                    proc.wait(timeout=10)
                except (_DriverDied, subprocess.TimeoutExpired):
                    pass
            self._kill()

    def _kill(self) -> None:
        """SIGKILL the driver's process group (driver and workers) and reap the driver."""
        proc, self._proc = self._proc, None
        pids = self.worker_pids
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for pid in pids:  # in case a worker left the group
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            # workers are reaped by init once the driver is gone; wait briefly so callers see them gone
            end = time.monotonic() + 5
            while any(_alive(pid) for pid in pids) and time.monotonic() < end:
                time.sleep(0.02)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.hello = {}

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:  # noqa: BLE001
            pass

    # -- protocol -------------------------------------------------------------------------------

    def _log_tail(self, n: int = 2000) -> str:
        if self._log is None:
            return ""
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - n))
            return self._log.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def _write(self, data: bytes, deadline: float) -> None:
        """Write ``data`` to the driver's stdin without blocking past ``deadline`` (a stopped driver
        does not drain its pipe)."""
        fd = self._proc.stdin.fileno()
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _DriverDied("driver did not take the request in time", failure="timeout")
            _, ready, _ = select.select([], [fd], [], min(left, 0.2))
            if ready:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue
                except OSError as error:  # EPIPE: the driver is gone
                    raise _DriverDied(f"driver is gone ({error})") from None
            elif self._proc.poll() is not None:
                raise _DriverDied(f"driver exited (status {self._proc.returncode})")

    def _fill(self, n: int, deadline: float) -> None:
        proc = self._proc
        fd = proc.stdout.fileno()
        while len(self._buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _DriverDied("driver did not answer in time", failure="timeout")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = proc.wait(timeout=5) if proc.poll() is None else proc.returncode
                    raise _DriverDied(f"driver exited (status {code})")
                self._buffer += chunk
            elif proc.poll() is not None:
                raise _DriverDied(f"driver exited (status {proc.returncode})")
            else:
                dead = [pid for pid in self.worker_pids if not _alive(pid)]
                if dead:
                    raise _DriverDied(f"worker process(es) {dead} died")

    def _read(self, deadline: float) -> tuple[dict, bytes]:
        self._fill(_HEADER.size, deadline)
        (length,) = _HEADER.unpack(self._buffer[:_HEADER.size])
        self._fill(_HEADER.size + length, deadline)
        header = json.loads(self._buffer[_HEADER.size:_HEADER.size + length])
        total = _HEADER.size + length + int(header.get("payload_len", 0))
        self._fill(total, deadline)
        payload = self._buffer[_HEADER.size + length:total]
        self._buffer = self._buffer[total:]
        return header, payload

    def request(self, header: dict, payload: bytes = b"", *, timeout_s: float) -> dict:
        """Send one request and wait for its answer; a crash or timeout raises _DriverDied after killing."""
        self.start()
        with self._lock:
            try:
                deadline = time.monotonic() + timeout_s
                self._write(encode(header, payload), deadline)
                answer, _ = self._read(deadline)
                if answer.get("kind") == "crash":
                    raise _DriverDied(answer.get("message", "a worker died"))
                return answer
            except _DriverDied:
                self._kill()
                raise

    def measure(self, graph_def: bytes, devices: dict[str, str], *, train_op: str, init_op: str = "",
                feeds: Any = (), steps: int = 10, timeout_s: float = 600.0,
                margin_s: float = TIMEOUT_MARGIN_S, trace: bool = False, trace_steps: int = 0) -> dict:
        """Raw measurement: the driver's answer dict (``ok``, ``step_times_s`` or ``failure``/``message``).

        ``trace_steps`` > 0 runs that many more, untimed steps with a full trace and adds
        ``op_profile`` (``{node: {"device", "seconds": [per traced step]}}``) to the answer.
        """
        header = {"op": "measure", "devices": devices, "train_op": train_op, "init_op": init_op,
                  "feeds": list(feeds), "steps": int(steps), "timeout_s": float(timeout_s), "trace": bool(trace),
                  "trace_steps": int(trace_steps)}
        was_running = self.running
        if self._proc is not None and not was_running:
            self._kill()  # died while idle: start afresh, it is not this placement's fault
        try:
            return self.request(header, graph_def, timeout_s=timeout_s + margin_s)
        except _DriverDied as error:
            what = "killed the driver and its workers" if error.failure == "timeout" else "restarting on next use"
            message = f"{error}; {what}"
            if error.failure == "timeout":
                message = f"no answer within {timeout_s} s + {margin_s} s margin; {what}"
            return {"ok": False, "failure": error.failure, "message": message}


class LocalWorkers(DriverProcess):
    """N local TF worker processes behind one driver process; a context manager.

    ``isolate=True`` (default) runs them in a private network namespace and raises IsolationError
    where the OS does not allow one, unless ``allow_exposed_workers=True``: then the workers run in
    the host namespace, where their unauthenticated gRPC ports are open to the network (warned).
    """

    def __init__(self, n: int, *, threads: int = 1, isolate: bool = True, allow_exposed_workers: bool = False) -> None:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n = {n!r}: must be a positive number of workers")
        self.n, self.threads = n, int(threads)
        self.allow_exposed_workers = allow_exposed_workers
        self._prefix: list[str] = []
        self.isolated = False
        if isolate:
            prefix = _unshare_command()
            if prefix is not None:
                self._prefix, self.isolated = prefix, True
            elif not allow_exposed_workers:
                raise IsolationError(
                    "cannot create a private network namespace (`unshare --net --map-root-user` is missing or not "
                    "permitted here); TF worker servers listen on 0.0.0.0 with no authentication and run any graph "
                    "sent to them. Enable unprivileged user namespaces, or pass allow_exposed_workers=True to run "
                    "them exposed on this machine's network anyway.")
        elif not allow_exposed_workers:
            raise IsolationError("isolate=False exposes the TF workers to the network; "
                                 "pass allow_exposed_workers=True as well to confirm")
        if not self.isolated:
            warnings.warn(
                "placement_env: local TF workers run WITHOUT network isolation: their gRPC ports accept "
                "unauthenticated graphs from any host that can reach this machine", RuntimeWarning, stacklevel=2)
        super().__init__()

    def _driver_args(self) -> list[str]:
        return ["--workers", str(self.n), "--threads", str(self.threads), *(["--isolated"] if self.isolated else [])]

    @property
    def target(self) -> str:
        """gRPC target of worker 0, valid inside the driver's namespace only when isolated."""
        return f"grpc://127.0.0.1:{self.ports[0]}"


class RemoteDriver(DriverProcess):
    """A driver with no workers of its own that measures on the running TF cluster at ``target``.

    It runs in this process's network namespace: it only connects out and listens on nothing; the
    servers, and who can reach them, are the user's.
    """

    def __init__(self, target: str) -> None:
        if not isinstance(target, str) or not target.startswith("grpc://") or len(target) <= 7:
            raise ValueError(f"target = {target!r}: must be a gRPC target grpc://host:port")
        self.remote_target = target
        super().__init__()

    def _driver_args(self) -> list[str]:
        return ["--target", self.remote_target]

    @property
    def target(self) -> str:
        return self.remote_target


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
        seconds = np.zeros(graph.n_ops)
        traced = np.zeros(graph.n_ops, dtype=bool)
        device = np.full(graph.n_ops, "", dtype=object)
        untracked: dict[str, float] = {}
        index = graph.index_by_name
        for name, entry in answer.get("op_profile", {}).items():
            median = float(np.median(entry["seconds"]))
            i = index.get(name)
            if i is None:
                untracked[name] = median
                continue
            seconds[i], traced[i], device[i] = median, True, entry["device"]
        m.extra.update({"trace_devices": answer.get("trace_devices", {}),
                        "traced_step_times_s": [float(t) for t in answer.get("traced_step_times_s", [])],
                        "op_seconds": seconds, "op_traced": traced, "op_device": device, "untracked_nodes": untracked})
        return m

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()

    def __enter__(self) -> "MeasuredRuntime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
