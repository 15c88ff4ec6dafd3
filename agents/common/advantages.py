"""The advantages of a REINFORCE update, what both agents' trainers weigh each sample's log-probability by.

Two baselines: the seq2seq agent's moving average over updates of its successful samples' rewards
(:func:`moving_average`), and the GNN placer's mean of one graph's samples in the update
(:func:`centred_advantages`). Either may be divided by a spread and clipped (:func:`normalised`).
"""
from __future__ import annotations

import numpy as np


def moving_average(previous: float | None, value: float, decay: float) -> float:
    """``value`` blended into the average so far, ``decay * previous + (1 - decay) * value``; ``value`` itself
    when there is none yet (``previous`` None)."""
    return value if previous is None else decay * previous + (1 - decay) * value


def normalised(advantages: np.ndarray, scale: float, clip: float) -> np.ndarray:
    """``advantages`` divided by ``scale``, clipped to +-``clip``."""
    return np.clip(advantages / scale, -clip, clip)


def centred_advantages(rewards: np.ndarray, clip: float) -> np.ndarray:
    """Rewards of one batch of samples minus their mean, over their standard deviation, clipped to +-``clip``;
    all 0 when they are (nearly) equal."""
    rewards = np.asarray(rewards, np.float64)
    spread = rewards.std()
    if spread < 1e-9:
        return np.zeros_like(rewards)
    return normalised(rewards - rewards.mean(), spread, clip)
