"""Zero-shot placements that fit in memory, without evaluating anything: :func:`fit_in_memory` moves groups off
every device whose estimated peak (``placement_env.sequential_memory``, a graph analysis) is over its
capacity, each time the move the network minds least.

The network learned splits that fit the train graphs' memory, not a rule that carries over: its greedy
placements of the held-out graphs on two K80 dies run out of memory (README). The estimate is the
sequential peak, and the simulated peak of the train suite's placements is up to ``MEMORY_MARGIN`` times it
(``python -m experiments.memory_estimate``, train rows), so a device's estimate must stay under its
capacity divided by that margin.

A move takes one group from the device whose estimate is furthest over its limit, among the groups with bytes
alive at that device's peak, to its most likely allowed GPU (by the network) that is under its own
limit, or if it may go on none, its most likely allowed device under its limit (the CPU: on these machines a
CPU op is many times slower, so it is the last resort, as in Baechi's m-TOPO); of those moves, the one whose log-probability falls least. A group moves at most once, so the repair
ends after at most one move per group; if no move is left, the placement is returned as it is (it may still
run out of memory).
"""
from __future__ import annotations

import numpy as np

from placement_env import Problem, sequential_memory

# The largest simulated / sequential-estimate peak ratio over the generalisation-train suite's placements
# (greedy, single GPU, and greedy with a fifth of the groups moved at random, on each task's GPUs):
# 1.17 (GPT-2 on 4 GPUs), from `python -m experiments.memory_estimate`.
MEMORY_MARGIN = 1.17


def fit_in_memory(problem: Problem, placement: np.ndarray, log_probs: np.ndarray, *,
                  margin: float = MEMORY_MARGIN) -> np.ndarray:
    """``placement`` [n] with groups moved until every device's sequential peak estimate is at most its
    capacity / ``margin`` (see the module docstring); ``log_probs`` [n, n_devices]: the network's per-group
    device log-probabilities (-inf where not allowed)."""
    if not margin >= 1.0:
        raise ValueError(f"margin={margin!r}; expected a number >= 1 (the simulated peak over the estimate)")
    graph, cluster = problem.graph, problem.cluster
    placement = np.array(placement, np.int64)
    log_probs = np.asarray(log_probs, np.float64)
    if log_probs.shape != (graph.n_groups, cluster.n_devices):
        raise ValueError(f"log_probs has shape {log_probs.shape}; expected ({graph.n_groups}, {cluster.n_devices})")
    log_probs = np.where(problem.allowed, log_probs, -np.inf)
    limit = np.array([d.memory_bytes for d in cluster.devices], np.float64) / margin
    is_gpu = np.array([d.kind == "GPU" for d in cluster.devices])
    moved = np.zeros(graph.n_groups, bool)
    rows = np.arange(graph.n_groups)
    while True:
        memory = sequential_memory(graph, cluster, placement)
        over = memory.peak_bytes / limit
        device = int(np.argmax(over))
        if over[device] <= 1.0:
            return placement
        targets = np.where(over < 1.0, log_probs, -np.inf)  # devices under their limit ...
        gpu_targets = np.where(is_gpu, targets, -np.inf)  # ... GPUs first, as Baechi's m-TOPO spills
        targets = np.where(np.isfinite(gpu_targets).any(axis=1, keepdims=True), gpu_targets, targets)
        best = targets.argmax(axis=1)
        loss = log_probs[rows, placement] - targets[rows, best]
        movable = (placement == device) & ~moved & (memory.at_peak_bytes[:, device] > 0) & np.isfinite(loss)
        if not movable.any():
            return placement
        group = int(np.flatnonzero(movable)[np.argmin(loss[movable])])
        placement[group], moved[group] = best[group], True
