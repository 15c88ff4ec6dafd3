"""Rewards of measured placements, on one scale for every graph.

A placement that ran gets -sqrt(runtime / lower bound): the paper's -sqrt(runtime), divided by the graph's
``pe.lower_bound`` (free to compute, and known for a test graph before any evaluation), so a 10x slower graph
does not weigh 10x more. One that failed gets -sqrt(FAILED_RATIO * (1 + overflow)), where overflow is how far
the fullest device's peak memory went past its capacity (as a fraction, up to 1): below every placement that
runs, and graded, so out-of-memory samples still say which way memory fits.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from placement_env import Measurement, Reward, RewardContext

FAILED_RATIO = 100.0  # a failed placement counts as 100x the lower bound (x2 at the most overflow)


def overflow(m: Measurement, capacity: np.ndarray) -> float:
    """How far ``m``'s fullest device went past its memory, as a fraction of it, in [0, 1] (1 when unknown)."""
    peak = np.asarray(m.peak_bytes, np.float64)
    if m.failure != "oom" or peak.shape != capacity.shape:
        return 1.0
    return float(np.clip((peak / capacity - 1.0).max(), 0.0, 1.0))


def _reward(m: Measurement, context: RewardContext) -> float:
    lower_bound = context.lower_bound_s
    scale = lower_bound if lower_bound > 0 and math.isfinite(lower_bound) else 1.0
    if m.ok:
        return -math.sqrt(m.runtime_s / scale)
    capacity = np.asarray(context.capacity_bytes if context.capacity_bytes is not None else np.nan, np.float64)
    return -math.sqrt(FAILED_RATIO * (1.0 + overflow(m, capacity)))


REWARD = Reward("neg_sqrt_runtime_over_bound", _reward, (-math.inf, 0.0), takes="measurement",
                description="-sqrt(runtime / lower bound); a failed placement -sqrt(100 x (1 + its memory overflow))")


def rewards(measurements: Sequence[Measurement], lower_bound: float, capacity: np.ndarray) -> np.ndarray:
    """[K] float64 rewards of ``measurements`` (see the module docstring): :data:`REWARD` with ``lower_bound`` and
    each device's memory ``capacity`` as its context."""
    context = RewardContext(lower_bound_s=lower_bound, capacity_bytes=capacity)
    return np.array([REWARD(m, context) for m in measurements])

