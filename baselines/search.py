"""What the plain-search baselines share: where a search starts, its evaluations, and its moves.

The searches (``baselines.local_search``: hill climbing and simulated annealing;
``baselines.population_search``: the cross-entropy method and BRKGA) spend ``problem.budget``
runtime evaluations, always through ``problem.evaluate``, and return the fastest placement they
evaluated. They need a finite budget (:func:`search_budget`).

Starts (``start=``):

* ``"scratch"``: the fastest single-device placement that runs. Every device is tried (each
  evaluation counts against the budget), in the order of the cost model's total compute seconds,
  so a budget smaller than the number of devices tries the most promising ones. With a budget of
  0 the search returns the first of that order unevaluated. (The population methods start from
  random placements instead; see their module.)
* ``"best_heuristic"``: the fastest of the zero-budget heuristics :data:`HEURISTICS`, each made on
  a copy of the problem with budget 0 (a heuristic that raises, e.g. the expert on a graph it has
  no layout for or Scotch when its binary is missing, is skipped) and evaluated through
  ``problem.evaluate``, counting against the budget (identical placements are evaluated once).
  With a budget of 0 the search returns the first heuristic placement that could be made,
  unevaluated. If no heuristic makes a placement that runs, the search starts from scratch.

A placement evaluated once is not evaluated again (:class:`Scores` remembers its runtime), so
revisiting a placement costs no budget. A search that only proposes placements it has seen stops
after ``PROPOSALS_PER_EVALUATION`` proposals per evaluation of its budget.
"""
from __future__ import annotations

from typing import Iterator, Literal, get_args

import numpy as np

from placement_env import ZERO_BUDGET_HEURISTICS, Problem, check_placement, resolve_method, single_device

__all__ = ["Start", "STARTS", "HEURISTICS", "PROPOSALS_PER_EVALUATION", "Scores", "Moves", "check_start",
           "search_budget", "single_device_start", "heuristic_start", "start_placement"]

Start = Literal["scratch", "best_heuristic"]  # the annotation of ``start=``: a method spec is checked against it
STARTS: tuple[str, ...] = get_args(Start)
HEURISTICS = ZERO_BUDGET_HEURISTICS
PROPOSALS_PER_EVALUATION = 50


def check_start(start: str) -> None:
    """ValueError unless ``start`` is one of :data:`STARTS`."""
    if start not in STARTS:
        raise ValueError(f"start={start!r}; expected one of {', '.join(map(repr, STARTS))}")


def search_budget(problem: Problem, method: str) -> int:
    """The evaluations ``method`` may still spend; ValueError when the budget is unlimited (None)."""
    if problem.budget is None:
        raise ValueError(f"{method} needs a finite budget, got budget=None (unlimited): set the problem's budget "
                         f"to a number of runtime evaluations")
    return max(0, int(problem.budget_left))


class Scores:
    """Runtime (seconds; inf when the placement fails) of every placement a search with ``budget``
    evaluations (from :func:`search_budget`) evaluated.

    ``best`` / ``best_runtime``: the fastest placement that ran (None / inf before one has).
    ``exhausted``: the budget is spent, or the search proposed ``PROPOSALS_PER_EVALUATION`` placements
    per evaluation of its budget (it keeps proposing placements it has already seen).
    """

    def __init__(self, problem: Problem, budget: int) -> None:
        self.problem = problem
        self.memo: dict[bytes, float] = {}
        self.best: np.ndarray | None = None
        self.best_runtime = float("inf")
        self.proposals = 0
        self.max_proposals = PROPOSALS_PER_EVALUATION * max(1, budget)

    @property
    def exhausted(self) -> bool:
        return self.problem.budget_left <= 0 or self.proposals >= self.max_proposals

    def runtime(self, placement: np.ndarray) -> float:
        """The runtime of ``placement`` (an int64 array), evaluating it only if it is new."""
        self.proposals += 1
        key = placement.tobytes()
        runtime = self.memo.get(key)
        if runtime is None:
            m = self.problem.evaluate(placement)
            runtime = self.memo[key] = m.runtime_s if m.ok else float("inf")
            if runtime < self.best_runtime:
                self.best, self.best_runtime = placement.copy(), runtime
        return runtime

    def best_or(self, fallback: np.ndarray) -> np.ndarray:
        """The fastest placement that ran, or ``fallback`` when none has."""
        return fallback if self.best is None else self.best


