"""Zero-shot placements that fit in memory, without evaluating anything: :func:`fit_in_memory` moves groups off
every device whose estimated peak (``placement_env.sequential_memory`` with the ops in the order of their
earliest starts: a graph analysis with the cost model's op times) is over its capacity, each time the move the
network minds least.

Nothing in the network's greedy placement of a graph it was not trained on guarantees that it fits in memory;
the fit makes it fit the estimate. The estimate is the sequential peak, and a device's estimate must stay under
its capacity divided by a margin: the largest simulated / estimated peak over the train tasks' placements
(:func:`train_margin`, measured at the end of pre-training and stored in the checkpoint; ``python -m
agents.gnn_placer.memory_margin`` shows it).

A move takes one group from the device whose estimate is furthest over its limit, among the groups with bytes
alive at that device's peak, to its most likely allowed GPU (by the network) that is under its own
limit and that the group has not left before, or if it may go on none, its most likely such device (the CPU:
on these machines a CPU op is many times slower, so it is the last resort, as in Baechi's m-TOPO); of those
moves, the one whose log-probability falls least. A group never returns to a device it left, so the repair
ends after at most one move per group and device (a group pushed from GPU 1 onto GPU 2 can move on when GPU 2
fills); if no move is left, the placement is returned as it is (it may still run out of memory).

:func:`return_to_gpus` then treats the CPU as the last resort from the other side: each group the network put
on the CPU that may run on a GPU moves to its likeliest GPU whose estimate stays under the limit with it, if
any (groups the network finds likeliest on a GPU first). docs/findings.md has why both steps are kept.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from placement_env import Problem, sequential_memory, sequential_peak_bytes

ESTIMATE = "sequential, earliest-start order"  # the estimate a margin is measured against (checkpoints name it)
# Ratios are taken on GPUs whose estimate is at least this share of their memory: the margin binds only on a
# device near its capacity (over capacity / margin), and on a device far below it a few hundred MiB of buffers
# waiting for transfers, which the estimate leaves out, make a large ratio that no fit would act on.
CHECKED_SHARE = 0.5


def placements_to_check(problem: Problem, greedy: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """The placements a margin is measured on: the network's greedy placement, the single-GPU one (every group
    that may go on device 1) and three with a fifth of the greedy placement's groups moved to random GPUs."""
    n, devices = problem.graph.n_groups, problem.cluster.n_devices
    rows = np.arange(n)
    out = [np.asarray(greedy, np.int64), np.where(problem.allowed[:, 1], 1, 0)]
    for _ in range(3):
        moved = out[0].copy()
        pick = rng.random(n) < 0.2
        moved[pick] = rng.integers(1, devices, int(pick.sum()))
        out.append(np.where(problem.allowed[rows, moved], moved, 0))
    return out


def peak_ratios(problem: Problem, placements: Sequence[np.ndarray], min_share: float = CHECKED_SHARE,
                order: str = "earliest-start") -> list[np.ndarray]:
    """Per placement: the simulated peak over the sequential estimate (ops in ``order``: "earliest-start", as the
    fit uses, or "index") on each GPU whose estimate is above zero and at least ``min_share`` of its memory (one
    batch of evaluations by the problem's evaluator, not counted)."""
    if order not in ("earliest-start", "index"):
        raise ValueError(f"order={order!r}; expected 'earliest-start' or 'index'")
    seconds = problem.costs.seconds if order == "earliest-start" else None
    graph, cluster = problem.graph, problem.cluster
    gpu, memory = cluster.is_gpu, cluster.memory_bytes
    out = []
    for placement, measured in zip(placements, problem.evaluator.batch(np.stack(placements))):
        estimate = sequential_peak_bytes(graph, cluster, placement, seconds)
        checked = np.flatnonzero(gpu & (estimate > 0) & (estimate >= min_share * memory))
        out.append(measured.peak_bytes[checked] / estimate[checked])
    return out


def train_margin(problems: Sequence[Problem], greedy: Sequence[np.ndarray], seed: int = 0) -> float:
    """The largest simulated / estimated peak over :func:`placements_to_check` of every problem (with its
    network's greedy placement), and at least 1."""
    rng = np.random.default_rng(seed)
    worst = 1.0
    for problem, placement in zip(problems, greedy):
        for ratios in peak_ratios(problem, placements_to_check(problem, placement, rng)):
            worst = max(worst, float(ratios.max(initial=1.0)))
    return worst


