"""Rewards: small objects that turn a placement's Measurement into a number.

A placement is charged its step time when it ran, and the env's failing signal (100 s by default,
as TF's placer) when it did not: out of memory, no kernel, an error or a crash. A :class:`Reward`
is called as ``reward(measurement, context)``: the placement's :class:`~placement_env.Measurement` and a
:class:`RewardContext`, what the env knows besides it (the failing signal, the reference runtime, the
simulator's lower bound, each device's memory). Most rewards need only the charged runtime and the
reference (the fastest single-device placement that runs): a Reward made with ``takes="runtime"`` (the
default) wraps a function ``f(charged_runtime_s, reference_s)``; one made with ``takes="measurement"``
wraps ``f(measurement, context)`` and sees everything (e.g. how far a failed placement went over memory).
The env takes a reward by name, a ``Reward``, or any callable ``f(runtime_s, reference_s) -> float``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..cluster.checks import bad_argument, check_bool, check_number, is_real
from ..placement import Measurement

DEFAULT_FAILING_SIGNAL_S = 100.0  # TF's placer: a failed placement counts as a 100 s step


@dataclass(frozen=True, eq=False)
class RewardContext:
    """What a reward may read besides the placement's Measurement: the seconds a failed placement is charged
    (``failing_signal_s``), the reference placement's charged runtime (``reference_s``; the env measures it only
    for a reward whose ``uses_reference`` is True, and passes 1.0 otherwise), the simulator's lower bound on the
    step time (``lower_bound_s``, nan when unknown) and each device's memory in bytes (``capacity_bytes``, None when
    unknown)."""

    failing_signal_s: float = DEFAULT_FAILING_SIGNAL_S
    reference_s: float = 1.0
    lower_bound_s: float = math.nan
    capacity_bytes: np.ndarray | None = None

    def charged(self, measurement: Measurement) -> float:
        """The runtime ``measurement`` is charged: its runtime when it ran, else the failing signal."""
        return charged_runtime(measurement, self.failing_signal_s)


REWARD_INPUTS = ("runtime", "measurement")  # what a Reward's function takes (Reward.takes)


@dataclass(frozen=True)
class Reward:
    """A named reward, with its range: ``reward(measurement, context) -> float``.

    ``takes="runtime"`` (the default): ``function(charged_runtime_s, reference_s)``, the charged runtime being
    ``context.charged(measurement)`` and the reference ``context.reference_s``. ``takes="measurement"``:
    ``function(measurement, context)`` with the :class:`RewardContext` as it is. ``uses_reference``: whether the
    reference runtime matters (the env then measures the single-device placements once per graph to find it).
    """

    name: str
    function: Callable[..., float]
    range: tuple[float, float] = (-math.inf, math.inf)
    uses_reference: bool = False
    description: str = ""
    takes: str = "runtime"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise bad_argument("name", self.name, "a non-empty string", "Reward")
        if not callable(self.function):
            raise bad_argument("function", self.function, "a callable f(runtime_s, reference_s) -> float, or "
                               "f(measurement, context) -> float with takes='measurement'", "Reward")
        if not (isinstance(self.range, tuple) and len(self.range) == 2 and all(map(is_real, self.range))
                and self.range[0] <= self.range[1]):
            raise bad_argument("range", self.range, "a tuple (low, high) of numbers with low <= high", "Reward")
        object.__setattr__(self, "uses_reference", check_bool(self.uses_reference, "uses_reference", "Reward",
                                                              bad_argument))
        if not isinstance(self.description, str):
            raise bad_argument("description", self.description, "a string", "Reward")
        if not isinstance(self.takes, str) or self.takes not in REWARD_INPUTS:
            raise bad_argument("takes", self.takes, f"one of {', '.join(map(repr, REWARD_INPUTS))}", "Reward")

    def __call__(self, measurement: Measurement, context: RewardContext | None = None) -> float:
        """The reward of ``measurement`` in ``context`` (default: ``RewardContext()``, the default failing signal
        and a reference of 1 s)."""
        if not isinstance(measurement, Measurement):
            raise bad_argument("measurement", measurement, "a Measurement: a Reward is called as "
                               "reward(measurement, context), context a RewardContext", f"Reward {self.name!r}")
        context = RewardContext() if context is None else context
        if not isinstance(context, RewardContext):
            raise bad_argument("context", context, "None or a RewardContext", f"Reward {self.name!r}")
        if self.takes == "measurement":
            return float(self.function(measurement, context))
        return float(self.function(context.charged(measurement), context.reference_s))


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
