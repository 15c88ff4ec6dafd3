"""What the seeded model generators (``random_transformer``, ``random_rnn``) share: log-uniform draws, the memory
target a seed draws and the batch that meets it, and the size overrides a caller may give.

A generator draws its architecture from ``numpy.random.default_rng(seed)``, always every value in the same order,
then applies the caller's overrides (a size given as an int replaces the drawn one; None keeps it), so an
override never changes what else the seed draws. The size that meets the drawn memory target by the generator's
rough count of the step's bytes comes last, from the sizes after the overrides (a random Transformer's batch, a
random RNN's units), so that a population of graphs spreads over one device's memory rather than over the
product of every size's range.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import common

__all__ = ["TARGET_GIB", "MAX_BATCH", "log_uniform", "memory_target", "batch_for", "check_overrides"]

# The memory target's range: from a fifth of a K80 die's usable 10.5 GiB to one and a half dies, so that most
# drawn graphs fit one die of the paper's machines and some do not.
TARGET_GIB = (2.0, 16.0)
MAX_BATCH = 256


def log_uniform(rng: np.random.Generator, low: float, high: float, multiple: int = 1) -> int:
    """An int drawn log-uniformly from [low, high], rounded to a multiple of ``multiple`` (at least ``multiple``)."""
    value = math.exp(rng.uniform(math.log(low), math.log(high)))
    return max(multiple, int(round(value / multiple)) * multiple)


def memory_target(rng: np.random.Generator) -> int:
    """Bytes, log-uniform over :data:`TARGET_GIB`."""
    low, high = TARGET_GIB
    return int(math.exp(rng.uniform(math.log(low), math.log(high))) * 2**30)


def batch_for(target_bytes: int, fixed_bytes: float, bytes_per_sequence: float) -> int:
    """The largest batch from 1 to :data:`MAX_BATCH` with ``fixed_bytes + batch * bytes_per_sequence`` within
    ``target_bytes`` (1 when even one sequence passes it)."""
    batch = math.floor((target_bytes - fixed_bytes) / bytes_per_sequence)
    return int(min(MAX_BATCH, max(1, batch)))


def check_overrides(model: str, allowed: tuple[str, ...], overrides: dict[str, Any]) -> dict[str, int | None]:
    """``overrides`` with each value None or a checked int >= 1; TypeError naming a key not in ``allowed``."""
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise TypeError(f"{model}.build() got unknown parameter(s): {', '.join(unknown)}; its parameters are seed "
                        f"and {', '.join(allowed)}")
    return {key: None if value is None else common.require_int(model, key, value) for key, value in overrides.items()}
