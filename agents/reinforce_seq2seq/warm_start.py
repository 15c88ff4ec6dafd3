"""Warm start (a deviation from the paper, which started from scratch): before training, the policy imitates the
placement of a baseline, or of the fastest of several, so that REINFORCE fine-tunes from a good placement."""
from __future__ import annotations

from typing import Any

import numpy as np

from placement_env import ZERO_BUDGET_HEURISTICS, Problem, solve

from .trainer import EvaluateBatch, Trainer

WARM_START_CANDIDATES = ZERO_BUDGET_HEURISTICS


def warm_start(trainer: Trainer, problem: Problem, evaluate_batch: EvaluateBatch) -> dict[str, Any]:
    """Imitate the placement of the baseline ``trainer.config.warm_start`` on ``problem`` ("best": the fastest of
    ``WARM_START_CANDIDATES`` that runs). Each candidate is evaluated once (one evaluation each) and counts
    as a sample of this run. The teacher's name, runtime and the imitation steps taken."""
    method = trainer.config.warm_start
    candidates = WARM_START_CANDIDATES if method == "best" else (method,)
    found: dict[str, tuple[float, np.ndarray]] = {}
    for name in candidates:
        try:
            solution = solve(name, problem)
        except Exception:  # noqa: BLE001 - "best": a baseline that cannot run here (e.g. no Scotch) is skipped
            if method != "best":
                raise
            continue
        placement = np.asarray(solution.placement, np.int64)
        (m,) = evaluate_batch(placement[None])
        trainer.evaluations += 1 + solution.evaluations
        if m.ok:
            found[name] = (float(m.runtime_s), placement)
            trainer.record(float(m.runtime_s), placement)
    if not found:
        raise RuntimeError(f"warm start {method!r}: no placement of {', '.join(candidates)} runs on this cluster")
    teacher = min(found, key=lambda name: found[name][0])
    steps = trainer.imitate(found[teacher][1], target_prob=trainer.config.warm_start_prob)
    return {"method": teacher, "runtime_s": found[teacher][0], "imitation_steps": steps}
