"""Evaluate K placements at once on K workers (the paper measured each update's K samples in parallel).

``ParallelEvaluator`` has the interface of :class:`placement_env.Evaluator` (``__call__``, ``batch``,
``close``, ``with``) but hands each placement to one of ``workers`` worker processes, each of which
builds its own graph, cluster and ``Evaluator`` once, from the benchmark *name* and the cluster's
name or JSON dict (nothing big is pickled per call)::

    from placement_env import ParallelEvaluator
    with ParallelEvaluator("nmt", "local:2", "measured", workers=4) as ev:
        measurements = ev.batch(placements)      # [k, n_groups] -> k Measurements, in order

Backends:

* ``"process"`` (default): one single-process ``ProcessPoolExecutor`` (spawn context: TF and numba
  do not survive fork) per worker slot, so a dead worker is known exactly and only it is restarted.
* ``"ray"``: one Ray actor per slot, on the Ray cluster at ``address`` or on a local Ray instance
  started with ``num_cpus=workers`` whose servers listen on 127.0.0.1 only (:func:`start_local_ray`;
  ``pip install placement_env[distributed]``). Ray is imported only when this backend is used.

With ``runtime="measured"`` every worker owns its own device set: on a ``local:N`` cluster each
worker starts its own N local TF workers, so ``workers=K`` measures K placements at once on K
device sets (each in its own network namespace).

Failures: a worker that dies while it evaluates a placement (killed, out of memory, segfault) loses
no sample: the slot gets a fresh worker and the placement is tried again, up to ``max_retries``
times, after which it is reported as a failed ``Measurement`` (``failure="crash"``). A placement
whose worker does not answer within ``timeout_s`` is reported as ``failure="timeout"`` and its
worker is replaced. Either way the evaluator stays usable. An exception raised by the evaluation
itself (e.g. an ``InvalidPlacementError``) is re-raised in the caller after the batch's other
in-flight placements have finished.
"""
from __future__ import annotations

from .evaluator import BACKENDS, CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, START_TIMEOUT_S, ParallelEvaluator
from .local_ray import start_local_ray

__all__ = ["BACKENDS", "CONNECT_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "START_TIMEOUT_S", "ParallelEvaluator",
           "start_local_ray"]
