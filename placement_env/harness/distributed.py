"""A suite's runs spread over worker processes on this machine or over the actors of a Ray cluster.

:func:`~placement_env.harness.runner.run_suite` hands :func:`parallel_rows` the runs still to make when it is
given ``workers`` > 1 or a ``ray_address``; the rows come back as they finish and the parent appends each to the
results file at once, so an interrupted run keeps every finished row and a rerun resumes.

* Local processes (``workers=N``, no Ray needed): N spawned worker processes (TF and numba do not survive a
  fork), each with a pipe to the parent.
* Ray (``ray_address``): one actor per worker on the cluster at ``"auto"`` or ``"host:port"``, spread over its
  nodes (``workers`` of them, default one per CPU of the cluster), or on a Ray instance of this machine kept on
  127.0.0.1 (``"local"``, :func:`~placement_env.parallel.start_local_ray`). Every node must run the versions of
  this process (package versions and the simulator's), or the run stops before its first row.

Each worker keeps one Evaluator per task it has met, as a serial run does, and is handed the runs of one task
while that task has runs left (then a task no other worker is on, if there is one), so it builds few evaluators.
With a task's first run a worker gets the task's op costs, computed (or read from the cache) in this process: the
analytical costs import TensorFlow, which would cost every worker seconds and half a gigabyte.
A row is made by the same ``run_one`` as in a serial run, with the same seed, so it equals the serial run's row
but for its wall times (``wall_s`` and the wall column of ``anytime``); the file holds the rows in the order they
finished.

A worker that dies while it makes a row (killed, out of memory, ``os._exit``, a segfault) loses no other row: it
is replaced by a fresh one and the run is tried once more (``RETRIES``); if that worker dies too, the run gets an
``infrastructure`` row naming the deaths, which is not finished work, so a rerun makes it again. An exception that
``run_one`` does not turn into a row (e.g. a benchmark that does not load) stops the run as in a serial run, after
the rows in hand have come back. Ctrl-C kills the workers; the rows written stay.

Tasks with runtime ``"measured"`` time real TF workers on this machine, and a timing needs an otherwise idle
machine: their rows are made first, one at a time in this process, before any worker starts.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import Counter, deque
from multiprocessing.connection import wait as wait_connections
from typing import Any, Iterator, Protocol, Sequence

import numpy as np
from tqdm import tqdm

from ..errors import WorkerStartError
from ..evaluation import Evaluator
from ..placement import INFRASTRUCTURE
from .results import versions
from .runner import Run, make_row, progress_bar, run_one, serial_rows, task_evaluator

RETRIES = 1  # a run whose worker died is tried this many more times on a fresh worker before its row records it
START_TIMEOUT_S = 300.0  # a worker importing numba and TF on a loaded machine, or a Ray actor waiting for a CPU
STOP_TIMEOUT_S = 10.0  # how long a worker told to stop may take before it is killed
PARENT_POLL_S = 1.0  # how often a worker process checks that the process that started it is alive
# OpenMP's wait policy in a worker, unless the user's environment sets one. The agents train on two torch threads
# (agents/common/torch_threads.py), so N workers' threads can outnumber the cores; OpenMP's default, active waiting,
# then keeps each idle thread spinning on a core another worker needs (three agents' rows on the tiny suite, 2
# workers on a 2-core machine: 264 s waiting actively, 69 s passively, 90 s in one process; docs/harness.md).
# The policy decides how a thread waits, not how the work is split, so the rows stay the serial run's.
OPENMP_WAIT_POLICY = "PASSIVE"


def _passive_openmp_waits() -> None:
    """``OMP_WAIT_POLICY`` for this worker, before anything in it loads OpenMP (torch does, when a method needs it),
    unless it is set already."""
    os.environ.setdefault("OMP_WAIT_POLICY", OPENMP_WAIT_POLICY)


def parallel_rows(suite: str, runs: Sequence[Run], *, workers: int | None, ray_address: str | None,
                  progress: bool = True) -> Iterator[dict[str, Any]]:
    """The row of every run of ``runs`` as it finishes: measured tasks' first, in this process, then the rest on
    ``workers`` processes (``ray_address`` None) or Ray actors (see the module docstring)."""
    measured = [run for run in runs if run.task.runtime == "measured"]
    spread = [run for run in runs if run.task.runtime != "measured"]
    if measured and progress:
        tqdm.write(f"{len(measured)} runs on measured tasks first, one at a time in this process (their timings "
                   "need an idle machine); then the others on the workers", file=sys.stderr)
    if measured:
        yield from serial_rows(suite, progress_bar(measured, suite, progress))
    if not spread:
        return
    if ray_address is None:
        pool: _Workers = _ProcessWorkers(suite, min(workers, len(spread)))
    else:
        pool = _RayWorkers(suite, workers, len(spread), ray_address)
    bar = tqdm(total=len(spread), desc=f"suite {suite}, {len(pool.slots)} {pool.kind} workers", unit="run",
               disable=not progress)
    interrupted = True
    try:
        yield from _schedule(pool, suite, spread, bar)
        interrupted = False
    finally:
        bar.close()
        pool.close(kill=interrupted)
        if progress and pool.summary():
            tqdm.write(pool.summary(), file=sys.stderr)


def _schedule(pool: _Workers, suite: str, runs: Sequence[Run], bar: tqdm) -> Iterator[dict[str, Any]]:
    """Hand ``runs`` to the pool's idle slots (runs of one task to the slot that ran it last) and yield each row
    as it comes back; a run whose worker died is tried again or recorded (``RETRIES``)."""
    queues: dict[str, deque[Run]] = {}
    for run in runs:
        queues.setdefault(run.task.name, deque()).append(run)
    deaths: Counter[Run] = Counter()
    last_task: dict[int, str] = {}  # slot index -> the task of its last run
    known: dict[int, set[str]] = {slot: set() for slot in range(len(pool.slots))}  # tasks each slot's worker has
    idle = list(reversed(range(len(pool.slots))))
    inflight: dict[Any, tuple[int, Run]] = {}
    error: BaseException | None = None
    evaluators: dict[str, Evaluator] = {}  # this process's: the op costs workers get, the rows of dead workers
    try:
        while inflight or (queues and error is None):
            while idle and queues and error is None:
                slot = idle.pop()
                busy = {run.task.name for _, run in inflight.values()}
                run = _next_run(queues, last_task.get(slot), busy)
                last_task[slot] = run.task.name
                bar.set_postfix_str(f"{run.task.name} {run.spec} seed {run.seed} budget {run.budget}")
                costs = None if run.task.name in known[slot] else \
                    task_evaluator(run.task, evaluators).costs.seconds
                known[slot].add(run.task.name)
                inflight[pool.submit(slot, run, costs)] = (slot, run)
            for handle, outcome, value in pool.wait(list(inflight)):
                slot, run = inflight.pop(handle)
                if outcome == "row":
                    bar.update()
                    yield value
                elif outcome == "died":
                    deaths[run] += 1
                    pool.restart(slot)
                    known[slot] = set()
                    if deaths[run] > RETRIES:
                        bar.update()
                        yield _died_row(suite, run, evaluators, deaths[run], value, pool.kind)
                    else:
                        queues.setdefault(run.task.name, deque()).appendleft(run)
                elif error is None:  # "error": run_one raised; the rows in flight still come back
                    error = value
                idle.append(slot)
        if error is not None:
            raise error
    finally:
        for evaluator in evaluators.values():
            evaluator.close()


def _next_run(queues: dict[str, deque[Run]], last: str | None, busy: set[str]) -> Run:
    """The next run for a slot whose last task was ``last``: that task's while it has runs, else the first task
    (in plan order) that no slot is on (``busy``), else the task with the most runs left."""
    if last not in queues:
        names = list(queues)
        free = [name for name in names if name not in busy]
        last = free[0] if free else max(names, key=lambda name: len(queues[name]))
    queue = queues[last]
    run = queue.popleft()
    if not queue:
        del queues[last]
    return run


def _died_row(suite: str, run: Run, evaluators: dict[str, Evaluator], deaths: int, why: str,
              kind: str) -> dict[str, Any]:
    """The ``infrastructure`` row of a run whose worker died ``deaths`` times (a rerun makes it again)."""
    evaluator = task_evaluator(run.task, evaluators)  # for the row's versions and lower bound
    return make_row(suite, run.task, evaluator, run.spec, run.seed, run.budget, [], None, 0, 0.0,
                evaluator.lower_bound(), failure=INFRASTRUCTURE,
                message=f"the {kind} worker making this row died {deaths} times (last: {why}); a rerun makes it again")


class _Workers(Protocol):
    """The slots a schedule hands runs to: ``submit`` gives a handle, ``wait`` the (handle, outcome, value) of
    those that finished, outcome "row" (value: the row), "died" (value: why) or "error" (value: the exception)."""

    kind: str
    slots: list[Any]

    def submit(self, slot: int, run: Run, costs: np.ndarray | None) -> Any: ...

    def wait(self, handles: list[Any]) -> list[tuple[Any, str, Any]]: ...

    def restart(self, slot: int) -> None: ...

    def close(self, *, kill: bool) -> None: ...

    def summary(self) -> str: ...


# -- local processes ------------------------------------------------------------------------------------------


class _Process:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, context: Any, suite: str) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_process_main, args=(child, suite), name="placement-env-harness")
        self.process.start()
        child.close()  # the parent keeps its own end only, so a dead worker's pipe reads as closed

    def ready(self, timeout_s: float) -> None:
        """Wait for the worker's first message (it is up), or WorkerStartError."""
        try:
            if self.connection.poll(timeout_s):
                self.connection.recv()
                return
            problem = f"did not start within {timeout_s:g} s"
        except (EOFError, OSError):
            problem = f"died while starting ({self.death()})"
        raise WorkerStartError(f"a harness worker process {problem}; its error, if any, is above")

    def death(self) -> str:
        """How the worker ended, e.g. "killed by signal SIGKILL" (waiting briefly for its exit status)."""
        self.process.join(timeout=5.0)
        code = self.process.exitcode
        if code is None:
            return "its pipe closed"
        if code < 0:
            try:
                return f"pid {self.process.pid} killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"pid {self.process.pid} killed by signal {-code}"
        return f"pid {self.process.pid} exited with code {code}"

    def stop(self, kill: bool) -> None:
        if not kill and self.process.is_alive():
            try:
                self.connection.send(None)
                self.process.join(timeout=STOP_TIMEOUT_S)
            except OSError:
                pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=STOP_TIMEOUT_S)
        self.connection.close()


