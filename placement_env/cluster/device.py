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
from .checks import (CONCURRENCY_RANGE, FLOPS_RANGE, FRACTION_RANGE, MEMORY_RANGE, bad, bytes_per_s, check_number,
                     is_int, is_real, nonempty_str, seconds)


def device_fields(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Validate and normalise the fields of one device (floats, ints) under ``path``; each number must lie in
    its physical range (see ``checks``)."""
    name = nonempty_str(values["name"], f"{path}.name")
    where = f'device "{name}"'
    kind = values["kind"]
    if not isinstance(kind, str) or kind not in DEVICE_KINDS:
        raise bad(f"{path}.kind", kind, " or ".join(f'"{k}"' for k in DEVICE_KINDS), where)
    memory = values["memory_bytes"]
    if is_real(memory) and not is_int(memory) and math.isfinite(memory) and memory == int(memory):
        memory = int(memory)  # JSON writes large whole numbers as floats (1.2e10)
    tf_device = values["tf_device"]
    if not isinstance(tf_device, str) or not tf_device.startswith("/"):
        raise bad(f"{path}.tf_device", tf_device,
                  'a TF device string such as "/job:localhost/replica:0/task:0/device:GPU:0"', where)
    return {
        "name": name,
        "kind": kind,
        "peak_flops": check_number(values["peak_flops"], f"{path}.peak_flops", *FLOPS_RANGE,
                                   what="a positive number of FLOP/s", where=where),
        "memory_bandwidth": bytes_per_s(values["memory_bandwidth"], f"{path}.memory_bandwidth", where),
        "memory_bytes": check_number(memory, f"{path}.memory_bytes", *MEMORY_RANGE, integer=True,
                                     what="a positive whole number of bytes", where=where),
        "concurrency": check_number(values["concurrency"], f"{path}.concurrency", *CONCURRENCY_RANGE, integer=True,
                                    what="a positive integer (ops that run at once)", where=where),
        "tf_device": tf_device,
        "op_overhead_s": seconds(values.get("op_overhead_s", 0.0), f"{path}.op_overhead_s", where),
        **{key: check_number(values.get(key, 1.0), f"{path}.{key}", *FRACTION_RANGE, what="a fraction", where=where)
           for key in FRACTIONS},
    }


# Fields in FRACTION_RANGE, each 1.0 for an ideal device (see Device).
FRACTIONS = ("compute_efficiency", "memory_efficiency", "op_share")


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
