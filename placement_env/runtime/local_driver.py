"""Driver program of the measured runtime: N local TF workers plus a request loop.

Run by :class:`placement_env.runtime.driver.LocalWorkers` as::

    unshare --net --mount --pid --kill-child --map-root-user -- python -m placement_env.runtime.local_driver --workers N --isolated

Inside the private namespaces the driver brings ``lo`` up, pivots into a private root
(:mod:`.private_root`: the host's files out of reach, a private tmpfs the only writable place),
starts N ``tf.distribute.Server`` worker processes (its children, so they share all of it) on
127.0.0.1 ports, and then serves requests from its parent over stdin/stdout.

With ``--target grpc://host:port`` (run by :class:`placement_env.runtime.driver.RemoteDriver`,
in the caller's own network namespace) it starts no workers: it runs every measurement on the
user's already running TF cluster behind that master, with the same protocol.

Messages, both directions, are framed by :mod:`placement_env.runtime.protocol` (a JSON header
and raw payload bytes). The driver's first message is a hello
``{"kind": "hello", "ports": [...], "worker_pids": [...], "interfaces": [...], "isolated": bool,
"filesystem": {...}, "target": "grpc://..."}`` (no ports or worker pids with ``--target``; worker pids
are those of the driver's pid namespace; ``filesystem`` is :func:`~.private_root.describe_root`).
A driver that cannot isolate its workers answers ``{"kind": "fatal", "isolation": true, "message"}``.

Requests: ``{"op": "measure", "devices": {op_name: tf_device}, "train_op", "init_op", "feeds",
"steps", "timeout_s", "trace", "trace_steps"}`` + GraphDef bytes -> ``{"kind": "result", "ok": true,
"step_times_s": [...], "setup_s", "init_s", "trace_devices"}`` (with ``trace_steps`` > 0 also
``"op_profile": {node: {"device", "seconds": [one per traced step]}}`` and ``"traced_step_times_s"``) or
``{"kind": "result", "ok": false, "failure": kind, "message": text}``; the answer comes within
``timeout_s`` even when TF is stuck (``failure: "timeout"``, naming what it was doing);
``{"op": "shutdown"}`` -> the driver kills its workers and exits. If a worker dies, the driver
writes ``{"kind": "crash", "message": ...}`` and exits at once.

stdout carries only the protocol (fd 1 is redirected to stderr at start, so TF's own printing
cannot corrupt it).
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from . import private_root
from .protocol import encode, read_message


# ---------------------------------------------------------------------------------------------
# Process hygiene


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (thread) exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def bring_loopback_up() -> None:
    """``ip link set lo up`` through ioctl, so the driver does not depend on iproute2."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, ifreq))[1]
        if not flags & iff_up:
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


# ---------------------------------------------------------------------------------------------
# Worker process


def import_tensorflow() -> Any:
    """TensorFlow, imported without Keras.

    ``import tensorflow`` also imports Keras when it is installed, which slows every worker start (docs/findings.md);
    the driver and its workers run GraphDefs and never use it, so Keras is marked unimportable in this process
    first, which TF's import tolerates.
    """
    sys.modules.setdefault("keras", None)  # type: ignore[arg-type]
    import tensorflow as tf

    return tf


def worker_main(index: int, ports: list[int], threads: int) -> None:
    _die_with_parent()
    tf = import_tensorflow()

    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in ports]})
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    server = tf.distribute.Server(spec, job_name="worker", task_index=index, config=config, start=True)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    server.join()


# ---------------------------------------------------------------------------------------------
# Driver


