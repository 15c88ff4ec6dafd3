"""The one interface every placement method answers: ``method(problem) -> placement``.

A :class:`Problem` is what a method may look at: the grouped graph, the cluster, the analytical
op costs, a seeded random generator, and ``problem.evaluate(placement)``, the runtime oracle,
which counts evaluations and stops the method once its budget is spent. ``solve(method, problem)``
runs a method and reports the placement, the evaluations it used and its wall time.

A method is any callable taking a Problem and returning one device index per group (an int
array of length ``problem.graph.n_groups``). Third-party methods plug in by import path,
``"package.module:function"`` (see :func:`resolve_method`).
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .cluster import Cluster
from .cluster.checks import bad_argument, check_number
from .costs import OpCosts
from .errors import BudgetExhausted, UnknownMethodError
from .evaluation import Evaluator, placement_rows
from .opgraph import OpGraph
from .placement import Measurement, allowed_devices, check_placement, raise_on_infrastructure_failure

# The built-in methods by name, as import paths: placement_env never imports baselines or agents
# itself; resolve_method imports a method when it is asked for.
METHODS: dict[str, str] = {
    "single_cpu": "baselines.simple:single_cpu",
    "single_gpu": "baselines.simple:single_gpu",
    "random_search": "baselines.simple:random_search",
    "expert": "baselines.expert:expert",
    "scotch": "baselines.partition:scotch",
    "mincut": "baselines.partition:mincut",
    "metis": "baselines.partition:metis",
    "heft": "baselines.list_scheduling:heft",
    "m_topo": "baselines.list_scheduling:m_topo",
    "m_etf": "baselines.list_scheduling:m_etf",
    "hill_climbing": "baselines.local_search:hill_climbing",
    "simulated_annealing": "baselines.local_search:simulated_annealing",
    "cross_entropy": "baselines.population_search:cross_entropy",
    "brkga": "baselines.population_search:brkga",
    "hill_climbing_warm": "baselines.local_search:hill_climbing_warm",
    "simulated_annealing_warm": "baselines.local_search:simulated_annealing_warm",
    "cross_entropy_warm": "baselines.population_search:cross_entropy_warm",
    "brkga_warm": "baselines.population_search:brkga_warm",
}

# The built-in methods that spend no runtime evaluation (they read the graph and the cost model):
# what warm-started searches and agents start from.
ZERO_BUDGET_HEURISTICS: tuple[str, ...] = ("expert", "mincut", "metis", "scotch", "heft", "m_topo", "m_etf")


@dataclass
class Problem:
    """One placement task as a method sees it.

    ``benchmark``: the benchmark's name (e.g. ``"rnnlm"``, ``"nmt-tiny"``), for methods such as the
    expert placement that know a model's structure. ``budget``: how many runtime evaluations
    ``evaluate`` allows (None: unlimited). ``costs``: per-op seconds on every device, what
    cost-model heuristics (HEFT, m-ETF, ...) use without spending the budget. ``evaluator``: given
    as the runtime, kept as a :class:`CountedEvaluator`, so a method that calls it directly (or its
    ``batch``) is counted and stopped at the budget like ``evaluate``.
    """

    graph: OpGraph
    cluster: Cluster
    evaluator: Evaluator
    benchmark: str = ""
    budget: int | None = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    evaluations: int = 0
    best: Measurement | None = None  # the fastest successful evaluation so far
    # Anytime record: (evaluations so far, best runtime s, seconds since the method started) each
    # time the best improves; ``solve`` restarts the clock when it hands the problem to a method.
    improvements: list[tuple[int, float, float]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def make(cls, graph: OpGraph, cluster: Cluster, *, runtime: str = "sim", benchmark: str = "",
             budget: int | None = None, seed: int = 0, evaluator: Evaluator | None = None) -> "Problem":
        """The problem of ``graph`` on ``cluster`` evaluated by ``evaluator`` (default: an Evaluator with
        ``runtime``), its random generator seeded with ``seed`` (an integer >= 0)."""
        _check_graph_and_cluster(graph, cluster)
        rng = seeded_rng(seed)
        evaluator = evaluator or Evaluator(graph, cluster, runtime)
        return cls(graph=graph, cluster=cluster, evaluator=evaluator, benchmark=benchmark or graph.name,
                   budget=budget, rng=rng)

    @classmethod
    def from_env(cls, env: Any, *, budget: int | None = None, seed: int = 0) -> "Problem":
        """The problem of a DevicePlacementEnv's current graph, evaluated by the env's runtime."""
        unwrapped = getattr(env, "unwrapped", None)
        if not all(hasattr(unwrapped, key) for key in ("graph", "cluster", "evaluator")):
            raise bad_argument("env", env, "a DevicePlacementEnv or a gymnasium wrapper of one")
        rng = seeded_rng(seed)
        return cls(graph=unwrapped.graph, cluster=unwrapped.cluster, evaluator=unwrapped.evaluator,
                   benchmark=unwrapped.graph.name, budget=budget, rng=rng)

    def __post_init__(self) -> None:
        _check_graph_and_cluster(self.graph, self.cluster)
        if not callable(self.evaluator):
            raise bad_argument("evaluator", self.evaluator, "an Evaluator or a callable placement -> Measurement")
        if not isinstance(self.benchmark, str):
            raise bad_argument("benchmark", self.benchmark, "a benchmark name (a str)")
        if self.budget is not None:
            self.budget = check_number(self.budget, "budget", 0, integer=True, error=bad_argument,
                                       rule="None (unlimited) or an integer >= 0 (runtime evaluations)")
        if not isinstance(self.rng, np.random.Generator):
            raise bad_argument("rng", self.rng, "a numpy.random.Generator (e.g. numpy.random.default_rng(seed))")
        # Methods see the runtime only through the counted oracle: ``evaluator`` is a view whose every
        # call is a counted ``evaluate``; the uncounted runtime stays with whoever made the problem.
        self._runtime = self.evaluator._runtime if isinstance(self.evaluator, CountedEvaluator) else self.evaluator
        self.evaluator = CountedEvaluator(self)

    @property
    def costs(self) -> OpCosts:
        """Per-op seconds on every device (reading them spends no evaluation)."""
        return self._runtime.costs

    def lower_bound(self) -> float:
        """``pe.lower_bound`` of this graph and cluster with these costs (spends no evaluation)."""
        return self._runtime.lower_bound()

    @property
    def allowed(self) -> np.ndarray:
        """Bool [n_groups, n_devices]: devices with kernels for every op of the group."""
        return allowed_devices(self.graph, self.cluster)

    @property
    def budget_left(self) -> float:
        return float("inf") if self.budget is None else self.budget - self.evaluations

    def evaluate(self, placement: Any) -> Measurement:
        """The runtime's Measurement of ``placement``; counts against the budget. A measurement the
        machinery failed (``failure="infrastructure"``) raises InfrastructureError and counts nothing."""
        if self.budget_left <= 0:
            raise BudgetExhausted(f"the budget of {self.budget} runtime evaluations is spent")
        m = self._runtime(placement)
        raise_on_infrastructure_failure(m)
        self.evaluations += 1
        self._record(m)
        return m

    def evaluate_batch(self, placements: Any) -> list[Measurement]:
        """Measurements of every row of ``placements`` in one call to the runtime; each counts against the
        budget, and a batch larger than what is left of it is refused whole (BudgetExhausted)."""
        placements = placement_rows(self.graph, placements)
        rows = len(placements)
        if rows > self.budget_left:
            raise BudgetExhausted(f"{rows} evaluations asked, {self.budget_left:g} left of the budget of {self.budget}")
        measurements = self._runtime.batch(placements)
        raise_on_infrastructure_failure(*measurements)
        for m in measurements:
            self.evaluations += 1
            self._record(m)
        return measurements

    def _record(self, m: Measurement) -> None:
        if m.ok and (self.best is None or m.runtime_s < self.best.runtime_s):
            self.best = m
            self.improvements.append((self.evaluations, float(m.runtime_s), time.perf_counter() - self.started))


def seeded_rng(seed: Any) -> np.random.Generator:
    """``numpy.random.default_rng(seed)`` for an integer seed >= 0, else an ArgumentError."""
    return np.random.default_rng(check_number(seed, "seed", 0, integer=True, error=bad_argument))


def _check_graph_and_cluster(graph: Any, cluster: Any) -> None:
    if not isinstance(graph, OpGraph):
        raise bad_argument("graph", graph, "an OpGraph (pe.load_benchmark(name) or pe.from_tf(obj))")
    if not isinstance(cluster, Cluster):
        raise bad_argument("cluster", cluster, "a Cluster (pe.load_cluster(name))")


class CountedEvaluator:
    """``problem.evaluator`` as a method sees it: the Evaluator interface, but every call is a counted
    :meth:`Problem.evaluate` (so no method can spend more than its budget or evaluate unrecorded)."""

    def __init__(self, problem: Problem) -> None:
        self._problem = problem
        self._runtime = problem._runtime

    def __call__(self, placement: Any) -> Measurement:
        return self._problem.evaluate(placement)

    @property
    def runtime(self) -> str:
        """The runtime's name ("sim", "grappler" or "measured")."""
        return self._runtime.runtime

    def batch(self, placements: Any) -> list[Measurement]:
        return self._problem.evaluate_batch(placements)

    @property
    def costs(self) -> OpCosts:
        return self._problem.costs

    def lower_bound(self) -> float:
        return self._problem.lower_bound()

    def close(self) -> None:
        self._runtime.close()


