"""Rewards by name, from the runtime a placement is charged (its step time, or the failing signal)."""
from __future__ import annotations

import math
from typing import Callable

from ..placement import Measurement

DEFAULT_FAILING_SIGNAL_S = 100.0  # TF's placer: a failed placement counts as a 100 s step

# reward(runtime charged, runtime of the reference placement)
REWARDS: dict[str, Callable[[float, float], float]] = {
    "neg_sqrt_runtime": lambda runtime, reference: -math.sqrt(runtime),  # the paper's R = -sqrt(r)
    "neg_runtime": lambda runtime, reference: -runtime,
    "speedup": lambda runtime, reference: reference / runtime,  # > 1: faster than the reference
}


def check_reward(name: object) -> str:
    if name not in REWARDS:
        raise ValueError(f"reward={name!r}; expected one of {', '.join(map(repr, REWARDS))}")
    return name  # type: ignore[return-value]


def check_failing_signal(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"failing_signal={value!r}; expected a positive number of seconds (default "
                         f"{DEFAULT_FAILING_SIGNAL_S:g})")
    return float(value)


def charged_runtime(measurement: Measurement, failing_signal: float) -> float:
    """The step time a placement is charged: its runtime when it ran, the failing signal when not."""
    if measurement.ok and math.isfinite(measurement.runtime_s) and measurement.runtime_s > 0:
        return float(measurement.runtime_s)
    return failing_signal
