"""Population baselines: the cross-entropy method and a biased random-key genetic algorithm (BRKGA).

Both evaluate populations of placements, always within ``problem.allowed``, and return the fastest
placement they evaluated. ``start="scratch"`` starts from random placements drawn as random search
draws them (``baselines.simple.random_candidates``: half uniform per group, half with Dirichlet
device weights, lopsided to even); ``start="best_heuristic"`` (the presets ``cross_entropy_warm``
and ``brkga_warm`` of ``placement_env.PRESETS``) from the fastest zero-budget heuristic (see
``baselines.search``; without one that runs, from scratch). With a budget of 0 they return the
start without evaluating it: the first heuristic placement made, or one random placement.

The population size scales with the budget: ``budget // 20`` clipped to 10..100 (about 20
iterations or generations; 50 at a budget of 1,000).

Cross-entropy method (Rubinstein): one categorical distribution per group over its allowed devices.
Each iteration keeps the fastest ``CE_ELITE_FRACTION`` (0.1) of its samples that ran, moves every
distribution to the elite's device frequencies with smoothing ``CE_SMOOTHING`` (0.7: new = 0.7 *
elite frequencies + 0.3 * old), mixes in a share ``1 / n_groups`` of uniform (so that even a
converged distribution draws about one group at random per sample and keeps exploring), and
samples the next population. From scratch the distributions start uniform and the first
population is the random placements above; from a heuristic they start at
``(1 - w) * its device + w * uniform`` with ``w = CE_WARM_GROUPS / n_groups`` (each sample moves
about four groups, like a local-search move).

BRKGA (Goncalves & Resende 2011; the search REGAL, Paliwal et al. ICLR 2020, builds on): a
chromosome is one random key in [0, 1) per group, decoded to the group's k-th allowed device,
``k = floor(key * n_allowed)``, so every chromosome is a placement on allowed devices and uniform
crossover mixes the parents' devices group by group. (REGAL's chromosomes also carry per-node
scheduling priorities; the simulator schedules by itself, so there is nothing for them to set.)
Each generation keeps the fastest ``BRKGA_ELITE_FRACTION`` (0.2) of the population, adds
``BRKGA_MUTANT_FRACTION`` (0.1) mutants (random placements as above, encoded as keys), and fills
the rest with children of one elite and one non-elite parent, each gene taken from the elite
parent with probability ``BRKGA_INHERIT`` (0.7). From a heuristic, the first population holds its
placement (the others are random).
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np

from placement_env import Bounds, Problem

from .simple import random_candidates
from .search import Scores, Start, check_start, heuristic_start, search_budget

__all__ = ["cross_entropy", "brkga"]

Fraction = Annotated[float, Bounds(0, 1, above=True)]  # a share of the population, more than none
Probability = Annotated[float, Bounds(0, 1)]

EVALUATIONS_PER_POPULATION = 20  # population = budget // 20, clipped to POPULATION_RANGE
POPULATION_RANGE = (10, 100)
CE_ELITE_FRACTION = 0.1
CE_SMOOTHING = 0.7
CE_WARM_GROUPS = 4  # a warm start's distributions draw about this many groups uniformly per sample
BRKGA_ELITE_FRACTION = 0.2
BRKGA_MUTANT_FRACTION = 0.1
BRKGA_INHERIT = 0.7


def population_size(budget: int) -> int:
    """Placements per iteration or generation for a budget of ``budget`` evaluations."""
    low, high = POPULATION_RANGE
    return int(np.clip(budget // EVALUATIONS_PER_POPULATION, low, high))


def _evaluate(scores: Scores, placements: np.ndarray) -> np.ndarray:
    """Runtimes of the leading placements the budget allows (inf for the rest)."""
    runtimes = np.full(len(placements), np.inf)
    for i, placement in enumerate(placements):
        if scores.exhausted:
            break
        runtimes[i] = scores.runtime(placement)
    return runtimes


def cross_entropy(problem: Problem, *, start: Start = "scratch", elite_fraction: Fraction = CE_ELITE_FRACTION,
                  smoothing: Probability = CE_SMOOTHING) -> np.ndarray:
    """The cross-entropy method over per-group device distributions (see the module docstring)."""
    check_start(start)
    budget = search_budget(problem, "cross_entropy")
    size = population_size(budget)
    scores = Scores(problem, budget)
    allowed = problem.allowed
    n_groups, n_devices = allowed.shape
    uniform = allowed / allowed.sum(axis=1, keepdims=True)
    seed = heuristic_start(problem, scores) if start == "best_heuristic" else None
    if seed is None:
        probabilities, samples = uniform, random_candidates(problem, size)
    else:
        warm = min(1.0, CE_WARM_GROUPS / max(1, n_groups))
        probabilities = (1 - warm) * (np.arange(n_devices) == seed[:, None]) * allowed + warm * uniform
        samples = _sample(probabilities, size, problem.rng)
    if scores.exhausted:
        return scores.best_or(samples[0] if seed is None else seed)
    explore = 1.0 / max(1, n_groups)
    n_elite = max(1, math.ceil(elite_fraction * size))
    while True:
        runtimes = _evaluate(scores, samples)
        if scores.exhausted:
            return scores.best_or(samples[0])
        ran = np.flatnonzero(np.isfinite(runtimes))
        if ran.size:
            elite = samples[ran[np.argsort(runtimes[ran], kind="stable")[:n_elite]]]
            frequencies = (elite[:, :, None] == np.arange(n_devices)).mean(axis=0)
            probabilities = smoothing * frequencies + (1 - smoothing) * probabilities
            probabilities = (1 - explore) * probabilities + explore * uniform
        samples = _sample(probabilities, size, problem.rng)


def _sample(probabilities: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` placements [n, n_groups], group g's device drawn from ``probabilities[g]``."""
    cumulative = np.cumsum(probabilities, axis=1)
    u = rng.random((n, probabilities.shape[0])) * cumulative[:, -1]
    return (cumulative[None, :, :] <= u[:, :, None]).sum(axis=2).astype(np.int64)


