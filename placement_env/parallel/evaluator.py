"""``ParallelEvaluator``: the Evaluator interface over a set of worker slots (see the package docstring)."""
from __future__ import annotations

import json
import multiprocessing
import os
import socket
import time
import warnings
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED
from concurrent.futures import wait as wait_futures
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

import numpy as np

from ..benchmarks import load_benchmark
from ..cluster import Cluster, load_cluster
from ..cluster.checks import bad_argument, check_number
from ..errors import RayUnreachableError, WorkerStartError
from ..evaluation import RUNTIMES, Evaluator
from ..placement import Measurement
from .local_ray import start_local_ray
from .slots import ProcessSlot, RaySlot, WorkerDied
from .workers import NODE_KEY, RayWorker

BACKENDS = ("process", "ray")
DEFAULT_TIMEOUT_S = 900.0  # per placement: measured runtime's 600 s + worker start-up + margin
START_TIMEOUT_S = 300.0  # workers importing TF / numba and building their evaluator on a loaded machine
CONNECT_TIMEOUT_S = 10.0  # a Ray address that does not accept a TCP connection within this is unreachable


def _cluster_spec(cluster: Any) -> Any:
    """The cluster as a name/path string or its JSON dict (what workers rebuild it from)."""
    if isinstance(cluster, (str, os.PathLike)):
        load_cluster(cluster)  # a bad name fails here, not in every worker
        return os.fspath(cluster)
    return json.loads((cluster if isinstance(cluster, Cluster) else load_cluster(cluster)).to_json())


def check_address(address: str, timeout_s: float) -> None:
    """RayUnreachableError unless ``address`` ("host:port" or "ray://host[:port]") accepts a TCP connection."""
    if address in ("auto", "local"):
        return
    text = address
    default_port = 6379
    if "://" in text:
        scheme, text = text.split("://", 1)
        default_port = 10001 if scheme == "ray" else default_port
    text = text.rstrip("/")
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdecimal():
        host, port = text, default_port
    else:
        port = int(port_text)
    host = host.strip("[]")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as error:
        raise RayUnreachableError(
            f"Ray cluster at address {address!r} is unreachable: no answer on {host}:{port} within "
            f"{timeout_s:g} s ({error.strerror or type(error).__name__}); start it with "
            f"'ray start --head' or pass address=None for a local Ray instance") from None


