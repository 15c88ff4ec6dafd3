"""SB3's agents as a harness method, ``method(problem) -> placement``
(``placement-env run --methods agents.sb3_harness:place@algorithm=A2C``; the presets
``agents.sb3_harness:place_ppo`` and ``:place_a2c`` of ``placement_env.PRESETS``).

It trains a fresh model on a oneshot env of the problem's graph and cluster whose every
evaluation is the problem's counted one (``evaluator=problem.evaluator``): the env's reference
placements and every episode count against the budget, training stops when it is spent, and the
method returns the fastest placement evaluated. So SB3 runs at the same evaluation budget as the
search baselines and the seq2seq agent.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from placement_env import Problem
from placement_env.errors import BudgetExhausted

from .sb3 import train
from .common.torch_threads import on_harness_threads

DEFAULT_BUDGET = 2000  # evaluations when the problem has no budget


@on_harness_threads
def place(problem: Problem, *, algorithm: Literal["PPO", "A2C"] = "PPO") -> np.ndarray:
    """Harness method: ``algorithm`` (``agents.sb3`` defaults; the oneshot env's algorithms) within
    ``problem.budget`` evaluations (``DEFAULT_BUDGET`` when unlimited)."""
    budget = problem.budget_left if problem.budget is not None else DEFAULT_BUDGET
    seed = int(problem.rng.integers(2**31 - 1))
    try:
        train(algorithm=algorithm, seconds=None, total_timesteps=int(budget), seed=seed,
              benchmark=problem.graph, cluster=problem.cluster, runtime=problem.evaluator.runtime, mode="oneshot",
              evaluator=problem.evaluator)
    except BudgetExhausted:
        pass  # the budget ran out inside a rollout: every evaluation made is recorded by the problem
    if problem.best is not None:
        return np.asarray(problem.best.placement)
    return np.zeros(problem.graph.n_groups, dtype=np.int64)  # nothing ran: the budget was below one evaluation
