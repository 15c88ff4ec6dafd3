"""How well simulated step times match measured ones: Spearman, MAPE, and K-fold held-out predictions.

In-sample scores flatter a fit with several free parameters; :func:`kfold_predictions` gives every
placement a prediction from a fit that never saw it, so its scores say how the calibrated simulator
ranks placements it was not fitted on.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.stats import spearmanr

__all__ = ["fidelity", "kfold_predictions"]


def fidelity(simulated: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Spearman rank correlation, MAPE (mean |sim - meas| / meas) and RMS log-ratio, over finite pairs."""
    sim, meas = np.asarray(simulated, float), np.asarray(measured, float)
    keep = np.isfinite(sim) & np.isfinite(meas) & (meas > 0) & (sim > 0)
    sim, meas = sim[keep], meas[keep]
    out = {"n": int(keep.sum()), "spearman": float("nan"), "mape": float("nan"), "rms_log_ratio": float("nan")}
    if sim.size:
        out["mape"] = float(np.mean(np.abs(sim - meas) / meas))
        out["rms_log_ratio"] = float(np.sqrt(np.mean(np.log(sim / meas) ** 2)))
    if sim.size >= 3 and np.ptp(sim) > 0 and np.ptp(meas) > 0:
        out["spearman"] = float(spearmanr(sim, meas).statistic)
    return out


def kfold_predictions(n: int, folds: int, seed: int,
                      predict: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, int]:
    """Held-out prediction of each of ``n`` samples, and the number of folds used.

    The samples are shuffled (``seed``) and split into ``folds`` parts; ``predict(train, test)``
    (index arrays) returns the predictions for ``test`` of a model fitted on ``train``. With fewer
    than 4 samples or fewer than 2 folds nothing is predicted: all nan, 0 folds.
    """
    heldout = np.full(n, np.nan)
    folds = min(int(folds), n) if folds and n >= 4 else 0
    if folds < 2:
        return heldout, 0
    order = np.random.default_rng(seed).permutation(n)
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        heldout[part] = predict(train, part)
    return heldout, folds