class Driver:
    def __init__(self, n: int, threads: int, isolated: bool, target: str = "") -> None:
        self.n, self.threads, self.isolated = n, threads, isolated
        self.ports: list[int] = []
        self.target = target  # the session master: an external one, or worker 0 once started
        self.out_lock = threading.Lock()
        self.workers: list[subprocess.Popen] = []
        self.stopping = False
        # fd 1 and 0 become private: the protocol gets its own descriptors
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        self.inp = os.fdopen(os.dup(0), "rb", buffering=0)
        os.dup2(2, 1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)

    def send(self, header: dict, payload: bytes = b"") -> None:
        with self.out_lock:
            self.out.write(encode(header, payload))

    def start_workers(self) -> None:
        if self.n == 0:
            return
        self.ports = free_ports(self.n)
        self.target = f"grpc://127.0.0.1:{self.ports[0]}"
        for i in range(self.n):
            self.workers.append(subprocess.Popen(
                [sys.executable, "-m", "placement_env.runtime.local_driver", "--worker-index", str(i),
                 "--ports", ",".join(map(str, self.ports)), "--threads", str(self.threads)],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL))

    def wait_ready(self) -> None:
        for i, proc in enumerate(self.workers):
            line = proc.stdout.readline()
            if line.strip() != b"READY":
                raise RuntimeError(f"worker {i} did not start (exit status {proc.poll()})")

    def monitor(self) -> None:
        """Exit (killing the workers) when a worker dies, saying so, or when the parent is gone: its end
        of the request pipe hangs up (the driver's parent id says nothing inside a pid namespace)."""
        hangup = select.poll()
        hangup.register(self.inp.fileno(), select.POLLHUP)
        while not self.stopping:
            for i, proc in enumerate(self.workers):
                code = proc.poll()
                if code is not None and not self.stopping:
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    try:
                        self.send({"kind": "crash", "message": f"worker {i} (pid {proc.pid}) died ({how})"})
                    finally:
                        self.kill_workers()
                        os._exit(3)
            if hangup.poll(0):  # the parent is gone: nobody will read results
                self.kill_workers()
                os._exit(4)
            time.sleep(0.05)

    def kill_workers(self) -> None:
        self.stopping = True
        for proc in self.workers:
            if proc.poll() is None:
                proc.kill()
        for proc in self.workers:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def serve(self) -> None:
        while True:
            try:
                header, payload = read_message(self.inp)
            except EOFError:
                return
            op = header.get("op")
            if op == "shutdown":
                return
            if op == "ping":
                self.send({"kind": "pong"})
            elif op == "measure":
                self.send(dict(kind="result", **measure_within_deadline(self, header, payload)))
            else:
                self.send({"kind": "result", "ok": False, "failure": "error", "message": f"unknown op {op!r}"})


def _failure(error: BaseException) -> tuple[str, str]:
    """Failure kind of a TF error, following the Measurement kinds."""
    import tensorflow as tf

    text = f"{type(error).__name__}: {error}".strip()
    if len(text) > 4000:
        text = text[:4000] + " ..."
    errors = tf.errors
    if isinstance(error, errors.ResourceExhaustedError):
        return "oom", text
    if isinstance(error, errors.DeadlineExceededError):
        return "timeout", text
    if isinstance(error, errors.InvalidArgumentError):
        lowered = text.lower()
        if "kernel" in lowered or "device" in lowered:
            return "no_kernel", text
        return "error", text
    if isinstance(error, errors.UnavailableError):
        return "crash", text
    return "error", text


def _node_seconds(step_stats) -> dict[str, tuple[str, float]]:
    """``{node name: (device, seconds)}`` of one traced step: each node's own execution time.

    A node's time is ``op_end_rel`` - ``op_start_rel`` (its kernel's Compute; nanoseconds where TF
    fills them, else microseconds). Names are the GraphDef node names (a ``name:OpType`` label is
    ``timeline_label``, not ``node_name``); a suffix after ``:`` is dropped all the same. Entries of one
    node on several devices or more than once (``_SOURCE``, async kernels) add up.
    """
    out: dict[str, tuple[str, float]] = {}
    for stats in step_stats.dev_stats:
        for node in stats.node_stats:
            if node.op_end_rel_nanos or node.op_start_rel_nanos:
                seconds = (node.op_end_rel_nanos - node.op_start_rel_nanos) * 1e-9
            else:
                seconds = (node.op_end_rel_micros - node.op_start_rel_micros) * 1e-6
            name = node.node_name.split(":")[0]
            previous = out.get(name)
            out[name] = (stats.device, max(seconds, 0.0) + (previous[1] if previous else 0.0))
    return out