def brkga(problem: Problem, *, start: Start = "scratch", elite_fraction: Fraction = BRKGA_ELITE_FRACTION,
          mutant_fraction: Fraction = BRKGA_MUTANT_FRACTION, inherit: Probability = BRKGA_INHERIT) -> np.ndarray:
    """A biased random-key genetic algorithm, one key per group (see the module docstring)."""
    check_start(start)
    budget = search_budget(problem, "brkga")
    size = population_size(budget)
    n_elite = max(1, round(elite_fraction * size))
    n_mutants = max(1, round(mutant_fraction * size))
    if n_elite + n_mutants >= size:
        raise ValueError(f"elite_fraction={elite_fraction} and mutant_fraction={mutant_fraction} leave no children "
                         f"in a population of {size}; expected fractions summing to well under 1")
    scores = Scores(problem, budget)
    decoder = _Decoder(problem.allowed)
    rng = problem.rng
    seed = heuristic_start(problem, scores) if start == "best_heuristic" else None
    keys = decoder.encode(random_candidates(problem, size), rng)
    if seed is not None:
        keys[0] = decoder.encode(seed[None], rng)[0]
    if scores.exhausted:
        return scores.best_or(decoder(keys[:1])[0] if seed is None else seed)
    fitness = _evaluate(scores, decoder(keys))
    while not scores.exhausted:
        order = np.argsort(fitness, kind="stable")
        elite, others = keys[order[:n_elite]], keys[order[n_elite:]]
        n_children = size - n_elite - n_mutants
        first = elite[rng.integers(n_elite, size=n_children)]
        second = others[rng.integers(len(others), size=n_children)]
        children = np.where(rng.random(first.shape) < inherit, first, second)
        mutants = decoder.encode(random_candidates(problem, n_mutants), rng)
        offspring = np.concatenate([mutants, children])
        keys = np.concatenate([elite, offspring])
        fitness = np.concatenate([fitness[order[:n_elite]], _evaluate(scores, decoder(offspring))])
    return scores.best_or(decoder(keys[:1])[0])


class _Decoder:
    """Random keys to placements: key k of group g picks g's ``floor(k * n_allowed[g])``-th allowed device."""

    def __init__(self, allowed: np.ndarray) -> None:
        self.n_groups = allowed.shape[0]
        self.n_allowed = allowed.sum(axis=1)
        self.devices = np.argsort(~allowed, axis=1, kind="stable")  # each row: allowed devices first, in order
        self.rank = np.argsort(self.devices, axis=1)  # rank[g, d]: d's position in row g

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        """Placements [n, n_groups] of keys [n, n_groups]."""
        index = np.minimum((keys * self.n_allowed).astype(np.int64), self.n_allowed - 1)
        return self.devices[np.arange(self.n_groups), index]

    def encode(self, placements: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Keys [n, n_groups] that decode to ``placements`` [n, n_groups] (each key uniform within its
        device's interval); a group on a device it is not allowed on gets its last allowed device."""
        position = np.minimum(self.rank[np.arange(self.n_groups), placements], self.n_allowed - 1)
        return (position + rng.random(placements.shape)) / self.n_allowed
