"""The worker side of ParallelEvaluator: what runs inside a worker process or a Ray actor.

Each worker builds its own Evaluator once, from the benchmark name and the cluster's name or JSON
dict, and then evaluates the placements it is sent.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

import numpy as np

from ..evaluation import Evaluator
from ..placement import Measurement


def build_evaluator(benchmark: str, cluster: Any, runtime: str, costs: np.ndarray | None,
                     measured_options: dict | None, worker_setup: Callable | None) -> Any:
    evaluator = Evaluator(benchmark, cluster, runtime, costs=costs, measured_options=measured_options or None)
    if worker_setup is not None:
        wrapped = worker_setup(evaluator)
        if wrapped is not None:
            evaluator = wrapped
    return evaluator


_EVALUATOR: Any = None  # the process worker's evaluator
_START_ERROR: BaseException | None = None  # why it could not be built (re-raised by every task)


PARENT_POLL_S = 1.0  # how often a worker process checks that the process that started it is alive


def _exit_with_parent(parent: int) -> None:
    """Leave as soon as the parent is gone (SIGKILLed: no pool shutdown will ever come), so no worker,
    and no TF worker its evaluator started, is orphaned under PID 1."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    if _EVALUATOR is not None and hasattr(_EVALUATOR, "close"):
        _EVALUATOR.close()
    os._exit(0)


def process_init(*spec: Any) -> None:
    global _EVALUATOR, _START_ERROR
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="parent-watch").start()
    try:
        _EVALUATOR = build_evaluator(*spec)
    except BaseException as error:  # raising here would only show as a broken pool
        _START_ERROR = error


def process_ready() -> int:
    if _START_ERROR is not None:
        raise _START_ERROR
    return os.getpid()


def process_evaluate(placement: np.ndarray) -> Measurement:
    if _START_ERROR is not None:
        raise _START_ERROR
    return _EVALUATOR(placement)


def process_close() -> None:
    if _EVALUATOR is not None and hasattr(_EVALUATOR, "close"):
        _EVALUATOR.close()


NODE_KEY = "ray_node_id"  # Measurement.extra key: the Ray node that evaluated the placement


class RayWorker:
    """The Ray actor's class (wrapped with ``ray.remote`` when the ray backend is first used)."""

    def __init__(self, *spec: Any) -> None:
        import ray

        self._evaluator = build_evaluator(*spec)
        self._node_id = ray.get_runtime_context().get_node_id()

    def ready(self) -> int:
        return os.getpid()

    def evaluate(self, placement: np.ndarray) -> Measurement:
        measurement = self._evaluator(placement)
        if isinstance(measurement, Measurement):
            measurement.extra[NODE_KEY] = self._node_id
        return measurement

    def close(self) -> None:
        if hasattr(self._evaluator, "close"):
            self._evaluator.close()
