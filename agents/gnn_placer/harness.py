"""The pre-trained placer as one harness method, ``method(problem) -> placement``
(``placement-env run --suite generalisation-test --methods agents.gnn_placer:place``, with arguments
``agents.gnn_placer:place@refine=best_start``).

By default :func:`place` answers without evaluating anything on the graph (any budget, 0 included): the greedy
placement of the checkpoint's network, with groups moved off any device whose estimated peak memory is over
its capacity divided by the checkpoint's memory margin, then groups on the CPU moved to GPUs with room
(:mod:`.memory_fit`). Its arguments:

* ``smooth=true``: the greedy placement decoded again with a cost for the tensors that cross devices
  (:mod:`.transfer_prior`, weight ``TRANSFER_PRIOR_WEIGHT``) before the memory fit;
* ``refine="zero_shot"``: that placement improved by local search on the learned cost model (``cost_model.pt``
  beside this file, ``$GNN_PLACER_COST_MODEL`` or ``cost_model=``; :mod:`.refine`), still no evaluation;
  ``refine="best_start"``: that placement and MinCut's (fitted into memory the same way, every allowed device
  equally likely) each refined, and the one the cost model predicts faster (a choice made on the validation split:
  docs/findings.md);
* ``fine_tune=true``: evaluates that placement, then trains the network on this one graph with the
  pre-training's update (REINFORCE with self-imitation of the best placement so far, :class:`Trainer`) at a lower
  learning rate, exploring a few groups per sample and moving a few groups of the best placement in each update
  (``FINE_TUNING``), within ``problem.budget`` evaluations (batches of up to ``samples``), and returns the fastest
  placement it evaluated;
* ``checkpoint=NAME`` or ``checkpoint=PATH``: another network than ``pretrained.pt`` (or ``$GNN_PLACER_CHECKPOINT``):
  a committed one by name (``placebench-v1``, trained on that benchmark's generalisation train split:
  ``agents.gnn_placer:place_zero_shot@checkpoint=placebench-v1``) or a file.

The presets of ``placement_env.PRESETS`` name the variants the results files hold:
``agents.gnn_placer:place_zero_shot`` (no arguments), ``:place_zero_shot_smoothed`` (``smooth=true``),
``:place_zero_shot_refined`` (``refine=zero_shot``), ``:place_refined_best_start`` (``refine=best_start``) and
``:place_fine_tune`` (``fine_tune=true``).

A checkpoint or cost model the method cannot use (missing, unreadable, of another version) is a
MethodConfigError (MethodFileNotFoundError when missing) naming the file: the harness records the row as a
configuration failure, which a rerun does again once the file is fixed.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Annotated, Iterator, Literal, NamedTuple

import numpy as np

from agents.common.torch_threads import on_harness_threads
from placement_env import Bounds, Problem, resolve_method
from placement_env.errors import CheckpointMismatchError, MethodConfigError, MethodFileNotFoundError

from .checkpoint import HOW_TO_TRAIN, CommittedName, checkpoint_path, load_cost_model, load_network
from .cost_model import CostNet, cost_input
from .memory_fit import ESTIMATE, fit_in_memory, return_to_gpus
from .network import GnnPlacerNet
from .refine import refine as refine_on
from .task import PlacementTask, make_task
from .trainer import Config, Trainer
from .transfer_prior import TRANSFER_PRIOR_WEIGHT, smooth

# Fine-tuning on one graph: a lower learning rate, and a search around the zero-shot placement (2 groups per
# sample drawn uniformly, 2 local moves per update; chosen on the validation split, docs/findings.md).
FINE_TUNING = {"lr": 3e-4, "explore": 2.0, "local_moves": 2}
DEFAULT_FINE_TUNE_BUDGET = 1000  # when the problem's budget is unlimited


def zero_shot(trainer: Trainer, task: PlacementTask, margin: float, transfer_prior: float = 0.0) -> np.ndarray:
    """The network's greedy placement of ``task`` (decoded with ``transfer_prior`` as the weight of the tensors that
    cross devices, when it is above 0: :func:`.transfer_prior.smooth`), fitted into memory with ``margin``, groups
    on the CPU back on GPUs with room (no evaluation)."""
    placement, log_probs = trainer.greedy_with_log_probs(task)
    placement = smooth(task.problem, placement, log_probs, transfer_prior)
    fitted = fit_in_memory(task.problem, placement, log_probs, margin=margin)
    return return_to_gpus(task.problem, fitted, log_probs, margin=margin)


def mincut_start(problem: Problem, margin: float) -> np.ndarray:
    """MinCut's placement of ``problem`` fitted into memory as the zero-shot one is, every allowed device equally
    likely (no evaluation)."""
    uniform = np.where(problem.allowed, 0.0, -np.inf)
    return fit_in_memory(problem, np.asarray(resolve_method("mincut")(problem), np.int64), uniform, margin=margin)


class Refined(NamedTuple):
    """A start refined on the cost model: the start, the refined placement, the moves taken and the refined
    placement's predicted log(runtime / lower bound)."""

    start: np.ndarray
    placement: np.ndarray
    moves: int
    predicted: float