@dataclass(frozen=True)
class Solution:
    """What running a method gave: its placement, and what finding it cost (the evaluations it spent)."""

    method: str
    placement: np.ndarray
    evaluations: int
    wall_s: float
    improvements: tuple[tuple[int, float, float], ...] = ()  # see Problem.improvements


Method = Callable[[Problem], Any]


def resolve_method(name: str) -> Method:
    """A built-in method by name (see ``METHODS``) or ``"module:callable"``."""
    if isinstance(name, str) and name in METHODS:
        module, attribute = METHODS[name].split(":")
    elif isinstance(name, str) and name.count(":") == 1 and all(name.split(":")):
        module, attribute = name.split(":")
    else:
        raise UnknownMethodError(f"unknown method {name!r}; built in: {', '.join(METHODS)}; or a third-party "
                                 f"method as 'package.module:callable'")
    try:
        method = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise UnknownMethodError(f"method {name!r}: cannot import {module}:{attribute} ({error})") from None
    if not callable(method):
        raise UnknownMethodError(f"method {name!r}: {module}:{attribute} is not callable")
    return method


def solve(method: Method | str, problem: Problem, name: str | None = None) -> Solution:
    """Run ``method`` on ``problem``; if it spends its budget, the best placement evaluated so far counts."""
    if not isinstance(problem, Problem):
        raise bad_argument("problem", problem, "a Problem (pe.Problem.make(graph, cluster, ...))")
    if name is not None and not isinstance(name, str):
        raise bad_argument("name", name, "None or a str")
    if not isinstance(method, str) and not callable(method):
        raise bad_argument("method", method, "a method name, 'module:callable', or a callable problem -> placement")
    label = name or (method if isinstance(method, str) else getattr(method, "__name__", repr(method)))
    function = resolve_method(method) if isinstance(method, str) else method
    start = problem.started = time.perf_counter()
    spent_before = problem.evaluations
    try:
        placement = function(problem)
    except BudgetExhausted:
        if problem.best is None:
            raise
        placement = problem.best.placement
    wall = time.perf_counter() - start
    checked = check_placement(problem.graph, problem.cluster, placement)
    return Solution(method=label, placement=np.array(checked), evaluations=problem.evaluations - spent_before,
                    wall_s=wall, improvements=tuple(problem.improvements))
