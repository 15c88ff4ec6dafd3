"""Measuring placements on the real workers: the data a calibration is fitted to.

Every placement is run with a measured runtime (:class:`~placement_env.runtime.measured.MeasuredRuntime`
or anything with its ``measure(graph, placement)``); a placement that fails or raises is counted by
kind and left out, so one bad measurement never ends a calibration run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from tqdm.auto import tqdm

from ..opgraph import OpGraph

__all__ = ["Samples", "measure_placements"]


@dataclass(frozen=True, eq=False)
class Samples:
    """Measured step times of a list of placements."""

    measured_s: np.ndarray  # [n] seconds, nan where the measurement failed
    failures: dict[str, int]  # failure kind (or exception class name) -> count

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the placements measured successfully."""
        return np.isfinite(self.measured_s)


def measure_placements(graph: OpGraph, placements: np.ndarray, runtime: Any, *, desc: str = "measuring",
                       progress: bool = True, callback: Callable[[int, Any], None] | None = None) -> Samples:
    """Measure every placement with ``runtime.measure``, in order.

    ``callback(k, measurement)`` is called for every measurement that returned (failed ones
    included). A measurement counts when it is ok with a finite, positive step time; otherwise its
    ``failure`` (or ``"error"``), or the class name of what it raised, is counted in ``failures``.
    """
    measured = np.full(len(placements), np.nan)
    failures: dict[str, int] = {}
    bar = tqdm(placements, desc=desc, unit="placement", disable=not progress)
    for k, placement in enumerate(bar):
        try:
            m = runtime.measure(graph, placement)
        except Exception as error:  # noqa: BLE001 - one bad measurement must not end the run
            failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
            continue
        if callback is not None:
            callback(k, m)
        if m.ok and np.isfinite(m.runtime_s) and m.runtime_s > 0:
            measured[k] = m.runtime_s
            bar.set_postfix_str(f"{1e3 * m.runtime_s:.2f} ms")
        else:
            kind = m.failure or "error"
            failures[kind] = failures.get(kind, 0) + 1
    return Samples(measured_s=measured, failures=failures)
