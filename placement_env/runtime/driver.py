"""Client of the driver process (:mod:`.local_driver`) that runs measurements on TF servers.

:class:`DriverProcess` starts the driver, speaks its request protocol (framed by :mod:`.protocol`)
with a deadline on every read and write, and kills the driver's whole process group when it
crashes, times out or is closed; the next request starts a fresh one. It refuses graphs with ops
that are not on the allowlist of a training step's ops (:mod:`.allowlist`) before sending them, and tells failures of the
machinery (``"infrastructure"`` in an answer) from failures of the placement. Two kinds of driver:
:class:`LocalWorkers` starts N ``tf.distribute.Server`` workers of its own inside private network,
mount and pid namespaces and a private root (see :mod:`.workers`), and checks the driver's report of
them before it sends anything; :class:`RemoteDriver` starts none and measures on the user's
running TF cluster. Every driver still running when Python exits is closed.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any

from ..errors import DriverError, IsolationError
from .protocol import LENGTH, encode
from .allowlist import refuse_unlisted_ops
from .workers import check_private_root, host_pids, isolation_prefix, kill_process_tree, own_namespace, unresponsive

START_TIMEOUT_S = 120.0  # driver + workers importing TF on a loaded 2-core machine
# How long past a measurement's own timeout the parent waits for the driver's answer: the driver
# enforces the timeout itself, so this only bounds a driver that stopped answering.
TIMEOUT_MARGIN_S = 2.0
DRIVER_MODULE = "placement_env.runtime.local_driver"  # run as ``python -m DRIVER_MODULE``


class _DriverDied(Exception):
    """The driver or a worker died or stopped (``failure="crash"``), or the driver did not answer in
    time (``"timeout"``)."""

    def __init__(self, message: str, failure: str = "crash") -> None:
        super().__init__(message)
        self.failure = failure


_LIVE: "weakref.WeakSet[DriverProcess]" = weakref.WeakSet()  # drivers to close at exit


@atexit.register
def _close_all() -> None:
    for driver in list(_LIVE):
        driver.close()


class DriverProcess:
    """One ``local_driver`` process and its request protocol; a context manager.

    Subclasses say how to run it: :class:`LocalWorkers` (N workers of its own, in private namespaces
    and a private root) and :class:`RemoteDriver` (no workers; the user's running TF cluster).
    """

    _prefix: list[str] = []  # command prefix (unshare ...); empty: run in this process's namespaces
    isolated = False  # the driver runs in private namespaces and a private root

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
        """The host's process id of the current driver (inside private namespaces, the child of the
        ``unshare`` process that leads the group)."""
        if self._proc is None:
            return None
        return int(self.hello.get("driver_pid", self._proc.pid))

    @property
    def process_group(self) -> int | None:
        """Process group id of the current driver, its workers and (when isolated) the ``unshare`` that leads them."""
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
            command = [*self._prefix, sys.executable, "-m", DRIVER_MODULE, *self._driver_args()]
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
                if header.get("isolation"):
                    raise IsolationError(f"local driver could not isolate its workers: {message}")
                raise DriverError(f"local driver did not start: {message}\n{log}")
            if self.isolated:
                self._check_isolation(header)
                inside = [*header.get("worker_pids", []), header.get("pid", 1)]
                *header["worker_pids"], header["driver_pid"] = host_pids(self._proc.pid, inside)
            self.hello = header
            self.starts += 1
            self.last_start_s = time.perf_counter() - begin

    def _check_isolation(self, hello: dict) -> None:
        """IsolationError (after killing the driver) unless its hello shows only loopback and a sealed
        private root in a mount namespace of its own."""
        try:
            if set(hello.get("interfaces", [])) - {"lo"}:
                raise IsolationError(f"driver namespace has interfaces {hello['interfaces']}, expected only lo")
            check_private_root(hello.get("filesystem"), own_namespace())
        except IsolationError:
            self._kill()
            raise

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
        driver = self.pid
        proc, self._proc = self._proc, None
        if proc is not None:
            kill_process_tree(proc, [*self.worker_pids, *([driver] if driver != proc.pid else [])])
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
        """Read from the driver until the buffer holds ``n`` bytes; a dead driver or worker, or
        ``deadline`` passing, raises _DriverDied."""
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
                wrong = unresponsive(self.worker_pids)
                if wrong:
                    raise _DriverDied(f"worker process(es): {', '.join(wrong)}")

    def _read(self, deadline: float) -> tuple[dict, bytes]:
        """The driver's next message (header, payload), read by ``deadline``."""
        self._fill(LENGTH.size, deadline)
        (length,) = LENGTH.unpack(self._buffer[:LENGTH.size])
        self._fill(LENGTH.size + length, deadline)
        header = json.loads(self._buffer[LENGTH.size:LENGTH.size + length])
        total = LENGTH.size + length + int(header.get("payload_len", 0))
        self._fill(total, deadline)
        payload = self._buffer[LENGTH.size + length:total]
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
                margin_s: float = TIMEOUT_MARGIN_S, trace: bool = False, trace_steps: int = 0,
                allow_ops: frozenset[str] = frozenset()) -> dict:
        """Raw measurement: the driver's answer dict (``ok``, ``step_times_s`` or ``failure``/``message``).

        ``infrastructure`` is true in the answer when the machinery failed, not the placement: the
        driver did not start, the driver or a worker died or stopped, a server was unreachable, or the
        driver gave no answer within ``timeout_s`` + ``margin_s`` (the driver answers a ``timeout``
        itself at ``timeout_s``). After any timeout or infrastructure failure the driver and its
        workers are killed and the next request starts fresh ones. ``trace_steps`` > 0 runs that many
        more, untimed steps with a full trace and adds ``op_profile`` (``{node: {"device", "seconds":
        [per traced step]}}``) to the answer. A graph with ops that are not on the allowlist (nor in
        ``allow_ops``, op types the caller trusts) raises SideEffectOpError before anything is sent or started.
        """
        refuse_unlisted_ops(graph_def, allow_ops)
        header = {"op": "measure", "devices": devices, "train_op": train_op, "init_op": init_op,
                  "feeds": list(feeds), "steps": int(steps), "timeout_s": float(timeout_s), "trace": bool(trace),
                  "trace_steps": int(trace_steps)}
        if self._proc is not None and not self.running:
            self._kill()  # died while idle: start afresh, it is not this placement's fault
        try:
            answer = self.request(header, graph_def, timeout_s=timeout_s + margin_s)
        except DriverError as error:
            return {"ok": False, "failure": "crash", "infrastructure": True, "message": str(error)}
        except _DriverDied as error:
            message = f"{error}; killed the driver and its workers"
            if error.failure == "timeout":
                message = f"no answer within {timeout_s:g} s + {margin_s:g} s margin; killed the driver and its workers"
            return {"ok": False, "failure": error.failure, "infrastructure": True, "message": message}
        if answer.get("ok") or answer.get("failure") not in ("timeout", "crash"):
            return answer
        wrong = unresponsive(self.worker_pids)  # before the kill: a stopped worker is not the placement's doing
        with self._lock:
            self._kill()  # workers may still be busy with the cancelled step, or unreachable: start clean
        if wrong:
            answer["message"] = f"{answer.get('message', '')} (worker process(es): {', '.join(wrong)})"
        answer["infrastructure"] = answer["failure"] == "crash" or bool(wrong)
        return answer


class LocalWorkers(DriverProcess):
    """N local TF worker processes behind one driver process; a context manager.

    ``isolate=True`` (default) runs them in private network, mount and pid namespaces, in a private
    root where the host's files are out of reach and only a private tmpfs is writable, and raises
    IsolationError where the OS does not allow that, unless ``allow_exposed_workers=True``: then the
    workers run in the host's namespaces, where their unauthenticated gRPC ports are open to the
    network and the graphs they run see your files (warned).
    """

    def __init__(self, n: int, *, threads: int = 1, isolate: bool = True, allow_exposed_workers: bool = False) -> None:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n = {n!r}: must be a positive number of workers")
        self.n, self.threads = n, int(threads)
        self.allow_exposed_workers = allow_exposed_workers
        self._prefix, self.isolated = isolation_prefix(isolate, allow_exposed_workers)
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
