"""The agent's hyper-parameters (:class:`Config`) and the two presets that switch on its deviations from the
paper: ``SELF_IMITATION`` (from scratch) and ``FINE_TUNING`` (after a warm start).

The defaults are the paper's setting plus advantage normalisation; docs/findings.md has the experiments
behind the presets."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from placement_env import DEFAULT_FAILING_SIGNAL_S, METHODS


def is_integer(value: Any) -> bool:
    """An int (or numpy integer), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """A finite int or float (or numpy number), not a bool."""
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Config:
    """Hyper-parameters (stored in the checkpoint; a resumed run keeps its own)."""

    samples: int = 16  # K placements per update
    hidden: int = 256
    lr: float = 3e-3
    entropy: float = 0.01  # beta, on the entropy of a whole placement (sum over groups, nats)
    baseline_decay: float = 0.9
    grad_clip: float = 1.0
    temperature: float = 1.0
    logits_noise: float = 0.5
    noise_updates: int = 50  # logits noise for this many updates, then none
    explore: float = 0.0  # per placement, the expected number of groups given a uniformly random allowed device
    normalize_advantages: bool = True
    advantage_clip: float = 5.0
    failing_signal: float = DEFAULT_FAILING_SIGNAL_S  # the runtime charged for a placement that fails
    warm_start: str | None = None  # a baseline method (or "best") whose placement the policy imitates first
    warm_start_prob: float = 0.999  # ... until it gives that placement this probability per group
    self_imitation: float = 0.0  # weight of -log p(elite) in the loss (0: off, as in the paper)
    elites: int = 4  # the fastest distinct placements seen so far that self-imitation pulls towards
    local_moves: int = 0  # this many (at most K - 1) of the K per update are the best with a few groups moved

    def __post_init__(self) -> None:
        """A clear ValueError for a value out of range (also for a checkpoint's or ``dataclasses.replace``'s)."""
        for field in dataclasses.fields(self):
            accepted = field_error(field.name, getattr(self, field.name))
            if accepted:
                raise ValueError(f"Config.{field.name}={getattr(self, field.name)!r}; expected {accepted}")


def warm_start_choices() -> tuple[str, ...]:
    """The names ``Config.warm_start`` (and ``--warm-start``) accept: "best" or a baseline method."""
    return ("best", *METHODS)


MAX_HIDDEN = 4096  # the largest LSTM size (the paper's: 256); the decoder then holds 200 million weights


def _integer_in(low: int, high: int) -> tuple[str, Callable[[Any], bool]]:
    return f"an integer from {low:,} to {high:,}", lambda v: is_integer(v) and low <= v <= high


def _number_in(low: float, high: float, *, low_open: bool = False) -> tuple[str, Callable[[Any], bool]]:
    lowest = f"> {low:g}" if low_open else f">= {low:g}"
    return (f"a finite number {lowest} and <= {high:g}",
            lambda v: is_finite_number(v) and (v > low if low_open else v >= low) and v <= high)


# Upper limits keep every value where training stays finite (a larger one overflows the logits, the loss or
# the batch), far beyond any setting that trains: the paper's lr 0.1 at most, temperatures about 1, K = 16.
_FIELD_CHECKS: dict[str, tuple[str, Callable[[Any], bool]]] = {  # name -> (what is accepted, test)
    "samples": _integer_in(1, 4096),  # placements per update, all held in one batch
    "elites": _integer_in(1, 1024),
    "hidden": (f"an even integer from 2 to {MAX_HIDDEN}",
               lambda v: is_integer(v) and 2 <= v <= MAX_HIDDEN and v % 2 == 0),
    **{name: _integer_in(0, 10**9) for name in ("local_moves", "noise_updates")},
    "lr": _number_in(0, 10, low_open=True),
    "temperature": _number_in(1e-3, 1e3),  # logits are divided by it
    **{name: _number_in(0, 1e6, low_open=True) for name in ("grad_clip", "advantage_clip")},
    "failing_signal": _number_in(0, 1e6, low_open=True),  # seconds, as results files accept runtimes
    **{name: _number_in(0, 1e3) for name in ("entropy", "logits_noise", "self_imitation")},
    "explore": _number_in(0, 1e6),  # groups per placement
    **{name: _number_in(0, 1) for name in ("baseline_decay", "warm_start_prob")},
    "normalize_advantages": ("True or False", lambda v: isinstance(v, (bool, np.bool_))),
    "warm_start": ("None, 'best' or a method of placement_env.METHODS",
                   lambda v: v is None or (isinstance(v, str) and v in warm_start_choices())),
}


def field_error(name: str, value: Any) -> str | None:
    """What ``Config.<name>`` accepts if ``value`` is not accepted; None if it is."""
    accepted, test = _FIELD_CHECKS[name]
    return None if test(value) else accepted


# From scratch (place_self_imitation): pull towards the best placement so far, and explore 2 groups per sample.
SELF_IMITATION = {"self_imitation": 1.0, "elites": 1, "explore": 2.0}
# After a warm start these replace the Config defaults (flags still win): a lower lr and no logits noise keep the
# imitated placement; a floor of 1 group and 2 local moves per update search close to the best placement.
FINE_TUNING = {**SELF_IMITATION, "explore": 1.0, "lr": 1e-3, "logits_noise": 0.0, "local_moves": 2}