class _ProcessWorkers:
    """``count`` worker processes (spawned); a handle is the slot's index."""

    kind = "process"

    def __init__(self, suite: str, count: int) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._suite = suite
        self.slots: list[_Process] = []
        try:
            self.slots = [_Process(self._context, suite) for _ in range(count)]
            for slot in self.slots:
                slot.ready(START_TIMEOUT_S)
        except BaseException:
            self.close(kill=True)
            raise

    def submit(self, slot: int, run: Run, costs: np.ndarray | None) -> int:
        try:
            self.slots[slot].connection.send((run, costs))
        except OSError:  # died while idle; its death shows when the handle is waited on
            pass
        return slot

    def wait(self, handles: list[int]) -> list[tuple[int, str, Any]]:
        slots = {slot: self.slots[slot] for slot in handles}
        ready = set(wait_connections([worker.connection for worker in slots.values()]
                                     + [worker.process.sentinel for worker in slots.values()]))
        finished = []
        for slot, worker in slots.items():
            if worker.connection not in ready and worker.process.sentinel not in ready:
                continue
            try:
                if not worker.connection.poll():
                    raise EOFError
                outcome, value = worker.connection.recv()
            except (EOFError, OSError):
                finished.append((slot, "died", worker.death()))
                continue
            finished.append((slot, outcome, value))
        return finished

    def restart(self, slot: int) -> None:
        self.slots[slot].stop(kill=True)
        self.slots[slot] = _Process(self._context, self._suite)
        self.slots[slot].ready(START_TIMEOUT_S)

    def close(self, *, kill: bool) -> None:
        for worker in self.slots:
            worker.stop(kill)
        self.slots = []

    def summary(self) -> str:
        return ""


