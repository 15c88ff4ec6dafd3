"""Rewards: small objects that turn the runtime a placement is charged into a number.

A placement is charged its step time when it ran, and the env's failing signal (100 s by default,
as TF's placer) when it did not: out of memory, no kernel, an error or a crash. A :class:`Reward`
maps (charged runtime, reference runtime) to the reward; the reference is the fastest
single-device placement that runs. The env takes a reward by name, a ``Reward``, or any callable
``f(runtime_s, reference_s) -> float``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..cluster.checks import bad_argument, check_bool, check_number, is_real
from ..placement import Measurement

DEFAULT_FAILING_SIGNAL_S = 100.0  # TF's placer: a failed placement counts as a 100 s step


@dataclass(frozen=True)
class Reward:
    """A named reward of (charged runtime s, reference runtime s), with its range.

    ``uses_reference``: whether the reference runtime matters (the env then measures the
    single-device placements once per graph to find it).
    """

    name: str
    function: Callable[[float, float], float]
    range: tuple[float, float] = (-math.inf, math.inf)
    uses_reference: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise bad_argument("name", self.name, "a non-empty string", "Reward")
        if not callable(self.function):
            raise bad_argument("function", self.function, "a callable f(runtime_s, reference_s) -> float", "Reward")
        if not (isinstance(self.range, tuple) and len(self.range) == 2 and all(map(is_real, self.range))
                and self.range[0] <= self.range[1]):
            raise bad_argument("range", self.range, "a tuple (low, high) of numbers with low <= high", "Reward")
        object.__setattr__(self, "uses_reference", check_bool(self.uses_reference, "uses_reference", "Reward",
                                                              bad_argument))
        if not isinstance(self.description, str):
            raise bad_argument("description", self.description, "a string", "Reward")

    def __call__(self, runtime_s: float, reference_s: float = 1.0) -> float:
        return float(self.function(runtime_s, reference_s))


REWARDS: dict[str, Reward] = {reward.name: reward for reward in (
    Reward("neg_sqrt_runtime", lambda runtime, reference: -math.sqrt(runtime), (-math.inf, 0.0),
           description="-sqrt(step seconds), the paper's R = -sqrt(r)"),
    Reward("neg_runtime", lambda runtime, reference: -runtime, (-math.inf, 0.0), description="-step seconds"),
    Reward("speedup", lambda runtime, reference: reference / runtime, (0.0, math.inf), uses_reference=True,
           description="reference runtime / runtime (> 1: faster than the best single device)"),
)}


def resolve_reward(reward: Any) -> Reward:
    """A Reward from a name in REWARDS, a Reward, or a callable ``f(runtime_s, reference_s)``."""
    if isinstance(reward, Reward):
        return reward
    if isinstance(reward, str) and reward in REWARDS:
        return REWARDS[reward]
    if callable(reward):
        return Reward(getattr(reward, "__name__", "custom"), reward, uses_reference=True,
                      description="a user's function of (runtime_s, reference_s)")
    raise bad_argument("reward", reward, f"one of {', '.join(map(repr, REWARDS))}, a Reward, or a callable "
                       "f(runtime_s, reference_s) -> float")


def check_failing_signal(value: object) -> float:
    """``value`` as a float if it is a finite number of seconds > 0, else an ArgumentError."""
    return check_number(value, "failing_signal", 0, low_open=True, error=bad_argument,
                        rule=f"a finite number of seconds > 0 (default {DEFAULT_FAILING_SIGNAL_S:g})")


def charged_runtime(measurement: Measurement, failing_signal: float) -> float:
    """The step time a placement is charged: its runtime when it ran, the failing signal when not."""
    if measurement.ok and math.isfinite(measurement.runtime_s) and measurement.runtime_s > 0:
        return float(measurement.runtime_s)
    return failing_signal