def _placed_graph(payload: bytes, devices: dict[str, str]) -> Any:
    """The tf.Graph of the GraphDef ``payload`` with every node pinned to ``devices[name]`` ("" if absent)."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef.FromString(payload)
    for node in graph_def.node:
        node.device = devices.get(node.name, "")
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    return graph


def _feed_dict(graph: Any, feeds: list[dict]) -> dict:
    """Random values (seeded) for the placeholders ``feeds`` (``name``, ``shape``, ``dtype``) of ``graph``;
    unknown dimensions become 1."""
    import numpy as np
    import tensorflow as tf

    feed_dict = {}
    rng = np.random.default_rng(0)
    for feed in feeds:
        tensor = graph.get_tensor_by_name(feed["name"] if ":" in feed["name"] else feed["name"] + ":0")
        shape = [d if d and d > 0 else 1 for d in feed.get("shape") or []]
        dtype = tf.dtypes.as_dtype(feed.get("dtype", tensor.dtype.name))
        if dtype.is_integer:
            value = rng.integers(0, 2, size=shape).astype(dtype.as_numpy_dtype)
        elif dtype.is_bool:
            value = rng.integers(0, 2, size=shape).astype(bool)
        else:
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        feed_dict[tensor] = value
    return feed_dict


def _traced_steps(sess: Any, header: dict, feed_dict: dict, options: Callable[[], Any], progress: dict) -> dict:
    """Run the extra, untimed steps with a full trace that ``header`` asks for (``trace``: one,
    ``trace_steps``: that many); the answer's trace fields."""
    import tensorflow as tf

    traced: dict[str, int] = {}
    profile: dict[str, list] = {}
    n_traced = max(int(header.get("trace_steps", 0)), 1 if header.get("trace") else 0)
    traced_times = []
    for step in range(n_traced):
        progress["phase"] = f"running traced step {step + 1} of {n_traced}"
        run_options = options()
        run_options.trace_level = tf.compat.v1.RunOptions.FULL_TRACE
        metadata = tf.compat.v1.RunMetadata()
        t0 = time.perf_counter()
        sess.run(header["train_op"], feed_dict=feed_dict, options=run_options, run_metadata=metadata)
        traced_times.append(time.perf_counter() - t0)
        if step == 0:  # which device ran how many nodes
            for stats in metadata.step_stats.dev_stats:
                traced[stats.device] = traced.get(stats.device, 0) + len(stats.node_stats)
        if header.get("trace_steps"):
            for name, (device, seconds) in _node_seconds(metadata.step_stats).items():
                entry = profile.setdefault(name, [device, [0.0] * n_traced])
                entry[1][step] = seconds
    result: dict[str, Any] = {"trace_devices": traced}
    if header.get("trace_steps"):
        result["op_profile"] = {name: {"device": device, "seconds": seconds}
                                for name, (device, seconds) in profile.items()}
        result["traced_step_times_s"] = traced_times
    return result


WATCHDOG_GRACE_S = 0.5  # past the timeout, the watchdog answers for a measurement stuck inside TF


def measure_within_deadline(driver: Driver, header: dict, payload: bytes) -> dict:
    """:func:`measure` in a thread, answered by ``timeout_s`` (+ :data:`WATCHDOG_GRACE_S`) even if it is
    stuck where TF's own deadlines do not reach (importing a big graph, creating or closing a session
    with a stopped server): then ``{"ok": False, "failure": "timeout"}`` names the phase it was in, and
    the parent replaces this driver."""
    progress = {"phase": "starting"}
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(measure(driver, header, payload, progress)), daemon=True)
    thread.start()
    thread.join(float(header["timeout_s"]) + WATCHDOG_GRACE_S)
    if thread.is_alive():
        return {"ok": False, "failure": "timeout",
                "message": f"the measurement did not end within {float(header['timeout_s']):g} s: it was still "
                           f"{progress['phase']}"}
    return result