def _row_of(suite: str, run: Run, costs: np.ndarray | None, evaluators: dict[str, Evaluator]) -> dict[str, Any]:
    """The row of ``run``, made in a worker as a serial run makes it; ``costs``, sent with a task's first run to this
    worker, are its op seconds as the parent computed them (so no worker imports TensorFlow to compute them)."""
    if costs is not None:
        task_evaluator(run.task, evaluators, costs)
    return run_one(suite, run, evaluators)


def _exit_with_parent(parent: int) -> None:
    """Leave as soon as the parent is gone (killed: no stop message will come), so no worker is orphaned."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)


def _portable(error: BaseException) -> BaseException:
    """``error`` with the worker's traceback as a note, or a RuntimeError of its text if it does not pickle."""
    error.add_note(f"in harness worker process {os.getpid()}:\n" + "".join(traceback.format_exception(error)))
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any exception that does not survive the pipe is sent as text
        return RuntimeError("".join(traceback.format_exception(error)))


def _process_main(connection: Any, suite: str) -> None:
    """A worker process: make the row of each run it is sent, until it is sent None or the parent is gone.
    Ctrl-C is the parent's to handle (it kills the workers), so the worker ignores it."""
    _passive_openmp_waits()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="parent-watch").start()
    evaluators: dict[str, Evaluator] = {}
    connection.send(("ready", os.getpid()))
    try:
        while True:
            try:
                work = connection.recv()
            except EOFError:
                return
            if work is None:
                return
            try:
                message = ("row", _row_of(suite, *work, evaluators))
            except BaseException as error:  # noqa: BLE001 - the parent stops the run with it
                message = ("error", _portable(error))
            connection.send(message)
    finally:
        for evaluator in evaluators.values():
            evaluator.close()


