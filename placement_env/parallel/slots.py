"""One slot of a ParallelEvaluator: a worker it can submit to, restart when it dies, and close.

``ProcessSlot`` is a one-process ``ProcessPoolExecutor`` (so a death is attributed exactly);
``RaySlot`` is one Ray actor. Both turn a dead worker into :class:`WorkerDied`.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from .workers import process_close, process_evaluate, process_init, process_ready


class WorkerDied(Exception):
    """The worker that held a placement died before answering (the evaluator retries it)."""


class ProcessSlot:
    """One worker process (a one-process ProcessPoolExecutor, so a death is attributed exactly)."""

    def __init__(self, spec: tuple, context: Any) -> None:
        self._spec, self._context = spec, context
        self._pool: ProcessPoolExecutor | None = None
        self.pid: int | None = None
        self._start()

    def _start(self) -> None:
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=self._context,
                                         initializer=process_init, initargs=self._spec)
        self.pid = None

    def start_ready(self) -> Any:
        return self._pool.submit(process_ready)

    def submit(self, placement: np.ndarray) -> Any:
        try:
            return self._pool.submit(process_evaluate, placement)
        except BrokenProcessPool:  # died while idle: nothing was lost, start a fresh one
            self.restart()
            return self._pool.submit(process_evaluate, placement)

    @staticmethod
    def result(future: Any) -> Any:
        try:
            return future.result()
        except BrokenProcessPool as error:
            raise WorkerDied(str(error) or "the worker process terminated abruptly") from error

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        for process in processes:
            process.join(timeout=10)

    def restart(self) -> None:
        self._kill()
        self._start()

    def close(self, timeout_s: float) -> None:
        if self._pool is None:
            return
        try:  # let the worker's evaluator stop what it started (measured runtime's TF workers)
            self._pool.submit(process_close).result(timeout=timeout_s)
        except Exception:
            pass
        self._kill()


class RaySlot:
    """One Ray actor."""

    def __init__(self, ray: Any, actor_class: Any, spec: tuple) -> None:
        self._ray, self._actor_class, self._spec = ray, actor_class, spec
        self.actor: Any = None
        self.pid: int | None = None
        self._start()

    def _start(self) -> None:
        self.actor = self._actor_class.remote(*self._spec)
        self.pid = None

    def start_ready(self) -> Any:
        return self.actor.ready.remote()

    def submit(self, placement: np.ndarray) -> Any:
        return self.actor.evaluate.remote(placement)

    def result(self, ref: Any) -> Any:
        ray, exceptions = self._ray, self._ray.exceptions
        try:
            return ray.get(ref)
        except (exceptions.RayActorError, exceptions.WorkerCrashedError, exceptions.ObjectLostError) as error:
            raise WorkerDied(f"the Ray actor died ({type(error).__name__})") from error
        except exceptions.RayTaskError as error:  # the evaluation raised: re-raise its own exception
            raise error.as_instanceof_cause() from None

    def _kill(self) -> None:
        actor, self.actor = self.actor, None
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def restart(self) -> None:
        self._kill()
        self._start()

    def close(self, timeout_s: float) -> None:
        if self.actor is None:
            return
        try:
            self._ray.get(self.actor.close.remote(), timeout=timeout_s)
        except Exception:
            pass
        self._kill()
