"""The one interface every placement method answers: ``method(problem) -> placement``.

A :class:`Problem` is what a method may look at: the grouped graph, the cluster, the analytical
op costs, a seeded random generator, and ``problem.evaluate(placement)``, the runtime oracle,
which counts evaluations and stops the method once its budget is spent. ``solve(method, problem)``
runs a method and reports the placement, the evaluations it used and its wall time.

A method is any callable taking a Problem and returning one device index per group (an int
array of length ``problem.graph.n_groups``). Third-party methods plug in by import path,
``"package.module:function"`` (see :func:`resolve_method`).

A method may take keyword-only arguments; a *method spec* names one with its arguments:
``pe.method("hill_climbing", start="best_heuristic")`` in Python, ``hill_climbing@start=best_heuristic``
on the command line (:class:`MethodSpec`; ``@`` because ``:`` already separates a module from its
callable and no shell expands ``@``, ``,`` or ``=``). A spec is checked against the method's signature
when it is made, before any run. ``PRESETS`` names built-in variants (``hill_climbing_warm``, the
agents' former wrappers), each one method with arguments.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import numbers
import os
import re
import time
import types
import typing
from collections import abc
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .cluster import Cluster
from .cluster.checks import bad_argument, check_number
from .costs import OpCosts
from .errors import BudgetExhausted, MethodArgumentError, UnknownMethodError
from .evaluation import Evaluator, placement_rows
from .opgraph import OpGraph
from .placement import Measurement, allowed_devices, check_placement, raise_on_infrastructure_failure

# The built-in methods by name, one per algorithm, as import paths: placement_env never imports baselines or agents
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
    "cp_sat": "baselines.exact:cp_sat",
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
    # What the method reports of its own work (``record``), kept in its results row as ``method_info``.
    info: dict[str, Any] = field(default_factory=dict)

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

    def record(self, **values: Any) -> None:
        """Keep facts of the method's own work in its results row (``method_info``): a number, string, bool or
        None per name, e.g. a solver's makespan and proven bound; a MethodArgumentError for anything else."""
        for key, value in values.items():
            if not (value is None or isinstance(value, (bool, str)) or
                    (isinstance(value, numbers.Real) and math.isfinite(float(value)))):
                raise MethodArgumentError(f"record({key}={value!r}): expected a finite number, a str, a bool or None")
            self.info[key] = value.item() if isinstance(value, np.generic) else value

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
    info: Mapping[str, Any] = field(default_factory=dict)  # see Problem.record


Method = Callable[[Problem], Any]


# ---- method specs: a method and its keyword arguments ----
_SPEC_SEPARATOR = "@"  # name@key=value,key=value: '@' is in no method name or import path, and no shell expands it
_BARE_WORD = re.compile(r"[A-Za-z_./~+-][A-Za-z0-9_./~+:-]*")  # a string value written without quotes
_MAX_DEPTH = 16  # how deeply a method argument's lists and objects may nest


