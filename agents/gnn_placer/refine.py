"""Local search on the learned cost model (:mod:`.cost_model`): no evaluation of the graph is spent.

:func:`refine` starts from a placement (the placer's zero-shot answer) and repeats a best-improvement step: it
predicts every placement one group move away (each group to each other device it may go on) in one batch, and
takes the move with the lowest predicted step time whose devices all keep their sequential peak memory estimate
(:func:`placement_env.sequential_peak_bytes`, ops in earliest-start order, as the zero-shot memory fit) at most
their capacity divided by ``margin``, trying the ``MEMORY_TRIES`` most promising moves. It stops when no such
move is predicted faster, or after ``max_moves`` moves.
"""
from __future__ import annotations

import numpy as np

from placement_env import Problem, sequential_peak_bytes

from .cost_model import CostInput, CostNet
from .memory_fit import memory_limit

MEMORY_TRIES = 20
MAX_MOVES = 300


def one_move_neighbours(placement: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """[m, n]: every placement that moves one group of ``placement`` [n] to another device it may go on
    (``allowed`` [n, D]), groups in index order, devices in slot order."""
    groups, devices = np.nonzero(allowed)
    keep = devices != placement[groups]
    groups, devices = groups[keep], devices[keep]
    out = np.repeat(np.asarray(placement, np.int64)[None], groups.size, axis=0)
    out[np.arange(groups.size), groups] = devices
    return out


def refine(problem: Problem, placement: np.ndarray, net: CostNet, inputs: CostInput, *, margin: float,
           max_moves: int = MAX_MOVES) -> tuple[np.ndarray, int]:
    """``placement`` improved by best-improvement local search on ``net``'s prediction (see the module docstring),
    and the number of moves taken."""
    limit = memory_limit(problem, margin)
    graph, cluster = problem.graph, problem.cluster
    allowed = np.asarray(problem.allowed, bool)
    current = np.asarray(placement, np.int64).copy()
    score = float(net.predict(inputs, current[None])[0])
    for moves in range(max_moves):
        neighbours = one_move_neighbours(current, allowed)
        if not len(neighbours):
            return current, moves
        predicted = net.predict(inputs, neighbours)
        for i in np.argsort(predicted, kind="stable")[:MEMORY_TRIES]:
            if predicted[i] >= score:
                return current, moves
            if (sequential_peak_bytes(graph, cluster, neighbours[i], problem.costs.seconds) <= limit).all():
                current, score = neighbours[i], float(predicted[i])
                break
        else:
            return current, moves
    return current, max_moves
