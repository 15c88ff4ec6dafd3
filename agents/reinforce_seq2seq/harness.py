"""The agent as harness methods, ``method(problem) -> placement``
(``placement-env run --methods agents.reinforce_seq2seq:place``): each trains a fresh policy within the
problem's evaluation budget, through ``problem.evaluate``, and returns the best placement it saw."""
from __future__ import annotations

import dataclasses

import numpy as np

from agents.common.torch_threads import on_harness_threads
from placement_env import Measurement, Problem

from .config import FINE_TUNING, SELF_IMITATION, Config
from .policy import problem_features
from .trainer import Trainer
from .training import run_updates
from .warm_start import warm_start


@on_harness_threads
def place(problem: Problem, *, samples: int = 16, seconds: float | None = None, config: Config | None = None,
          default_budget: int = 2000) -> np.ndarray:
    """Harness method: train within ``problem.budget`` evaluations (``default_budget`` if unlimited) through
    ``problem.evaluate``; return the best placement seen (the greedy one if nothing ran). Trains on
    ``agents.common.torch_threads.harness_threads()`` torch threads (two unless ``$AGENT_TORCH_THREADS`` says), whatever
    the machine's cores, so a seed gives the same row anywhere."""
    budget = problem.budget if problem.budget is not None else default_budget
    budget = int(min(budget, problem.evaluations + problem.budget_left))
    k = max(1, min(samples, budget // 8)) if budget >= 2 else 1  # small budgets: more, smaller updates
    seed = int(problem.rng.integers(2**31 - 1))
    cfg = dataclasses.replace(config or Config(), samples=k)
    trainer = Trainer(problem_features(problem), problem.allowed, cfg, seed=seed)
    trainer.evaluations = problem.evaluations

    def evaluate_batch(placements: np.ndarray) -> list[Measurement]:
        return [problem.evaluate(p) for p in placements]

    if cfg.warm_start:
        warm_start(trainer, problem, evaluate_batch)
        trainer.evaluations = problem.evaluations

    run_updates(trainer, evaluate_batch, budget=budget, seconds=seconds, progress=False)
    if trainer.best_placement is not None:
        return trainer.best_placement
    if problem.best is not None:
        return np.asarray(problem.best.placement)
    return trainer.greedy()


def place_warm_start(problem: Problem) -> np.ndarray:
    """Harness method: :func:`place` after imitating the best of ``WARM_START_CANDIDATES`` (their evaluations
    count against the budget), fine-tuned with ``FINE_TUNING``."""
    return place(problem, config=Config(warm_start="best", **FINE_TUNING))


def place_self_imitation(problem: Problem) -> np.ndarray:
    """Harness method: :func:`place` from scratch (as in the paper) with ``SELF_IMITATION``."""
    return place(problem, config=Config(**SELF_IMITATION))
