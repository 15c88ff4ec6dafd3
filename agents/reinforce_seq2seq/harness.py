"""The agent as a harness method, ``method(problem) -> placement``
(``placement-env run --methods agents.reinforce_seq2seq:place``, or with arguments,
``agents.reinforce_seq2seq:place@warm_start=best``): it trains a fresh policy within the problem's evaluation
budget, through ``problem.evaluate``, and returns the best placement it saw. Its presets
(``placement_env.PRESETS``): ``agents.reinforce_seq2seq:place_warm_start`` (``warm_start=best``) and
``agents.reinforce_seq2seq:place_self_imitation`` (``self_imitation=true``)."""
from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

import numpy as np

from agents.common.torch_threads import on_harness_threads
from placement_env import Bounds, Measurement, Problem

from .config import FINE_TUNING, SELF_IMITATION, Config, warm_start_choices
from .policy import problem_features
from .trainer import Trainer
from .training import run_updates
from .warm_start import warm_start as imitate_warm_start

WarmStart = Literal[warm_start_choices()]  # "best" or a built-in method


@on_harness_threads
def place(problem: Problem, *, samples: Annotated[int, Bounds(1)] = 16,
          seconds: Annotated[float, Bounds(0, above=True)] | None = None, warm_start: WarmStart | None = None,
          self_imitation: bool = False, default_budget: Annotated[int, Bounds(1)] = 2000) -> np.ndarray:
    """Harness method: train within ``problem.budget`` evaluations (``default_budget`` if unlimited) through
    ``problem.evaluate``; return the best placement seen (the greedy one if nothing ran). The paper's setting by
    default; ``self_imitation``: with ``SELF_IMITATION`` (from scratch); ``warm_start``: first imitate that method's
    placement (``"best"``: the fastest of ``WARM_START_CANDIDATES``; their evaluations count against the budget),
    then fine-tune with ``FINE_TUNING`` (which includes self-imitation), as the agent's command line does. Trains on
    ``agents.common.torch_threads.harness_threads()`` torch threads (two unless ``$AGENT_TORCH_THREADS`` says),
    whatever the machine's cores, so a seed gives the same row anywhere."""
    if warm_start is not None:
        config = Config(warm_start=warm_start, **FINE_TUNING)
    else:
        config = Config(**SELF_IMITATION) if self_imitation else Config()
    budget = problem.budget if problem.budget is not None else default_budget
    budget = int(min(budget, problem.evaluations + problem.budget_left))
    k = max(1, min(samples, budget // 8)) if budget >= 2 else 1  # small budgets: more, smaller updates
    seed = int(problem.rng.integers(2**31 - 1))
    cfg = dataclasses.replace(config, samples=k)
    trainer = Trainer(problem_features(problem), problem.allowed, cfg, seed=seed)
    trainer.evaluations = problem.evaluations

    def evaluate_batch(placements: np.ndarray) -> list[Measurement]:
        return [problem.evaluate(p) for p in placements]

    if cfg.warm_start:
        imitate_warm_start(trainer, problem, evaluate_batch)
        trainer.evaluations = problem.evaluations

    run_updates(trainer, evaluate_batch, budget=budget, seconds=seconds, progress=False)
    if trainer.best_placement is not None:
        return trainer.best_placement
    if problem.best is not None:
        return np.asarray(problem.best.placement)
    return trainer.greedy()
