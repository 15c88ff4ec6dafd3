"""How many threads torch runs the agents on, with its deterministic algorithms.

A seeded run's float sums, so what it learns, depend on torch's thread count, and torch's default is one thread per
core: the same seed would give another run on a machine with another number of cores (docs/findings.md). So the
harness methods run on a set count, ``$AGENT_TORCH_THREADS`` or :data:`HARNESS_THREADS`, and the command lines take
``--threads``. On more than one thread some of torch's CPU ops also sum in an order that changes from run to run, so
both run with ``torch.use_deterministic_algorithms`` on (on one thread it gives the same floats). The trainers flush
denormal floats to zero on their thread (:class:`Trainer`), a processor state that would leak into the caller's own
float code; :func:`caller_float_mode_kept` puts it back after a harness method or a training run.
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

THREADS_ENV = "AGENT_TORCH_THREADS"
# What docs/*_results.jsonl were made with (torch's default on the 2-core machine that ran them), so that
# their agent rows are retrained on the same count.
HARNESS_THREADS = 2


def harness_threads() -> int:
    """``$AGENT_TORCH_THREADS`` if set (one on a machine busy with something else), else ``HARNESS_THREADS``."""
    text = os.environ.get(THREADS_ENV)
    if text is None:
        return HARNESS_THREADS
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{THREADS_ENV}={text!r}; expected a whole number of torch threads, 1 or more")
    return int(text)


def _use_threads(threads: int) -> None:
    """torch on ``threads`` threads with its deterministic algorithms (a warning, not an error, for an op that has
    none)."""
    import torch

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch on ``threads`` threads with its deterministic algorithms inside, back as it was after."""
    import torch

    previous = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    _use_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


def start_command(threads: int) -> None:
    """What a command line does once its flags are checked, before it builds anything: TensorFlow imported
    without its start-up notices (which would bury the progress bar), torch on ``threads`` threads (``--threads``)
    with its deterministic algorithms."""
    from placement_env import import_tensorflow_quietly

    import_tensorflow_quietly()
    _use_threads(threads)


def denormals_flushed() -> bool:
    """Whether this thread flushes denormal floats to zero (the smallest double then reads as 0)."""
    import numpy as np

    return bool(np.array([5e-324]) * 1.0 == 0.0)


@contextmanager
def caller_float_mode_kept() -> Iterator[None]:
    """This thread's flushing of denormals as it was before, after the block (which may switch it on)."""
    import torch

    flushed = denormals_flushed()
    try:
        yield
    finally:
        torch.set_flush_denormal(flushed)


def keeps_caller_float_mode(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, run within :func:`caller_float_mode_kept`."""
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        with caller_float_mode_kept():
            return function(*args, **kwargs)
    return run


def on_harness_threads(method: Callable[..., Any]) -> Callable[..., Any]:
    """A harness method that trains on :func:`harness_threads` torch threads, whatever the caller's, and leaves
    the caller's float mode as it found it."""
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> Any:
        with torch_threads(harness_threads()):
            return method(*args, **kwargs)
    return keeps_caller_float_mode(run)
