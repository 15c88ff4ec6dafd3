"""A stand-in third-party placement method, plugged into the harness by import path only."""
from typing import Literal

import numpy as np

from placement_env.placement import Measurement, raise_on_infrastructure_failure, random_placements

CALLS = {"n": 0}


def place(problem):
    """Best of a few random placements, using the problem's budget (like a search agent would)."""
    best, best_runtime = None, np.inf
    for placement in random_placements(problem.graph, problem.cluster, min(5, int(problem.budget_left)), problem.rng):
        m = problem.evaluate(placement)
        if m.ok and m.runtime_s < best_runtime:
            best, best_runtime = placement, m.runtime_s
    return best


def broken(problem):
    raise ValueError("this agent always fails")


def interrupted_after_two(problem):
    """Stops the run (as Ctrl-C would) on its third call."""
    CALLS["n"] += 1
    if CALLS["n"] == 3:
        raise KeyboardInterrupt
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


MACHINERY = {"failures_left": 1}


def machinery_fails_once(problem):
    """Its first call meets a measuring machinery that failed on every retry (as a dead worker would)."""
    if MACHINERY["failures_left"]:
        MACHINERY["failures_left"] -= 1
        raise_on_infrastructure_failure(Measurement(runtime_s=float("nan"), ok=False, failure="infrastructure",
                                                    message="worker 1 (pid 4242) died"))
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


def best_of(problem, *, tries: int = 5, spread: Literal["uniform", "dirichlet"] = "uniform"):
    """A third-party method with keyword arguments: the best of ``tries`` random placements drawn with ``spread``."""
    placements = random_placements(problem.graph, problem.cluster, min(tries, int(problem.budget_left)), problem.rng,
                                   spread=spread)
    runtimes = [problem.evaluate(p) for p in placements]
    return min(zip(placements, runtimes), key=lambda pair: pair[1].runtime_s if pair[1].ok else np.inf)[0]


def open_ended(problem, **options):
    """Takes any keyword (unchecked), and places everything on device 0."""
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


def pinned(problem, *, device: int):
    """A keyword without a default: every group on ``device``."""
    return np.full(problem.graph.n_groups, device, dtype=np.int64)