def refined_starts(trainer: Trainer, task: PlacementTask, cost: CostNet, margin: float,
                   transfer_prior: float = 0.0) -> dict[str, Refined]:
    """The zero-shot placement of ``task`` ("zero-shot", decoded with ``transfer_prior``: :func:`zero_shot`) and
    MinCut's ("mincut"), each refined on ``cost`` (no evaluation)."""
    inputs = cost_input(task.problem)
    starts = {"zero-shot": zero_shot(trainer, task, margin, transfer_prior),
              "mincut": mincut_start(task.problem, margin)}
    refined = {name: refine_on(task.problem, start, cost, inputs, margin=margin) for name, start in starts.items()}
    predicted = cost.predict(inputs, np.stack([placement for placement, _ in refined.values()]))
    return {name: Refined(starts[name], placement, moves, float(p))
            for (name, (placement, moves)), p in zip(refined.items(), predicted)}


def best_start(refined: dict[str, Refined]) -> str:
    """The start whose refined placement is predicted fastest (the first on a tie)."""
    return min(refined, key=lambda name: refined[name].predicted)


def memory_margin(meta: dict, checkpoint: str | Path | None) -> float:
    """The memory margin a checkpoint's ``meta`` carries, measured against this version's memory estimate
    (CheckpointMismatchError naming the file if it has none, or one measured against another estimate)."""
    if "memory_margin" not in meta:
        raise CheckpointMismatchError(f"GNN placer: {checkpoint_path(checkpoint)} has no memory margin (made "
                                      f"before checkpoints carried one); {HOW_TO_TRAIN}")
    if meta.get("memory_estimate") != ESTIMATE:
        raise CheckpointMismatchError(
            f"GNN placer: {checkpoint_path(checkpoint)} has a memory margin measured against the estimate "
            f"{meta.get('memory_estimate', 'sequential, index order')!r}, not {ESTIMATE!r}; remeasure it with "
            f"python -m agents.gnn_placer.memory_margin --write {checkpoint_path(checkpoint)}, or {HOW_TO_TRAIN}")
    return float(meta["memory_margin"])


@contextlib.contextmanager
def _configuration_errors() -> Iterator[None]:
    """A missing file raised as a MethodFileNotFoundError and an unusable checkpoint as a MethodConfigError."""
    try:
        yield
    except FileNotFoundError as error:
        raise MethodFileNotFoundError(str(error)) from error
    except CheckpointMismatchError as error:
        raise MethodConfigError(str(error)) from error


def _network(checkpoint: str | Path | None) -> tuple[GnnPlacerNet, Config, float]:
    """The network, its config and its memory margin from ``checkpoint`` (a committed name, a file, or None:
    ``checkpoint_path()``)."""
    with _configuration_errors():
        net, config, meta = load_network(checkpoint)
        return net, config, memory_margin(meta, checkpoint)


def _cost_model(path: Path | None) -> CostNet:
    """The cost model at ``path`` (default: ``cost_model_path()``)."""
    with _configuration_errors():
        return load_cost_model(path)[0]


Refine = Literal["none", "zero_shot", "best_start"]


@on_harness_threads
def place(problem: Problem, *, smooth: bool = False, refine: Refine = "none", fine_tune: bool = False,
          samples: Annotated[int, Bounds(1)] = 16, checkpoint: CommittedName | Path | None = None,
          cost_model: Path | None = None) -> np.ndarray:
    """Harness method: the checkpoint's greedy placement fitted into memory, decoded with the transfer prior
    (``smooth``), refined on the cost model (``refine``) and fine-tuned within the budget (``fine_tune``) as asked
    (see the module docstring)."""
    net, config, margin = _network(checkpoint)
    cost = None if refine == "none" else _cost_model(cost_model)
    task = make_task(problem)
    if fine_tune:
        trainer = Trainer(net, dataclasses.replace(config, **FINE_TUNING), seed=int(problem.rng.integers(2**31 - 1)))
    else:
        trainer = Trainer(net, config)
    prior = TRANSFER_PRIOR_WEIGHT if smooth else 0.0
    if cost is None:
        start = zero_shot(trainer, task, margin, prior)
    elif refine == "zero_shot":
        start = refine_on(problem, zero_shot(trainer, task, margin, prior), cost, cost_input(problem), margin=margin)[0]
    else:
        refined = refined_starts(trainer, task, cost, margin, prior)
        start = refined[best_start(refined)].placement
    return _fine_tune(problem, trainer, task, start, samples) if fine_tune else start


def _fine_tune(problem: Problem, trainer: Trainer, task: PlacementTask, start: np.ndarray, samples: int) -> np.ndarray:
    """Evaluate ``start``, then REINFORCE on ``problem`` alone within its budget (batches of up to ``samples``,
    smaller for small budgets so there are at least 10 updates); the best placement evaluated."""
    left = problem.budget_left if problem.budget is not None else DEFAULT_FINE_TUNE_BUDGET
    if left >= 1:
        problem.evaluate(start)
        left -= 1
    k = int(max(2, min(samples, left // 10)))
    while left >= 2:
        batch = int(min(k, left))
        trainer.update([task], batch)
        left -= batch
    return np.asarray(problem.best.placement) if problem.best is not None else start
