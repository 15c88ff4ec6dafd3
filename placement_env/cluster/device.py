"""One device of a cluster (``Device``) and the rules its fields follow.

The rules live here, once, because a device is built three ways that must agree: directly
(``Device(...)``), from the cluster JSON form (``schema``), and from a probed TF cluster.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..opgraph import DEVICE_KINDS
from .checks import BANDWIDTH_RULE, bad, is_int, is_real, nonempty_str, positive, seconds


def device_fields(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Validate and normalise the fields of one device (floats, ints) under ``path``."""
    name = nonempty_str(values["name"], f"{path}.name")
    where = f'device "{name}"'
    kind = values["kind"]
    if kind not in DEVICE_KINDS:
        raise bad(f"{path}.kind", kind, " or ".join(f'"{k}"' for k in DEVICE_KINDS), where)
    memory = values["memory_bytes"]
    if not is_real(memory) or not math.isfinite(memory) or memory <= 0 or memory != int(memory):
        raise bad(f"{path}.memory_bytes", memory, "a positive whole number of bytes", where)
    concurrency = values["concurrency"]
    if not is_int(concurrency) or concurrency < 1:
        raise bad(f"{path}.concurrency", concurrency, "a positive integer (ops that run at once)", where)
    tf_device = values["tf_device"]
    if not isinstance(tf_device, str) or not tf_device.startswith("/"):
        raise bad(f"{path}.tf_device", tf_device,
                  'a TF device string such as "/job:localhost/replica:0/task:0/device:GPU:0"', where)
    return {
        "name": name,
        "kind": kind,
        "peak_flops": positive(values["peak_flops"], f"{path}.peak_flops", "a positive number of FLOP/s", where),
        "memory_bandwidth": positive(values["memory_bandwidth"], f"{path}.memory_bandwidth",
                                     BANDWIDTH_RULE, where),
        "memory_bytes": int(memory),
        "concurrency": int(concurrency),
        "tf_device": tf_device,
        "op_overhead_s": seconds(values.get("op_overhead_s", 0.0), f"{path}.op_overhead_s", where),
        **{key: _fraction(values.get(key, 1.0), f"{path}.{key}", where) for key in FRACTIONS},
    }


# Fields in (0, 1], each 1.0 for an ideal device (see Device).
FRACTIONS = ("compute_efficiency", "memory_efficiency", "op_share")


def _fraction(value: object, path: str, where: str) -> float:
    if not is_real(value) or not 0 < value <= 1:
        raise bad(path, value, "a number in (0, 1]", where)
    return float(value)


@dataclass(frozen=True)
class Device:
    """One device: its speed, memory and how many ops it runs at once."""

    name: str  # unique in its cluster, e.g. "cpu:0", "gpu:1"
    kind: str  # one of DEVICE_KINDS
    peak_flops: float  # fp32 FLOP/s
    memory_bandwidth: float  # bytes/s between the device and its own memory
    memory_bytes: int  # capacity
    concurrency: int  # ops at once: 1 compute stream for a GPU, inter-op threads for a CPU
    tf_device: str  # the TF device string ops are pinned to
    op_overhead_s: float = 0.0  # fixed cost of running any op (executor dispatch, kernel launch), seconds
    # Achieved over peak: the share of peak FLOP/s and of memory bandwidth real kernels reach.
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    # The largest share of the device's throughput one op can use: a CPU kernel keeps a few of
    # its cores busy (the rest serve other ops), a GPU's one stream is all of it.
    op_share: float = 1.0

    def __post_init__(self) -> None:
        for key, value in device_fields(vars(self), "Device").items():
            object.__setattr__(self, key, value)


def check_unique(devices: Sequence[Device]) -> None:
    """Fail unless every device has its own name and its own TF device string."""
    for key in ("name", "tf_device"):
        seen: dict[str, int] = {}
        for i, device in enumerate(devices):
            value = getattr(device, key)
            if value in seen:
                raise bad(f"devices[{i}].{key}", value, f"unique; devices[{seen[value]}] already uses it")
            seen[value] = i
