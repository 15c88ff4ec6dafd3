"""``cp_sat``: the placement CP-SAT finds on a model of placement and schedule (``pe.solve_exact``).

The solver starts from ``start`` (the best zero-budget heuristic, as the warm searches do, or the fastest single
device) and works for ``time_limit_s`` seconds on ``workers`` threads. It optimises ``model``: the relaxed model
of ops (the default), which leaves out queueing on links and streams, the executor's order and memory other than
variables, or the block model, which runs each group's ops at one level (and in one of ``slices`` parts of the
critical path) as one block (``docs/optimality.md``);
neither is the simulator, so its placements run differently there than in the model; the method evaluates
the solver's placements, the last found first, while its budget of evaluations lasts, and returns the fastest that
ran (the start when none beat it). The row records the model, the solver's makespan of its last placement, its proven bound
and status, and its seconds (``method_info``).
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from placement_env import Problem, solve_exact

from .search import Scores, Start, check_start, search_budget, start_placement

__all__ = ["cp_sat"]


def cp_sat(problem: Problem, *, time_limit_s: float = 60.0, start: Start = "best_heuristic",
           workers: int = 1, model: Literal["relaxed", "blocks"] = "relaxed", slices: int = 1) -> np.ndarray:
    """The fastest of the start and CP-SAT's placements of the relaxed model, as the simulator runs them."""
    check_start(start)
    scores = Scores(problem, search_budget(problem, "cp_sat"))
    first = start_placement(problem, scores, start)
    result = solve_exact(problem.graph, problem.cluster, problem.costs, time_limit_s=time_limit_s, start=first,
                         workers=workers, model=model, slices=slices)
    problem.record(solver_model=model if model == "relaxed" else f"blocks/{slices}", solver_status=result.status, solver_makespan_s=result.makespan_s if result.placement is not None
                   else None, solver_bound_s=result.bound_s if np.isfinite(result.bound_s) else None,
                   solver_s=round(result.solver_s, 3), solver_solutions=len(result.solutions))
    candidates = list(reversed(result.solutions))
    if result.placement is not None and not any(np.array_equal(result.placement, c) for c in candidates):
        candidates.insert(0, result.placement)
    for placement in candidates:
        if scores.exhausted:
            break
        scores.runtime(np.asarray(placement, np.int64))
    if scores.best is not None:
        return scores.best
    return first if result.placement is None else result.placement  # nothing evaluated ran (or no budget)