class MethodSpec:
    """A method with keyword arguments: ``name`` is a name of ``METHODS`` or ``PRESETS`` or a third-party
    ``"package.module:callable"``; ``args`` the keyword arguments it is called with, JSON values (what a results
    row records as ``method_args``). ``str(spec)`` is its command-line spelling and its label in reports,
    ``name@key=value,...`` with the keys sorted (:meth:`parse` reads it back). Specs are equal when their labels
    are. Immutable; ``pe.method(...)`` makes one checked against the method's signature."""

    __slots__ = ("name", "args", "_label")

    def __init__(self, name: str, args: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name or _SPEC_SEPARATOR in name or name != name.strip():
            raise MethodArgumentError(f"method name {name!r}: expected a non-empty name without {_SPEC_SEPARATOR!r} "
                                      f"or surrounding spaces (a name of METHODS or PRESETS, or 'module:callable')")
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise MethodArgumentError(f"method {name!r}: args={args!r}; expected a mapping of keyword to value")
        checked = {}
        for key in sorted(args, key=str):
            if not isinstance(key, str) or not key.isidentifier():
                raise MethodArgumentError(f"method {name!r}: argument name {key!r}; expected a Python identifier")
            checked[key] = _json_value(args[key], f"method {name!r}: {key}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", MappingProxyType(checked))
        label = name + (_SPEC_SEPARATOR + ",".join(f"{k}={format_value(v)}" for k, v in checked.items()) if checked
                        else "")
        object.__setattr__(self, "_label", label)

    @classmethod
    def parse(cls, text: str) -> "MethodSpec":
        """The spec written ``name`` or ``name@key=value,key=value`` (see :func:`parse_value` for values); a
        MethodArgumentError naming what is malformed. Only the spelling is checked, not the method."""
        if not isinstance(text, str):
            raise MethodArgumentError(f"method {text!r}: expected a str, name or name@key=value,...")
        name, separator, rest = text.partition(_SPEC_SEPARATOR)
        if not separator:
            return cls(text)
        if not name:
            raise MethodArgumentError(f"method {text!r}: no name before {_SPEC_SEPARATOR!r}; write "
                                      f"name{_SPEC_SEPARATOR}key=value,key=value")
        if not rest:
            raise MethodArgumentError(f"method {text!r}: nothing after {_SPEC_SEPARATOR!r}; write "
                                      f"name{_SPEC_SEPARATOR}key=value,key=value (or the name alone)")
        args: dict[str, Any] = {}
        for item in _split_items(rest, text):
            key, equals, value = item.partition("=")
            if not equals:
                raise MethodArgumentError(f"method {text!r}: {item!r} has no '='; write key=value")
            if not key.isidentifier():
                raise MethodArgumentError(f"method {text!r}: argument name {key!r}; expected a Python identifier")
            if key in args:
                raise MethodArgumentError(f"method {text!r}: {key} given more than once; give it once")
            args[key] = parse_value(value, f"method {text!r}: {key}")
        return cls(name, args)

    def __str__(self) -> str:
        return self._label

    def __repr__(self) -> str:
        return f"MethodSpec({self.name!r}, {dict(self.args)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MethodSpec) and other._label == self._label

    def __hash__(self) -> int:
        return hash(self._label)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a MethodSpec is immutable; make another (pe.method(name, **args))")

    def __reduce__(self) -> tuple:  # picklable (worker processes), despite __slots__ and __setattr__
        return (MethodSpec, (self.name, dict(self.args)))


def _json_value(value: Any, where: str, depth: int = 0) -> Any:
    """``value`` as a JSON value (a tuple as a list, a path as its string); a MethodArgumentError naming ``where``
    for anything JSON cannot hold (a non-finite number, an object, a non-string key)."""
    if depth > _MAX_DEPTH:
        raise MethodArgumentError(f"{where}: nested more than {_MAX_DEPTH} deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _text(value, where)
    if isinstance(value, numbers.Integral):  # an int, or a numpy integer
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise MethodArgumentError(f"{where}={value!r}; expected a finite number")
        return float(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise MethodArgumentError(f"{where}={value!r}; expected an object with string keys")
        return {_text(k, where): _json_value(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
    raise MethodArgumentError(f"{where}={value!r} ({type(value).__name__}); expected a JSON value: null, true or "
                              "false, a number, a string, a list or an object")


def _text(value: str, where: str) -> str:
    """``value`` if it is Unicode text (no lone surrogate, which no UTF-8 file or terminal can hold)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MethodArgumentError(f"{where}={value!r} holds a lone surrogate; expected Unicode text") from None
    return value


def parse_value(text: str, where: str = "value") -> Any:
    """A method argument as written on the command line: JSON (``true``, ``false``, ``null``, a number, a
    ``"quoted string"``, a ``[list]`` or an ``{object}``), else a bare word is that string
    (``start=best_heuristic``)."""
    if not text:
        raise MethodArgumentError(f'{where}: no value; write key=value (an empty string: key="")')
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        if text[0] in "\"[{" or not _BARE_WORD.fullmatch(text):
            raise MethodArgumentError(f"{where}={text}: not a JSON value nor a bare word (letters, digits and _./~+:-"
                                      ", not starting with a digit or ':'); quote a string as JSON, e.g. "
                                      f"{json.dumps(text)}") from None
        return text
    return _json_value(value, where)


def format_value(value: Any) -> str:
    """``value`` written as :func:`parse_value` reads it back: a bare word for a string that can be one, else JSON."""
    if isinstance(value, str) and _BARE_WORD.fullmatch(value):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _split_items(text: str, spec: str) -> list[str]:
    """``text`` cut at the commas outside JSON strings, lists and objects."""
    items, depth, quoted, escaped, begin = [], 0, False, False, 0
    for i, char in enumerate(text):
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth < 0:
                break
        elif char == "," and depth == 0:
            items.append(text[begin:i])
            begin = i + 1
    if quoted or depth != 0:
        raise MethodArgumentError(f"method {spec!r}: unbalanced quotes or brackets after {_SPEC_SEPARATOR!r}")
    return [*items, text[begin:]]


@dataclass(frozen=True)
class Bounds:
    """The range a method's numeric keyword accepts, declared as ``Annotated[int, Bounds(1)]``: checked when a
    spec is read (:func:`method`), so that a value out of range fails before any run, not in every row."""

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False  # the minimum itself is not accepted

    def __contains__(self, value: float) -> bool:
        low_ok = self.minimum is None or (value > self.minimum if self.above else value >= self.minimum)
        return low_ok and (self.maximum is None or value <= self.maximum)

    def __str__(self) -> str:
        parts = [] if self.minimum is None else [f"{'>' if self.above else '>='} {self.minimum:g}"]
        return " and ".join(parts + ([] if self.maximum is None else [f"<= {self.maximum:g}"]))


# Built-in variants: a preset name stands for a method with arguments. The names are the ones results files
# hold, so every stored row still names a method that runs; a spec may add arguments to a preset
# (hill_climbing_warm@max_groups=2) but not change the ones it sets.
PRESETS: dict[str, MethodSpec] = {
    "hill_climbing_warm": MethodSpec("hill_climbing", {"start": "best_heuristic"}),
    "simulated_annealing_warm": MethodSpec("simulated_annealing", {"start": "best_heuristic"}),
    "cross_entropy_warm": MethodSpec("cross_entropy", {"start": "best_heuristic"}),
    "brkga_warm": MethodSpec("brkga", {"start": "best_heuristic"}),
    # The expert as TF 1.x's default (colocate_gradients_with_ops=False) placed it: the backward pass on the first GPU.
    "expert_tf1": MethodSpec("expert", {"gradients": "first_gpu"}),
    "agents.reinforce_seq2seq:place_warm_start": MethodSpec("agents.reinforce_seq2seq:place", {"warm_start": "best"}),
    "agents.reinforce_seq2seq:place_self_imitation": MethodSpec("agents.reinforce_seq2seq:place",
                                                                {"self_imitation": True}),
    "agents.gnn_placer:place_zero_shot": MethodSpec("agents.gnn_placer:place"),
    "agents.gnn_placer:place_zero_shot_smoothed": MethodSpec("agents.gnn_placer:place", {"smooth": True}),
    "agents.gnn_placer:place_zero_shot_refined": MethodSpec("agents.gnn_placer:place", {"refine": "zero_shot"}),
    "agents.gnn_placer:place_refined_best_start": MethodSpec("agents.gnn_placer:place", {"refine": "best_start"}),
    "agents.gnn_placer:place_fine_tune": MethodSpec("agents.gnn_placer:place", {"fine_tune": True}),
    "agents.sb3_harness:place_ppo": MethodSpec("agents.sb3_harness:place", {"algorithm": "PPO"}),
    "agents.sb3_harness:place_a2c": MethodSpec("agents.sb3_harness:place", {"algorithm": "A2C"}),
}

# What ``placement-env run --methods all`` runs: every built-in method, then the presets of built-in methods (the
# warm-started searches), as before presets existed, so its rows keep their names.
BUILT_IN_METHODS: tuple[str, ...] = (*METHODS, *(name for name, spec in PRESETS.items() if spec.name in METHODS))


def method(spec: str | MethodSpec, /, **args: Any) -> MethodSpec:
    """The spec of method ``spec`` (a name, ``"module:callable"``, ``"name@key=value,..."`` or a MethodSpec) with
    ``args`` added, checked against the method: its name resolves, every key is one of its keyword-only parameters
    (any, if it takes ``**kwargs``), every value fits the parameter's annotation (``bool``, ``int``, ``float``,
    ``str``, ``Path``, ``Literal[...]``, unions, lists, ``Annotated[..., Bounds(...)]``) and no keyword-only
    parameter without a default is left out. Returned with its values as the annotations take them (``1`` for a
    float is ``1.0``). UnknownMethodError for a name that does not resolve, MethodArgumentError for the rest."""
    return _bind(_spec(spec, args))[2]


def resolve_method(spec: str | MethodSpec) -> Method:
    """The callable ``problem -> placement`` of a built-in name (``METHODS``), a preset (``PRESETS``),
    ``"module:callable"``, ``"name@key=value,..."`` or a MethodSpec, checked as :func:`method` checks it; a method
    given arguments (or a preset) comes with them bound (a ``functools.partial``)."""
    function, kwargs, _ = _bind(_spec(spec, {}))
    return functools.partial(function, **kwargs) if kwargs else function


def _spec(spec: Any, args: dict[str, Any]) -> MethodSpec:
    if isinstance(spec, MethodSpec):
        given = spec
    elif isinstance(spec, str):
        given = MethodSpec.parse(spec)
    else:
        raise bad_argument("method", spec, "a method name, 'module:callable', 'name@key=value,...' or a MethodSpec")
    clash = sorted(set(given.args) & set(args))
    if clash:
        raise MethodArgumentError(f"method {str(given)!r}: {', '.join(clash)} given twice; give each once")
    return MethodSpec(given.name, {**given.args, **args}) if args else given


def _import(name: str, label: str) -> Callable[..., Any]:
    """The callable a built-in name or ``"module:callable"`` names."""
    if name in METHODS:
        module, attribute = METHODS[name].split(":")
    elif name.count(":") == 1 and all(name.split(":")):
        module, attribute = name.split(":")
    else:
        raise UnknownMethodError(f"unknown method {label!r}; built in: {', '.join(METHODS)}; presets: "
                                 f"{', '.join(PRESETS)}; or a third-party method as 'package.module:callable', each "
                                 f"with arguments as name{_SPEC_SEPARATOR}key=value,key=value")
    try:
        function = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise UnknownMethodError(f"method {label!r}: cannot import {module}:{attribute} ({error})") from None
    if not callable(function):
        raise UnknownMethodError(f"method {label!r}: {module}:{attribute} is not callable")
    return function


def _bind(spec: MethodSpec) -> tuple[Callable[..., Any], dict[str, Any], MethodSpec]:
    """The callable of ``spec``, the keywords to call it with (a preset's and the spec's own, as the annotations
    take them) and the spec with its own values as the annotations take them."""
    label = str(spec)
    target, args = spec.name, dict(spec.args)
    preset = PRESETS.get(spec.name)
    if preset is not None:
        clash = sorted(set(preset.args) & set(args))
        if clash:
            raise MethodArgumentError(
                f"method {label!r}: the preset {spec.name} is {preset} and sets {', '.join(clash)} itself; write "
                f"{preset.name}{_SPEC_SEPARATOR}... with the values you want instead")
        target, args = preset.name, {**preset.args, **args}
    function = _import(target, label)
    kwargs = _check_arguments(function, target, label, args)
    own = {key: _json_value(kwargs[key], key) for key in spec.args}
    return function, kwargs, MethodSpec(spec.name, own)


def _check_arguments(function: Callable[..., Any], target: str, label: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` converted to what ``function``'s keyword-only parameters are annotated to take (see :func:`method`)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): it takes no arguments we can check
        parameters = []
    keywords = {p.name: p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    namespace = getattr(inspect.unwrap(function), "__globals__", {})
    accepted = ", ".join(f"{name} ({_describe(_annotation(p, namespace))})" for name, p in keywords.items())
    kwargs = {}
    for key, value in args.items():
        parameter = keywords.get(key)
        if parameter is None:
            if open_ended:
                kwargs[key] = value
                continue
            raise MethodArgumentError(f"method {label!r}: {target} has no argument {key!r}; it takes "
                                      f"{accepted or 'no arguments'}")
        annotation = _annotation(parameter, namespace)
        try:
            kwargs[key] = _convert(annotation, value)
        except _Rejected:
            raise MethodArgumentError(f"method {label!r}: {key}={format_value(value)}; {target} accepts "
                                      f"{_describe(annotation)}") from None
    missing = [name for name, p in keywords.items() if p.default is inspect.Parameter.empty and name not in args]
    if missing:
        raise MethodArgumentError(f"method {label!r}: {target} needs "
                                  + ", ".join(f"{name}= ({_describe(_annotation(keywords[name], namespace))})"
                                              for name in missing))
    return kwargs


_UNCHECKED = object()  # an annotation that could not be evaluated: any JSON value is passed on


def _annotation(parameter: inspect.Parameter, namespace: dict[str, Any]) -> Any:
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return _UNCHECKED
    if isinstance(annotation, str):  # from __future__ import annotations
        try:
            return eval(annotation, dict(namespace))  # noqa: S307 - the method's own module's annotation
        except Exception:  # noqa: BLE001 - a name only imported for type checking: the value goes unchecked
            return _UNCHECKED
    return annotation


class _Rejected(Exception):
    """A value that does not fit an annotation."""


def _convert(annotation: Any, value: Any) -> Any:
    """``value`` as ``annotation`` takes it; _Rejected if it does not fit."""
    origin, members = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is _UNCHECKED or annotation is Any:
        return value
    if annotation is None or annotation is type(None):
        if value is None:
            return None
    elif origin is typing.Annotated:
        converted = _convert(members[0], value)
        if not isinstance(converted, (int, float)) or all(
                converted in bounds for bounds in annotation.__metadata__ if isinstance(bounds, Bounds)):
            return converted
    elif origin is typing.Literal:
        if any(value == choice and type(value) is type(choice) for choice in members):
            return value
    elif origin in (typing.Union, types.UnionType):
        for member in members:
            try:
                return _convert(member, value)
            except _Rejected:
                continue
    elif annotation is bool or annotation is str:
        if type(value) is annotation:
            return value
    elif annotation is int:
        if type(value) is int:
            return value
    elif annotation is float:
        if type(value) in (int, float):
            return float(value)
    elif isinstance(annotation, type) and issubclass(annotation, PurePath) or annotation is os.PathLike:
        if isinstance(value, str) and value:
            return Path(value)
    elif origin in (list, tuple, Sequence, abc.Sequence) or annotation in (list, tuple):
        if isinstance(value, list):
            if origin is tuple and members and members[-1] is not Ellipsis:
                if len(members) != len(value):
                    raise _Rejected
                return tuple(_convert(m, v) for m, v in zip(members, value))
            item = members[0] if members else _UNCHECKED
            converted = [_convert(item, v) for v in value]
            return tuple(converted) if tuple in (origin, annotation) else converted
    elif origin in (dict, Mapping, abc.Mapping) or annotation is dict:
        if isinstance(value, dict):
            item = members[1] if len(members) == 2 else _UNCHECKED
            return {k: _convert(item, v) for k, v in value.items()}
    raise _Rejected


def _describe(annotation: Any) -> str:
    """What ``annotation`` accepts, in words."""
    origin, members = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is _UNCHECKED or annotation is Any:
        return "any JSON value"
    if annotation is None or annotation is type(None):
        return "null"
    if origin is typing.Annotated:
        bounds = [str(b) for b in annotation.__metadata__ if isinstance(b, Bounds)]
        return " ".join([_describe(members[0]), *bounds])
    if origin is typing.Literal:
        return "one of " + ", ".join(format_value(choice) for choice in members)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(member) for member in members)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string", os.PathLike: "a path"}
    if annotation in words:
        return words[annotation]
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "a path"
    if origin in (list, tuple, Sequence, abc.Sequence) or annotation in (list, tuple):
        item = members[0] if len(members) == 1 or len(members) == 2 and members[1] is Ellipsis else None
        return "a list" + ("" if item is None else f" of {_describe(item)}")
    if origin in (dict, Mapping, abc.Mapping) or annotation is dict:
        return "an object"
    return f"{getattr(annotation, '__name__', annotation)} (which no JSON value is)"


def solve(method: Method | str | MethodSpec, problem: Problem, name: str | None = None) -> Solution:
    """Run ``method`` (a callable, or a spec as :func:`resolve_method` takes it) on ``problem``; if it spends its
    budget, the best placement evaluated so far counts. The solution's ``method`` is ``name``, else the spec's
    label (``str(pe.method(...))``) or the callable's name."""
    if not isinstance(problem, Problem):
        raise bad_argument("problem", problem, "a Problem (pe.Problem.make(graph, cluster, ...))")
    if name is not None and not isinstance(name, str):
        raise bad_argument("name", name, "None or a str")
    if isinstance(method, (str, MethodSpec)):
        function, kwargs, spec = _bind(_spec(method, {}))
        function = functools.partial(function, **kwargs) if kwargs else function
        label = name or str(spec)
    elif callable(method):
        function, label = method, name or getattr(method, "__name__", repr(method))
    else:
        raise bad_argument("method", method, "a method name, 'module:callable', 'name@key=value,...', a MethodSpec, "
                                             "or a callable problem -> placement")
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
                    wall_s=wall, improvements=tuple(problem.improvements), info=dict(problem.info))