# -- Ray ------------------------------------------------------------------------------------------------------


class RowWorker:
    """The Ray actor's class (wrapped with ``ray.remote`` when a run uses Ray): one worker of the harness."""

    def __init__(self, suite: str) -> None:
        _passive_openmp_waits()
        self._suite = suite
        self._evaluators: dict[str, Evaluator] = {}

    def ready(self) -> tuple[str, dict[str, str]]:
        """This actor's Ray node and the versions that would make its rows."""
        import ray

        return ray.get_runtime_context().get_node_id(), versions()

    def row(self, run: Run, costs: np.ndarray | None) -> dict[str, Any]:
        return _row_of(self._suite, run, costs, self._evaluators)

    def close(self) -> None:
        for evaluator in self._evaluators.values():
            evaluator.close()


class _RayWorkers:
    """Ray actors (``RowWorker``), one CPU each, spread over the cluster's nodes; a handle is an ObjectRef."""

    kind = "Ray"

    def __init__(self, suite: str, workers: int | None, runs: int, address: str) -> None:
        try:
            import ray
        except ImportError as error:
            raise WorkerStartError("ray_address needs Ray: pip install 'placement_env[distributed]' (or "
                                   "pip install 'ray>=2.9')") from error
        self._ray, self._suite = ray, suite
        self._owns_ray = self._connect(address, workers)
        self.slots: list[Any] = []
        self._nodes: list[str] = []  # the Ray node of each slot's actor
        self._slot_of: dict[Any, int] = {}  # the slot of each ObjectRef in flight
        self.rows_per_node: Counter[str] = Counter()
        try:
            count = workers if workers is not None else int(ray.cluster_resources().get("CPU", 0))
            if count < 1:
                raise WorkerStartError(f"the Ray cluster at {address!r} has no CPU for an actor")
            self._actor_class = ray.remote(num_cpus=1, max_restarts=0)(RowWorker)
            self.slots = [self._new_actor() for _ in range(min(count, runs))]
            self._nodes = [""] * len(self.slots)
            for slot in range(len(self.slots)):
                self._ready(slot)
        except BaseException:
            self.close(kill=True)
            raise

    def _connect(self, address: str, workers: int | None) -> bool:
        """Connect to (or start, for "local") the Ray instance; whether this process owns it (shuts it down)."""
        from ..parallel.evaluator import CONNECT_TIMEOUT_S, check_address
        from ..parallel.local_ray import start_local_ray

        ray = self._ray
        if ray.is_initialized():
            warnings.warn(f"Ray is already initialised in this process; using that instance, not "
                          f"ray_address={address!r}", stacklevel=4)
            return False
        if address == "local":
            start_local_ray(workers or os.cpu_count() or 1, logging_level="ERROR", log_to_driver=False)
            return True
        check_address(address, CONNECT_TIMEOUT_S)
        try:
            ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        except ConnectionError as error:
            from ..errors import RayUnreachableError

            raise RayUnreachableError(f"Ray cluster at address {address!r} is unreachable: {error}") from error
        return True

    def _new_actor(self) -> Any:
        return self._actor_class.options(scheduling_strategy="SPREAD").remote(self._suite)

    def _ready(self, slot: int) -> None:
        """Wait for the actor of ``slot`` to start; WorkerStartError if it does not, or if its node's versions are
        not this process's (its rows would not be a serial run's)."""
        ray = self._ray
        try:
            node, found = ray.get(self.slots[slot].ready.remote(), timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError as error:
            raise WorkerStartError(f"a Ray actor did not start within {START_TIMEOUT_S:g} s (does the cluster have "
                                   f"{len(self.slots)} free CPUs?)") from error
        except ray.exceptions.RayError as error:
            raise WorkerStartError(f"a Ray actor failed to start: {error}") from error
        here = versions()
        differ = sorted(key for key in {*here, *found} if here.get(key) != found.get(key))
        if differ:
            raise WorkerStartError(
                f"Ray node {node} runs other versions than this process ("
                + ", ".join(f"{key} {found.get(key, 'missing')} there, {here.get(key, 'missing')} here"
                            for key in differ) + "); its rows would not be a serial run's: install the same "
                "versions on every node")
        self._nodes[slot] = node

    def submit(self, slot: int, run: Run, costs: np.ndarray | None) -> Any:
        ref = self.slots[slot].row.remote(run, costs)
        self._slot_of[ref] = slot
        return ref

    def wait(self, handles: list[Any]) -> list[tuple[Any, str, Any]]:
        ray = self._ray
        done, _ = ray.wait(handles, num_returns=1)
        finished = []
        for ref in done:
            slot = self._slot_of.pop(ref)
            try:
                row = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.ObjectLostError) as error:
                finished.append((ref, "died", f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"))
            except ray.exceptions.RayTaskError as error:
                finished.append((ref, "error", error.as_instanceof_cause()))
            else:
                finished.append((ref, "row", row))
                self.rows_per_node[self._nodes[slot]] += 1
        return finished

    def restart(self, slot: int) -> None:
        self._kill(self.slots[slot])
        self.slots[slot] = self._new_actor()
        self._ready(slot)

    def _kill(self, actor: Any) -> None:
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self, *, kill: bool) -> None:
        ray = self._ray
        for actor in self.slots:
            if not kill:
                try:
                    ray.get(actor.close.remote(), timeout=STOP_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                    pass
            self._kill(actor)
        self.slots = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False

    def summary(self) -> str:
        return "rows per Ray node: " + ", ".join(f"{node} {count}" for node, count in self.rows_per_node.items()) \
            if self.rows_per_node else ""
