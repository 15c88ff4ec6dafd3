"""The simplest placements: everything on one device, and random search within a budget."""
from __future__ import annotations

import numpy as np

from placement_env import Problem, random_placements, single_device

RANDOM_SEARCH_DEFAULT_BUDGET = 100


def _first_of_kind(problem: Problem, kind: str) -> int:
    for d, device in enumerate(problem.cluster.devices):
        if device.kind == kind:
            return d
    raise ValueError(f"cluster {problem.cluster.name!r} has no {kind} device")


def single_cpu(problem: Problem) -> np.ndarray:
    """Every group on the first CPU."""
    return single_device(problem.graph, problem.cluster, _first_of_kind(problem, "CPU"))


def single_gpu(problem: Problem) -> np.ndarray:
    """Every group on the first GPU, except groups with an op that has no GPU kernel (CPU)."""
    return single_device(problem.graph, problem.cluster, _first_of_kind(problem, "GPU"))


def random_candidates(problem: Problem, n: int) -> np.ndarray:
    """``n`` random placements [n, n_groups] from ``problem.rng``: the first ``n - n // 2`` uniform per group,
    the rest with Dirichlet device weights (lopsided to even); every group on an allowed device."""
    return np.concatenate([
        random_placements(problem.graph, problem.cluster, n - n // 2, problem.rng),
        random_placements(problem.graph, problem.cluster, n // 2, problem.rng, spread="dirichlet"),
    ])


def random_search(problem: Problem) -> np.ndarray:
    """The fastest of ``budget`` random placements (100 when the budget is unlimited), drawn by
    :func:`random_candidates`."""
    n = RANDOM_SEARCH_DEFAULT_BUDGET if problem.budget is None else problem.budget_left
    n = int(n)
    if n < 1:
        raise ValueError("random_search needs a budget of at least one evaluation")
    candidates = random_candidates(problem, n)
    best, best_runtime = candidates[0], float("inf")
    for placement in candidates:
        m = problem.evaluate(placement)
        if m.ok and m.runtime_s < best_runtime:
            best, best_runtime = placement, m.runtime_s
    return best
