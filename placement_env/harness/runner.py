"""Run placement methods over a suite: one row per (task, method, seed, budget), appended as it finishes.

The tasks are a suite's (``load_suite``) or given directly (``tasks=``); the budget is one number of runtime
evaluations or a list of them. ``plan_runs`` lists the rows to make (each argument checked before any work),
``run_one`` makes one row and ``serial_rows`` makes them in turn in this process.

A method is a spec (``pe.method``): a name of ``BUILT_IN_METHODS`` or ``PRESETS`` or ``"module:callable"``,
with keyword arguments written ``name@key=value,key=value`` or given as a MethodSpec; every spec is checked
against its method before any run starts. "all" stands for ``BUILT_IN_METHODS`` (the built-in methods and the
presets of built-in methods, the same names as before methods took arguments). A row records the method as given
(``method``) and its arguments (``method_args``).

A measured row also records the simulator's step time of its placement (``simulated_s``) and the step time of the
task's anchor placement, every group on device 0, measured right after it on the same workers (``anchor_s``), which
the scores divide measured step times by (``score``), and the machine it ran on (``host``: processor, cores and
widest vector extension, :mod:`.host`).

A rerun with the same results file skips the rows already there, so an interrupted run resumes
without redoing or losing finished work. A method that raises (e.g. the expert has no placement
for a synthetic graph) gives a row with ``failure="method_error"`` and its message; the run goes
on. When the measured runtime's machinery fails (after its own retries) the row has
``failure="infrastructure"``, and when the method cannot run as configured (a MethodConfigError,
e.g. an unreadable checkpoint or a missing Scotch mapper) ``failure="configuration"``: neither is
finished work, so a rerun does it again.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..cluster import load_cluster
from ..errors import InfrastructureError, MethodConfigError
from ..evaluation import Evaluator
from ..placement import INFRASTRUCTURE, Measurement, allowed_devices
from ..problem import BUILT_IN_METHODS, MethodSpec, Problem, method, solve
from . import placebench
from .host import host_description
from .results import (ANCHOR_DEVICE, CONFIGURATION, UNFINISHED, ResultsWriter, anchor_placement, expected_number,
                      versions)
from .suites import Task, resolve_suite
from .task_graph import load_task_graph

DEFAULT_BUDGET = 100  # runtime evaluations per method and task (methods that search use them)


def _method_specs(methods: Sequence[str | MethodSpec]) -> list[MethodSpec]:
    """Every method checked (``pe.method``), "all" given as ``BUILT_IN_METHODS``: before any work."""
    if isinstance(methods, (str, MethodSpec)):
        raise ValueError(f"methods={methods!r}; expected a list of methods, e.g. [{str(methods)!r}]")
    given = [name for entry in methods for name in (BUILT_IN_METHODS if entry == "all" else [entry])]
    if not given:
        raise ValueError("no methods given; name at least one (or 'all')")
    specs = [method(entry) for entry in given]
    _refuse_repeats("methods", [str(spec) for spec in specs])
    return specs


def _refuse_repeats(parameter: str, values: Sequence[Any]) -> None:
    """ValueError naming ``parameter`` if ``values`` holds a value twice (each would give the same rows twice)."""
    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        raise ValueError(f"{parameter}={list(values)!r}: {', '.join(repeated)} given more than once; give each once")


def make_row(suite: str, task: Task, evaluator: Evaluator, spec: MethodSpec, seed: int, budget: int,
             placement: list[int], m: Measurement | None, evaluations: int, wall_s: float, lower_bound_s: float,
             failure: str = "", message: str = "", anytime: tuple = (), info: dict | None = None) -> dict[str, Any]:
    """The results row of ``spec`` on ``task`` (``m``: the final placement's measurement, None if there is none)."""
    ok = m is not None and m.ok
    runtime_s = float(m.runtime_s) if m is not None and math.isfinite(m.runtime_s) else None
    return {
        "suite": suite, "task": task.name, "benchmark": task.benchmark, "cluster": task.cluster,
        "runtime": task.runtime, "method": spec.name, "method_args": dict(spec.args), "seed": seed, "budget": budget,
        "placement": placement,
        "runtime_s": runtime_s, "ok": ok, "failure": failure or (m.failure if m is not None else ""),
        "message": message or (m.message if m is not None else ""), "evaluations": evaluations,
        "wall_s": wall_s, "lower_bound_s": lower_bound_s, "versions": _versions(suite, evaluator),
        **({"graph_options": dict(task.graph_options)} if task.graph_options else {}),  # how a graph file was imported
        # best-so-far after each improvement: [evaluations, runtime s, wall s since the method started]
        "anytime": [[int(e), float(r), round(float(w), 4)] for e, r, w in anytime],
        **({"method_info": dict(info)} if info else {}),  # what the method recorded of its work (Problem.record)
    }


def _versions(suite: str, evaluator: Evaluator) -> dict[str, str]:
    """``results.versions`` of the row's cluster and graph, with the graph's fingerprint (``OpGraph.digest``) and,
    for a track of a versioned benchmark, ``"<version>:<digest>"`` of the benchmark."""
    found = {**versions(evaluator.cluster, evaluator.graph), "opgraph": evaluator.graph.digest}
    benchmark = placebench.benchmark_of_suite(suite)
    if benchmark is not None:
        found["benchmark"] = f"{benchmark.name}:{benchmark.digest}"
    return found


def _simulated(evaluator: Evaluator, placement: np.ndarray, m: Measurement) -> dict[str, Any]:
    """For a measured row, ``simulated_s``: the simulator's step time of the same placement on the same cluster
    (None where it fails), so that every measured time has its prediction beside it."""
    if evaluator.runtime != "measured":
        return {}
    simulator = Evaluator(evaluator.graph, evaluator.cluster, "sim")
    try:
        predicted = simulator(placement)
    finally:
        simulator.close()
    return {"simulated_s": float(predicted.runtime_s) if predicted.ok else None}


def _anchor(evaluator: Evaluator) -> dict[str, Any]:
    """For a measured row, ``anchor_s``: the step time of the task's anchor placement (every group on device 0,
    ``results.ANCHOR_DEVICE``) measured right after the row's own placement, on the same workers (None where no
    such placement is allowed or its measurement fails). Measured step times drift with the machine's state (its
    other load, a virtual machine's host), the ratio of two placements measured back to back much less, so a
    measured row is scored against the anchor of its own run (``score``)."""
    allowed = np.asarray(allowed_devices(evaluator.graph, evaluator.cluster), bool)
    if not allowed[:, ANCHOR_DEVICE].all():
        return {"anchor_s": None}
    m = evaluator(anchor_placement(allowed.shape[0]))
    return {"anchor_s": float(m.runtime_s) if m.ok and math.isfinite(m.runtime_s) else None}


@dataclass(frozen=True)
class Run:
    """One row to make: ``spec`` on ``task`` with ``seed`` and ``budget`` evaluations."""

    task: Task
    spec: MethodSpec
    seed: int
    budget: int


def _budgets(budget: int | Sequence[int]) -> list[int]:
    """``budget`` as a list of budgets, each an integer >= 0 given once (ValueError naming the bad one)."""
    budgets = [budget] if isinstance(budget, (int, np.integer)) or not isinstance(budget, Sequence) else list(budget)
    if not budgets:
        raise ValueError("budget=[]: give at least one budget (runtime evaluations, 0 for zero-shot methods)")
    for value in budgets:
        if expected_number(value, integer=True):
            raise ValueError(f"budget={value!r}; expected a number of runtime evaluations >= 0 (0: zero-shot, "
                             f"methods that evaluate nothing)")
    _refuse_repeats("budget", budgets)
    return [int(value) for value in budgets]


def _check_workers(workers: int | None, ray_address: str | None) -> None:
    """ValueError naming ``workers`` unless it is None or an integer >= 1, or ``ray_address`` unless None or a
    non-empty string (its cluster is reached only when the run starts)."""
    if workers is not None and expected_number(workers, integer=True, minimum=1):
        raise ValueError(f"workers={workers!r}; expected an integer >= 1 (worker processes, or Ray actors with "
                         "ray_address), or None")
    if ray_address is not None and not (isinstance(ray_address, str) and ray_address.strip()):
        raise ValueError(f"ray_address={ray_address!r}; expected 'auto', 'host:port', 'ray://host:port' or 'local' "
                         "(a Ray instance of this machine on 127.0.0.1), or None")


def plan_runs(tasks: Sequence[Task], methods: Sequence[str | MethodSpec], *, budget: int | Sequence[int] = DEFAULT_BUDGET,
              seeds: Sequence[int] = (0,)) -> list[Run]:
    """Every (task, method, seed, budget) in the order a serial run makes them, each argument checked first."""
    specs = _method_specs(methods)
    budgets = _budgets(budget)
    seeds = list(seeds)
    for seed in seeds:
        expected = expected_number(seed, integer=True)
        if expected:
            raise ValueError(f"seeds={seeds!r}: seed {seed!r}; {expected}")
    _refuse_repeats("seeds", seeds)
    return [Run(task, spec, int(seed), b) for b in budgets for task in tasks for spec in specs for seed in seeds]


def run_suite(suite: str, methods: Sequence[str | MethodSpec], results: str | os.PathLike, *,
              tasks: Sequence[Task] | None = None, budget: int | Sequence[int] = DEFAULT_BUDGET,
              seeds: Sequence[int] = (0,), progress: bool = True, workers: int | None = None,
              ray_address: str | None = None) -> list[dict[str, Any]]:
    """Run every method (a spec as ``pe.method`` takes it, or "all") on every task of ``suite`` for every seed and
    budget (one budget or a list); return the rows written now. ``tasks`` gives the tasks directly, ``suite`` then
    being the name the rows carry.

    ``workers`` > 1 makes the rows in that many worker processes on this machine, ``ray_address`` (``"auto"``,
    ``"host:port"``, or ``"local"`` for a Ray instance of this machine kept on 127.0.0.1) on the actors of a Ray
    cluster (``workers`` of them, default one per CPU of the cluster); rows are written as they arrive and equal a
    serial run's but for their wall times (:mod:`.distributed`). Without either, this process makes them in turn."""
    suite, tasks = resolve_suite(suite, tasks)
    runs = plan_runs(tasks, methods, budget=budget, seeds=seeds)
    _check_workers(workers, ray_address)
    with ResultsWriter(results) as writer:
        todo = [run for run in runs
                if (suite, run.task.name, str(run.spec), run.seed, run.budget) not in writer.finished]
        if (workers is None or workers == 1) and ray_address is None:
            rows = serial_rows(suite, progress_bar(todo, suite, progress))
        else:
            from .distributed import parallel_rows  # it imports this module (run_one, serial_rows)

            rows = parallel_rows(suite, todo, workers=workers, ray_address=ray_address, progress=progress)
        written = []
        for row in rows:
            writer.append(row)
            written.append(row)
        return written


def progress_bar(todo: list[Run], suite: str, progress: bool) -> Iterator[Run]:
    """``todo`` with a progress bar that names the run in hand."""
    bar = tqdm(todo, desc=f"suite {suite}", unit="run", disable=not progress)
    for run in bar:
        bar.set_postfix_str(f"{run.task.name} {run.spec} seed {run.seed} budget {run.budget}")
        yield run


def serial_rows(suite: str, runs: Iterable[Run]) -> Iterator[dict[str, Any]]:
    """The row of each run in turn, made in this process (one Evaluator per task, closed at the end)."""
    evaluators: dict[str, Evaluator] = {}
    try:
        for run in runs:
            yield run_one(suite, run, evaluators)
    finally:
        for evaluator in evaluators.values():
            evaluator.close()


def task_evaluator(task: Task, evaluators: dict[str, Evaluator], costs: np.ndarray | None = None) -> Evaluator:
    """The Evaluator of ``task`` in ``evaluators`` (one per task name), made there on first use; ``costs``, the op
    seconds when the caller has them already, spare computing them (the analytical costs import TensorFlow)."""
    evaluator = evaluators.get(task.name)
    if evaluator is None:
        evaluator = evaluators[task.name] = Evaluator(load_task_graph(task.benchmark, task.graph_options),
                                                      load_cluster(task.cluster), task.runtime, costs=costs)
    return evaluator


def run_one(suite: str, run: Run, evaluators: dict[str, Evaluator]) -> dict[str, Any]:
    """The row of one method on one task, seed and budget (a method that raises gives a method_error row, or an
    infrastructure or configuration row that a rerun does again); ``evaluators`` caches one Evaluator per task."""
    task, spec, seed, budget = run.task, run.spec, run.seed, run.budget
    evaluator = task_evaluator(task, evaluators)
    problem = Problem(graph=evaluator.graph, cluster=evaluator.cluster, evaluator=evaluator,
                      benchmark=task.benchmark, budget=budget, rng=np.random.default_rng(seed))
    try:
        solution = solve(spec, problem)
    except InfrastructureError as error:  # not the method's failure: recorded, and redone by a rerun
        row = make_row(suite, task, evaluator, spec, seed, budget, [], None, problem.evaluations, 0.0,
                   evaluator.lower_bound(), failure=INFRASTRUCTURE, message=str(error))
    except MethodConfigError as error:  # the method's configuration, not its result: redone by a rerun too
        row = make_row(suite, task, evaluator, spec, seed, budget, [], None, problem.evaluations, 0.0,
                   evaluator.lower_bound(), failure=CONFIGURATION, message=str(error))
    except Exception as error:  # noqa: BLE001 - any method failure is recorded, never fatal
        row = make_row(suite, task, evaluator, spec, seed, budget, [], None, problem.evaluations, 0.0,
                   evaluator.lower_bound(), failure="method_error", message=f"{type(error).__name__}: {error}")
    else:
        m = evaluator(solution.placement)
        row = make_row(suite, task, evaluator, spec, seed, budget, solution.placement.tolist(), m,
                   solution.evaluations, solution.wall_s, evaluator.lower_bound(), anytime=solution.improvements,
                   info=dict(solution.info))
        row.update(_simulated(evaluator, solution.placement, m))
    if evaluator.runtime == "measured" and row["failure"] not in UNFINISHED:
        row.update(_anchor(evaluator), host=host_description())
    return row