class ParallelEvaluator:
    """Evaluates placements of ``benchmark`` on ``cluster`` with ``runtime`` on ``workers`` workers.

    ``benchmark``: a benchmark name (``pe.load_benchmark``); ``cluster``: a preset name,
    ``"local:N"``, a JSON path, a dict or a Cluster (sent to workers as its JSON dict).
    ``backend``: ``"process"`` or ``"ray"``; ``address``: a Ray cluster address (``"host:port"``,
    ``"ray://host:port"`` or ``"auto"``; None: the Ray instance this process already has, else a
    local one with ``num_cpus=workers``). ``timeout_s``: per placement (None: no limit).
    ``max_retries``: how often a placement whose worker died is tried again on a fresh worker.
    ``costs``: per-op seconds for runtime="sim" (as for ``pe.Evaluator``; default: the analytical
    costs, computed once in this process and sent to every worker when it starts).
    ``measured_options``: passed to each worker's ``Evaluator`` (runtime="measured").
    ``worker_setup``: a picklable ``f(evaluator)`` run in each worker after its Evaluator is built
    (e.g. to set seeds, thread counts or logging); if it returns an object, that object is used as
    the worker's evaluator (it must be callable on one placement).
    ``ray_actor_options``: resources of each Ray actor (default ``{"num_cpus": 1}``; e.g. add
    ``"num_gpus": 1`` so that each actor gets a GPU of its own).

    A local Ray instance started here listens on 127.0.0.1 only (see :mod:`.local_ray`). On the ray
    backend each Measurement's ``extra["ray_node_id"]`` names the Ray node that evaluated it, and
    ``evaluations_per_node`` counts them per node.
    """

    def __init__(self, benchmark: str, cluster: Any, runtime: str = "sim", *, backend: str = "process",
                 workers: int = 2, address: str | None = None, timeout_s: float | None = DEFAULT_TIMEOUT_S,
                 max_retries: int = 1, costs: Any = None, measured_options: dict[str, Any] | None = None,
                 worker_setup: Callable[[Any], Any] | None = None, ray_actor_options: dict[str, Any] | None = None,
                 start_timeout_s: float = START_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; expected one of {', '.join(map(repr, BACKENDS))}")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime={runtime!r}; expected one of {', '.join(map(repr, RUNTIMES))}")
        if not isinstance(benchmark, str):
            raise TypeError(f"benchmark is a {type(benchmark).__name__}; expected a benchmark name "
                            "(workers load it themselves)")
        workers = check_number(workers, "workers", 1, integer=True, error=bad_argument,
                               rule="a positive integer (worker processes or Ray actors)")
        max_retries = check_number(max_retries, "max_retries", 0, integer=True, error=bad_argument,
                                   rule="a non-negative integer")
        if timeout_s is not None:
            timeout_s = check_number(timeout_s, "timeout_s", 0, low_open=True, error=bad_argument,
                                     rule="a positive number of seconds or None")
        for name, seconds in (("start_timeout_s", start_timeout_s), ("connect_timeout_s", connect_timeout_s)):
            check_number(seconds, name, 0, low_open=True, error=bad_argument, rule="a positive number of seconds")
        if backend != "ray" and (address is not None or ray_actor_options):
            raise ValueError(f"address and ray_actor_options are for backend='ray', not {backend!r}")
        self._ray_actor_options = {"num_cpus": 1, **(ray_actor_options or {}), "max_restarts": 0}
        self.benchmark, self.runtime, self.backend = benchmark, runtime, backend
        self.workers, self.timeout_s, self.max_retries = workers, timeout_s, max_retries
        self.address = address
        cluster_spec = _cluster_spec(cluster)
        # Validates the name and fills the on-disk cache once, so workers do not all build the graph.
        graph = load_benchmark(benchmark)
        self.n_groups = graph.n_groups
        if runtime == "sim":
            # Op costs computed once here (analytical costs import TensorFlow) and sent to each worker at start.
            costs = Evaluator(graph, load_cluster(cluster_spec), costs=costs).costs.seconds
        elif costs is not None:
            raise ValueError(f"costs are for runtime='sim', not {runtime!r}")
        self._spec = (benchmark, cluster_spec, runtime, costs, dict(measured_options or {}) or None, worker_setup)
        self._start_timeout_s = start_timeout_s
        self._slots: list[Any] = []
        self._ray: Any = None
        self._owns_ray = False
        self.evaluations_per_node: Counter[str] = Counter()
        self._closed = False
        if backend == "ray":
            self._init_ray(address, connect_timeout_s)
        try:
            self._start_slots()
        except BaseException:
            self.close()
            raise

    # -- start-up --

    def _init_ray(self, address: str | None, connect_timeout_s: float) -> None:
        try:
            import ray
        except ImportError as error:
            raise ImportError("backend='ray' needs Ray: pip install 'placement_env[distributed]' "
                              "(or pip install 'ray>=2.9')") from error
        self._ray = ray
        if address is not None:
            check_address(address, connect_timeout_s)
        if ray.is_initialized():
            if address is not None:
                warnings.warn(f"Ray is already initialised in this process; using that instance, not address={address!r}",
                              stacklevel=3)
        else:
            if address is not None:
                try:
                    ray.init(address=address, include_dashboard=False, logging_level="ERROR",
                             log_to_driver=False)
                except ConnectionError as error:
                    raise RayUnreachableError(f"Ray cluster at address {address!r} is unreachable: {error}") from error
            else:
                start_local_ray(self.workers, logging_level="ERROR", log_to_driver=False)
            self._owns_ray = True
        self._actor_class = ray.remote(**self._ray_actor_options)(RayWorker)

    def _new_slot(self) -> Any:
        if self.backend == "process":
            return ProcessSlot(self._spec, multiprocessing.get_context("spawn"))
        return RaySlot(self._ray, self._actor_class, self._spec)

    def _start_slots(self) -> None:
        self._slots = [self._new_slot() for _ in range(self.workers)]
        handles = [slot.start_ready() for slot in self._slots]
        deadline = time.monotonic() + self._start_timeout_s
        for slot, handle in zip(self._slots, handles):
            remaining = max(0.0, deadline - time.monotonic())
            try:
                if self.backend == "process":
                    slot.pid = handle.result(timeout=remaining)
                else:
                    slot.pid = self._ray.get(handle, timeout=remaining)
            except (TimeoutError, *((self._ray.exceptions.GetTimeoutError,) if self._ray else ())) as error:
                raise WorkerStartError(f"{self.backend} workers for {self.benchmark!r} did not start within "
                                       f"{self._start_timeout_s:g} s" + (" (does the Ray cluster have "
                                       f"{self.workers} free CPUs?)" if self.backend == "ray" else "")) from error
            except BrokenProcessPool as error:
                raise WorkerStartError(f"a {self.backend} worker died while starting: {error}") from error
            except Exception as error:
                if self._ray is not None and isinstance(error, self._ray.exceptions.RayTaskError):
                    raise error.as_instanceof_cause() from None
                if self._ray is not None and isinstance(error, self._ray.exceptions.RayActorError):
                    raise WorkerStartError(f"a Ray actor failed to start: {error}") from error
                raise

    # -- evaluation --

    def worker_pids(self) -> list[int]:
        """The process id of every worker (asked anew after a restart)."""
        self._check_open()
        pids = []
        for slot in self._slots:
            if slot.pid is None:
                handle = slot.start_ready()
                try:
                    slot.pid = handle.result(timeout=self._start_timeout_s) if self.backend == "process" \
                        else self._ray.get(handle, timeout=self._start_timeout_s)
                except Exception:  # died meanwhile: a fresh one
                    slot.restart()
                    handle = slot.start_ready()
                    slot.pid = handle.result(timeout=self._start_timeout_s) if self.backend == "process" \
                        else self._ray.get(handle, timeout=self._start_timeout_s)
            pids.append(slot.pid)
        return pids

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this ParallelEvaluator is closed")

    def _wait(self, handles: list[Any], timeout: float | None) -> list[Any]:
        if self.backend == "process":
            done, _ = wait_futures(handles, timeout=timeout, return_when=FIRST_COMPLETED)
            return list(done)
        done, _ = self._ray.wait(handles, num_returns=1, timeout=timeout)
        return list(done)

    def __call__(self, placement: Any) -> Measurement:
        """The Measurement of one placement (one device index per group)."""
        array = np.asarray(placement)
        if array.ndim != 1:
            raise ValueError(f"placement has shape {array.shape}; expected ({self.n_groups},)")
        return self.batch(array[None])[0]

    def batch(self, placements: Any) -> list[Measurement]:
        """Measurements of every row of ``placements`` ([k, n_groups]), in the order given."""
        self._check_open()
        array = np.asarray(placements)
        if array.ndim != 2:
            raise ValueError(f"placements has shape {array.shape}; expected (k, {self.n_groups})")
        k = array.shape[0]
        results: list[Measurement | None] = [None] * k
        attempts = [0] * k
        pending = deque(range(k))
        idle = list(reversed(self._slots))
        inflight: dict[Any, tuple[Any, int, float]] = {}
        error: BaseException | None = None
        while inflight or (pending and error is None):
            while pending and idle and error is None:
                slot, i = idle.pop(), pending.popleft()
                deadline = float("inf") if self.timeout_s is None else time.monotonic() + self.timeout_s
                inflight[slot.submit(array[i])] = (slot, i, deadline)
            next_deadline = min(deadline for _, _, deadline in inflight.values())
            wait_s = None if next_deadline == float("inf") else max(0.0, next_deadline - time.monotonic())
            for handle in self._wait(list(inflight), wait_s):
                slot, i, _ = inflight.pop(handle)
                try:
                    results[i] = slot.result(handle)
                    self._count_node(results[i])
                except WorkerDied as died:
                    slot.restart()
                    attempts[i] += 1
                    if attempts[i] > self.max_retries:
                        results[i] = self._failed(array[i], "crash",
                                                  f"the {self.backend} worker evaluating this placement died "
                                                  f"{attempts[i]} time(s) ({died}); gave up after "
                                                  f"{self.max_retries} retr{'y' if self.max_retries == 1 else 'ies'}")
                    else:
                        pending.appendleft(i)
                except BaseException as raised:  # the evaluation itself raised
                    if error is None:
                        error = raised
                idle.append(slot)
            now = time.monotonic()
            for handle, (slot, i, deadline) in list(inflight.items()):
                if deadline <= now:
                    del inflight[handle]
                    slot.restart()
                    results[i] = self._failed(array[i], "timeout",
                                              f"the {self.backend} worker gave no answer within {self.timeout_s:g} s; "
                                              "it was replaced by a fresh worker")
                    idle.append(slot)
        if error is not None:
            raise error
        return results  # type: ignore[return-value]

    def _count_node(self, measurement: Any) -> None:
        node = getattr(measurement, "extra", {}).get(NODE_KEY)
        if node is not None:
            self.evaluations_per_node[node] += 1

    def _failed(self, placement: np.ndarray, failure: str, message: str) -> Measurement:
        return Measurement(runtime_s=float("nan"), ok=False, failure=failure, message=message,
                           placement=np.asarray(placement, dtype=np.int64), runtime=self.runtime,
                           extra={"parallel_backend": self.backend})

    # -- shutdown --

    def close(self) -> None:
        """Stop every worker (and the local Ray instance this evaluator started)."""
        if self._closed:
            return
        self._closed = True
        for slot in self._slots:
            slot.close(timeout_s=30.0)
        self._slots = []
        if self._owns_ray and self._ray is not None:
            self._ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> "ParallelEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
