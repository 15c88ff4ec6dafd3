"""Local search baselines: hill climbing with restarts, and simulated annealing.

Both walk from one placement by random moves (``baselines.search.Moves``: 1..``max_groups``
groups, 4 by default, one group about half the time, each to another allowed device) and return
the fastest placement they evaluated. ``start=`` is ``"scratch"`` (the fastest single device) or
``"best_heuristic"`` (the fastest zero-budget heuristic; the presets ``hill_climbing_warm`` and
``simulated_annealing_warm`` of ``placement_env.PRESETS``); see ``baselines.search``.

Hill climbing (first improvement): a move is kept when its placement is faster than the current
one. After ``RESTART_AFTER`` (200) moves in a row that were not faster (about the number of
single-group moves from a placement of a 100-group graph on three devices), it restarts from the
best placement so far with ``RESTART_GROUPS`` (8) groups moved at once.

Simulated annealing: a move is kept when it is faster, or, when it is slower by a relative
runtime change ``delta = runtime / current - 1``, with probability ``exp(-delta / T)``. A placement
that fails (out of memory, no kernel) is never kept. The temperature falls geometrically with the
evaluations spent, from ``T0 = 0.003 / ln 2`` (a 0.3% slower move is kept with probability 0.5, a
1% slower one with probability 0.1) to ``T0 * FINAL_TEMPERATURE_RATIO`` (1e-3) when the budget is
spent. The start is cool because good placements sit within a few percent of each other: a
hotter walk leaves a good start and does not find its way back within a budget of about a
thousand evaluations (docs/findings.md). Since ``delta`` is relative, the schedule is the same for
a 1 ms and a 1 s step (in seconds, the start temperature is T0 times the start placement's runtime).
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np

from placement_env import Bounds, Problem

from .search import Moves, Scores, Start, check_start, search_budget, start_placement

__all__ = ["hill_climbing", "simulated_annealing"]

RESTART_AFTER = 200
RESTART_GROUPS = 8
INITIAL_TEMPERATURE = 0.003 / math.log(2)
FINAL_TEMPERATURE_RATIO = 1e-3


def hill_climbing(problem: Problem, *, start: Start = "scratch", max_groups: Annotated[int, Bounds(1)] = 4,
                  restart_after: Annotated[int, Bounds(1)] = RESTART_AFTER,
                  restart_groups: Annotated[int, Bounds(1)] = RESTART_GROUPS) -> np.ndarray:
    """First-improvement hill climbing with perturbation restarts (see the module docstring)."""
    scores, current, moves = _walk_start(problem, "hill_climbing", start, max_groups)
    if scores.exhausted or not moves.possible:
        return scores.best_or(current)
    current_runtime, failures = scores.runtime(current), 0
    while not scores.exhausted:
        if failures >= restart_after:
            current, failures = moves(scores.best_or(current), restart_groups), 0
            current_runtime = scores.runtime(current)
            continue
        candidate = moves(current)
        runtime = scores.runtime(candidate)
        if runtime < current_runtime:
            current, current_runtime, failures = candidate, runtime, 0
        else:
            failures += 1
    return scores.best_or(current)


def simulated_annealing(problem: Problem, *, start: Start = "scratch", max_groups: Annotated[int, Bounds(1)] = 4,
                        initial_temperature: Annotated[float, Bounds(0, above=True)] = INITIAL_TEMPERATURE,
                        final_temperature_ratio: Annotated[float, Bounds(0, 1, above=True)] = FINAL_TEMPERATURE_RATIO,
                        ) -> np.ndarray:
    """Simulated annealing on the relative runtime change, geometric cooling over the budget."""
    scores, current, moves = _walk_start(problem, "simulated_annealing", start, max_groups)
    if scores.exhausted or not moves.possible:
        return scores.best_or(current)
    current_runtime = scores.runtime(current)
    first, length = problem.evaluations, max(1.0, problem.budget_left - 1)
    while not scores.exhausted:
        progress = min(1.0, (problem.evaluations - first) / length)
        temperature = initial_temperature * final_temperature_ratio ** progress
        candidate = moves(current)
        runtime = scores.runtime(candidate)
        if _accept(runtime, current_runtime, temperature, problem.rng):
            current, current_runtime = candidate, runtime
    return scores.best_or(current)


def _walk_start(problem: Problem, name: str, start: str, max_groups: int) -> tuple[Scores, np.ndarray, Moves]:
    """What a walk begins with: its scores (the budget), its start placement and its move generator."""
    check_start(start)
    scores = Scores(problem, search_budget(problem, name))
    return scores, start_placement(problem, scores, start), Moves(problem.allowed, problem.rng, max_groups)


def _accept(runtime: float, current: float, temperature: float, rng: np.random.Generator) -> bool:
    """Metropolis acceptance on the relative change; a failed placement (inf) is never accepted."""
    if not math.isfinite(runtime):
        return False
    if not math.isfinite(current) or runtime <= current:
        return True
    return rng.random() < math.exp(-(runtime / current - 1.0) / temperature)