class Moves:
    """Random moves: 1..``max_groups`` distinct groups, each to another device it is allowed on.

    The number of groups moved is m with probability proportional to 2^-m (for 4 groups: 8/15,
    4/15, 2/15, 1/15), so one group about half the time and each extra group half as likely.
    Only groups with more than one allowed device move.
    """

    def __init__(self, allowed: np.ndarray, rng: np.random.Generator, max_groups: int = 4) -> None:
        if max_groups < 1:
            raise ValueError(f"max_groups={max_groups}; expected at least 1 group per move")
        self.allowed, self.rng = allowed, rng
        self.movable = np.flatnonzero(allowed.sum(axis=1) > 1)
        weights = 0.5 ** np.arange(1, max_groups + 1)
        self.size_cumulative = np.cumsum(weights / weights.sum())

    @property
    def possible(self) -> bool:
        """Whether any group can move (some group has two or more allowed devices)."""
        return self.movable.size > 0

    def __call__(self, placement: np.ndarray, n_groups: int | None = None) -> np.ndarray:
        """A copy of ``placement`` with ``n_groups`` groups moved (a random size when None)."""
        if n_groups is None:
            n_groups = int(np.searchsorted(self.size_cumulative, self.rng.random(), side="right")) + 1
        n_groups = min(n_groups, self.movable.size)
        groups = self.rng.choice(self.movable, size=n_groups, replace=False)
        options = self.allowed[groups]
        options[np.arange(n_groups), placement[groups]] = False
        cumulative = np.cumsum(options, axis=1)
        u = self.rng.random(n_groups) * cumulative[:, -1]
        moved = placement.copy()
        moved[groups] = (cumulative <= u[:, None]).sum(axis=1)
        return moved


def single_device_start(problem: Problem, scores: Scores) -> np.ndarray:
    """The fastest single-device placement that runs, trying devices in the cost model's order of
    total compute seconds while the budget lasts; the first of that order when none ran."""
    order = np.argsort(problem.costs.seconds.sum(axis=0), kind="stable")
    candidates = [single_device(problem.graph, problem.cluster, int(d)) for d in order]
    return _fastest(iter(candidates), scores, default=candidates[0])


def _fastest(candidates: Iterator[np.ndarray], scores: Scores, default: np.ndarray | None) -> np.ndarray | None:
    """The fastest of ``candidates`` evaluated while the budget lasts (``default`` if none ran)."""
    best, best_runtime = default, float("inf")
    for placement in candidates:
        if scores.exhausted:
            break
        runtime = scores.runtime(placement)
        if runtime < best_runtime:
            best, best_runtime = placement, runtime
    return best


def _heuristic_placements(problem: Problem) -> Iterator[np.ndarray]:
    """The placements of :data:`HEURISTICS` that can be made, in that order (int64 arrays), each made
    when asked for."""
    for name in HEURISTICS:
        copy = Problem(graph=problem.graph, cluster=problem.cluster, evaluator=problem.evaluator,
                       benchmark=problem.benchmark, budget=0, rng=problem.rng)
        try:
            placement = np.array(check_placement(problem.graph, problem.cluster, resolve_method(name)(copy)))
        except Exception:  # noqa: BLE001 - a heuristic that cannot place (or wants evaluations) is skipped
            continue
        yield placement


def heuristic_start(problem: Problem, scores: Scores) -> np.ndarray | None:
    """The fastest heuristic placement that runs (the first one made when the budget is 0); None when
    no heuristic made one (or none ran), so that the search starts from scratch."""
    if scores.exhausted:
        return next(_heuristic_placements(problem), None)
    return _fastest(_heuristic_placements(problem), scores, default=None)


def start_placement(problem: Problem, scores: Scores, start: str) -> np.ndarray:
    """Where a single-placement search starts: the best heuristic (``"best_heuristic"``, falling back
    to scratch) or the fastest single device (``"scratch"``)."""
    placement = heuristic_start(problem, scores) if start == "best_heuristic" else None
    return single_device_start(problem, scores) if placement is None else placement
