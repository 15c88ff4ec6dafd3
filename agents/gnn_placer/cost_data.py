"""What the cost model learns from: placements of a train task and their simulated runtimes.

Per task (``task_dataset``), drawn so that the data covers the placements the refinement visits (the placer's
zero-shot answer and the moves around it) as well as the kinds a placement can be:

* the placer's zero-shot placement (:func:`.harness.zero_shot`) and MinCut's;
* ``SAMPLES`` of the placer's samples at each of ``TEMPERATURES`` (its logits divided by the temperature);
* ``RANDOM`` placements with each group on a uniformly random allowed device;
* ``SPLITS`` contiguous splits: 1-11 cut points at random along the groups' topological order and a random
  device per segment (the layer-wise splits of the expert placements; a group its segment's device cannot run
  goes to its first allowed device);
* the one-move neighbourhoods (:func:`.refine.one_move_neighbours`) along up to ``CLIMB_STEPS`` steps of a
  best-improvement hill climb on the simulator from the zero-shot placement, from MinCut's and from the first
  random placement: how single moves change the runtime, which is what the refinement's choices rest on.

Everything is measured through the task's counted problem, in batches.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from placement_env import resolve_method

from .harness import zero_shot
from .refine import one_move_neighbours
from .task import PlacementTask
from .trainer import Trainer

TEMPERATURES = (1.0, 2.0, 4.0, 8.0)
SAMPLES = 100
RANDOM = 200
SPLITS = 200
MAX_CUTS = 11
CLIMB_STEPS = 8


@dataclass(frozen=True)
class Dataset:
    """``placements`` [m, n] int64 and their simulated ``runtime_s`` [m] and ``ok`` [m] (ran without failing)."""

    placements: np.ndarray
    runtime_s: np.ndarray
    ok: np.ndarray


def tempered_samples(trainer: Trainer, task: PlacementTask, temperature: float, k: int,
                     generator: torch.Generator) -> np.ndarray:
    """[k, n]: the placer's samples of ``task`` with its encoder's logits divided by ``temperature``."""
    with torch.no_grad():
        encoding = trainer.net(task.inputs)
        tempered = dataclasses.replace(encoding, logits=encoding.logits / temperature)
        return trainer.net.draw(tempered, k, generator).numpy()


def contiguous_splits(allowed: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """[k, n]: placements of 2-12 segments along the group order, a random device each (see the module
    docstring)."""
    n, devices = allowed.shape
    rows = np.arange(n)
    out = np.empty((k, n), np.int64)
    for i in range(k):
        cuts = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(1, min(MAX_CUTS, n - 1) + 1)), replace=False))
        device = rng.integers(0, devices, cuts.size + 1)[np.searchsorted(cuts, rows, side="right")]
        out[i] = np.where(allowed[rows, device], device, allowed.argmax(axis=1))
    return out


def random_placements(allowed: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """[k, n]: each group on a uniformly random device of those it may go on."""
    return (rng.random((k, *allowed.shape)) * allowed).argmax(axis=2)


def climb(task: PlacementTask, start: np.ndarray, steps: int) -> tuple[list[np.ndarray], list]:
    """The one-move neighbourhoods along a best-improvement hill climb on the simulator from ``start``, and their
    measurements."""
    problem = task.problem
    allowed = np.asarray(problem.allowed, bool)
    current = np.asarray(start, np.int64)
    first = problem.evaluate(current)
    best = first.runtime_s if first.ok else np.inf
    placements, measured = [current[None]], [first]
    for _ in range(steps):
        neighbours = one_move_neighbours(current, allowed)
        results = problem.evaluate_batch(neighbours)
        placements.append(neighbours)
        measured.extend(results)
        runtimes = np.array([m.runtime_s if m.ok else np.inf for m in results])
        i = int(np.argmin(runtimes))
        if not runtimes[i] < best:
            break
        current, best = neighbours[i], float(runtimes[i])
    return placements, measured


def task_dataset(task: PlacementTask, trainer: Trainer, margin: float, rng: np.random.Generator) -> Dataset:
    """The placements of ``task`` described in the module docstring, measured."""
    problem = task.problem
    allowed = np.asarray(problem.allowed, bool)
    generator = torch.Generator().manual_seed(int(rng.integers(2**31 - 1)))
    start = zero_shot(trainer, task, margin)
    split = np.asarray(resolve_method("mincut")(problem), np.int64)
    random = random_placements(allowed, RANDOM, rng)
    drawn = [start[None], split[None], random, contiguous_splits(allowed, SPLITS, rng),
             *(tempered_samples(trainer, task, t, SAMPLES, generator) for t in TEMPERATURES)]
    placements = [np.concatenate(drawn)]
    measured = list(problem.evaluate_batch(placements[0]))
    for origin in (start, split, random[0]):
        climbed, results = climb(task, origin, CLIMB_STEPS)
        placements.extend(climbed)
        measured.extend(results)
    return Dataset(np.concatenate(placements), np.array([m.runtime_s for m in measured], np.float64),
                   np.array([m.ok for m in measured], bool))