def measure(driver: Driver, header: dict, payload: bytes, progress: dict) -> dict:
    """Answer of one ``measure`` request: import the placed graph, run ``init_op`` and ``steps``
    timed steps of ``train_op`` on ``driver.target``, then the traced steps; a TF error or a bad
    graph gives ``{"ok": False, "failure", "message"}``. ``progress["phase"]`` says what it is doing."""
    import tensorflow as tf

    start = time.perf_counter()
    timeout_s = float(header["timeout_s"])
    deadline = start + timeout_s

    def options() -> tf.compat.v1.RunOptions:
        left_ms = int((deadline - time.perf_counter()) * 1000)
        if left_ms <= 0:
            raise tf.errors.DeadlineExceededError(None, None, f"measurement took longer than {timeout_s} s")
        return tf.compat.v1.RunOptions(timeout_in_ms=left_ms)

    try:
        progress["phase"] = "importing the graph"
        graph = _placed_graph(payload, header["devices"])
        with graph.as_default():
            feed_dict = _feed_dict(graph, header.get("feeds", []))
        config = tf.compat.v1.ConfigProto(
            allow_soft_placement=False,
            operation_timeout_in_ms=max(1, int(timeout_s * 1000)),
        )
        progress["phase"] = "creating the session"
        with tf.compat.v1.Session(driver.target, graph=graph, config=config) as sess:
            progress["phase"] = "running init_op"
            if header.get("init_op"):
                init_start = time.perf_counter()
                sess.run(header["init_op"], feed_dict=feed_dict, options=options())
                init_s = time.perf_counter() - init_start
            else:
                init_s = 0.0
            setup_s = time.perf_counter() - start
            times = []
            for step in range(int(header["steps"])):
                progress["phase"] = f"running step {step + 1} of {header['steps']}"
                t0 = time.perf_counter()
                sess.run(header["train_op"], feed_dict=feed_dict, options=options())
                times.append(time.perf_counter() - t0)
            trace = _traced_steps(sess, header, feed_dict, options, progress)
            progress["phase"] = "closing the session"
        return {"ok": True, "step_times_s": times, "setup_s": setup_s, "init_s": init_s, **trace}
    except tf.errors.OpError as error:
        failure, message = _failure(error)
        return {"ok": False, "failure": failure, "message": message}
    except Exception as error:  # noqa: BLE001 - a bad graph must not kill the driver
        return {"ok": False, "failure": "error", "message": f"{type(error).__name__}: {error}"[:4000]}


def driver_main(n: int, threads: int, isolated: bool, target: str = "") -> None:
    driver = Driver(n, threads, isolated, target)
    if isolated:
        try:
            bring_loopback_up()
            private_root.enter_private_root(private_root.needed_paths(private_root.package_root()))
        except OSError as error:
            driver.send({"kind": "fatal", "isolation": True, "message": f"{type(error).__name__}: {error}"})
            return
    try:
        driver.start_workers()  # workers import TF while the driver does
        import_tensorflow()

        driver.wait_ready()
        threading.Thread(target=driver.monitor, daemon=True).start()
        driver.send({
            "kind": "hello",
            "ports": driver.ports,
            "worker_pids": [p.pid for p in driver.workers],
            "interfaces": [name for _, name in socket.if_nameindex()],
            "isolated": isolated,
            "filesystem": private_root.describe_root(),
            "target": driver.target,
            "pid": os.getpid(),
        })
        driver.serve()
    except Exception as error:  # noqa: BLE001
        try:
            driver.send({"kind": "fatal", "message": f"{type(error).__name__}: {error}"})
        except OSError:
            pass
    finally:
        driver.kill_workers()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--isolated", action="store_true", help="running in a private network namespace")
    parser.add_argument("--target", default="", help="grpc://host:port of a running TF cluster; start no workers")
    parser.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ports", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_index is not None:
        worker_main(args.worker_index, [int(p) for p in args.ports.split(",")], args.threads)
        return
    if args.target:
        if args.workers:
            parser.error("--target and --workers exclude each other")
        if not args.target.startswith("grpc://"):
            parser.error(f"--target {args.target!r}: must be grpc://host:port")
    elif args.workers < 1:
        parser.error("--workers N (N >= 1) or --target grpc://host:port is required")
    driver_main(args.workers, args.threads, args.isolated, args.target)
    sys.stdout.flush()
    os._exit(0)  # skip TF's slow teardown


if __name__ == "__main__":
    main()