def memory_limit(problem: Problem, margin: float) -> np.ndarray:
    """Each device's limit on its sequential peak estimate, capacity / ``margin``; ValueError naming a bad
    margin."""
    if not margin >= 1.0:
        raise ValueError(f"margin={margin!r}; expected a number >= 1 (the simulated peak over the estimate)")
    return problem.cluster.memory_bytes / margin


def _checked(problem: Problem, placement: np.ndarray, log_probs: np.ndarray, margin: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A copy of ``placement`` (int64), ``log_probs`` with -inf where a group may not go, and each device's limit
    (capacity / ``margin``); ValueError naming a bad margin or log_probs shape."""
    limit = memory_limit(problem, margin)
    graph, cluster = problem.graph, problem.cluster
    log_probs = np.asarray(log_probs, np.float64)
    if log_probs.shape != (graph.n_groups, cluster.n_devices):
        raise ValueError(f"log_probs has shape {log_probs.shape}; expected ({graph.n_groups}, {cluster.n_devices})")
    return np.array(placement, np.int64), np.where(problem.allowed, log_probs, -np.inf), limit


def fit_in_memory(problem: Problem, placement: np.ndarray, log_probs: np.ndarray, *,
                  margin: float) -> np.ndarray:
    """``placement`` [n] with groups moved until every device's sequential peak estimate is at most its
    capacity / ``margin`` (see the module docstring); ``log_probs`` [n, n_devices]: the network's per-group
    device log-probabilities (-inf where not allowed)."""
    placement, log_probs, limit = _checked(problem, placement, log_probs, margin)
    graph, cluster = problem.graph, problem.cluster
    is_gpu = cluster.is_gpu
    seconds = problem.costs.seconds
    left = np.zeros((graph.n_groups, cluster.n_devices), bool)  # the devices each group was moved off
    rows = np.arange(graph.n_groups)
    while True:
        memory = sequential_memory(graph, cluster, placement, seconds)
        over = memory.peak_bytes / limit
        device = int(np.argmax(over))
        if over[device] <= 1.0:
            return placement
        targets = np.where((over < 1.0) & ~left, log_probs, -np.inf)  # devices under their limit, not left ...
        gpu_targets = np.where(is_gpu, targets, -np.inf)  # ... GPUs first, as Baechi's m-TOPO spills
        targets = np.where(np.isfinite(gpu_targets).any(axis=1, keepdims=True), gpu_targets, targets)
        best = targets.argmax(axis=1)
        loss = log_probs[rows, placement] - targets[rows, best]
        movable = (placement == device) & (memory.at_peak_bytes[:, device] > 0) & np.isfinite(loss)
        if not movable.any():
            return placement
        group = int(np.flatnonzero(movable)[np.argmin(loss[movable])])
        left[group, device] = True
        placement[group] = best[group]


def return_to_gpus(problem: Problem, placement: np.ndarray, log_probs: np.ndarray, *, margin: float) -> np.ndarray:
    """``placement`` [n] with each group on the CPU that may run on a GPU moved to its likeliest GPU (by
    ``log_probs`` [n, n_devices]) where every device's sequential peak estimate stays at most its capacity /
    ``margin``; groups in order of their likeliest GPU's log-probability, highest first (see the module
    docstring)."""
    placement, log_probs, limit = _checked(problem, placement, log_probs, margin)
    graph, cluster = problem.graph, problem.cluster
    is_gpu = cluster.is_gpu
    on_gpu = np.where(is_gpu, log_probs, -np.inf)
    waiting = np.flatnonzero(~is_gpu[placement] & np.isfinite(on_gpu).any(axis=1))
    for group in waiting[np.argsort(-on_gpu[waiting].max(axis=1), kind="stable")]:
        cpu = placement[group]
        for gpu in np.argsort(-on_gpu[group], kind="stable"):
            if not np.isfinite(on_gpu[group, gpu]):
                break
            placement[group] = gpu
            if (sequential_peak_bytes(graph, cluster, placement, problem.costs.seconds) <= limit).all():
                break
            placement[group] = cpu
    return placement
