"""The machine a measured row ran on: its processor, core count and widest vector instructions.

Measured step times, and their ratios between placements, depend on the host: a processor with wider vector units
runs the ops faster while the copies between local workers cost the same, so a split placement compares worse
against one worker there. A measured row records ``host_description()`` (``results`` column ``host``) so that rows
from different machines can be told apart; a virtual machine can move to another host between runs.
"""
from __future__ import annotations

import functools
import os
import platform

CPUINFO = "/proc/cpuinfo"
# Vector extensions that set how fast TF's CPU kernels (oneDNN) run, widest first: the first one the processor has
# is recorded.
VECTOR_EXTENSIONS = ("amx_tile", "avx512f", "avx2", "avx")


def _cpuinfo_fields(path: str = CPUINFO) -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` ({} where there is no such file, e.g. not Linux)."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the end of the first processor's block
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return {}
    return fields


@functools.cache
def _this_host() -> tuple[tuple[str, str], ...]:
    """This machine's description, read once per process (immutable, so the cache cannot be changed by a caller)."""
    fields = _cpuinfo_fields()
    flags = set(fields.get("flags", "").split())
    return (("cpu", fields.get("model name") or platform.processor()),
            ("cpus", str(os.cpu_count() or "")),
            ("vector", next((name for name in VECTOR_EXTENSIONS if name in flags), "")))


def host_description() -> dict[str, str]:
    """``{"cpu": model name, "cpus": logical cores, "vector": widest vector extension}`` of this machine, as strings
    ("" where it cannot be read); a new dict each call."""
    return dict(_this_host())


def host_label(host: dict[str, str]) -> str:
    """A host of ``host_description`` in words."""
    return f"{host.get('cpu') or '?'}, {host.get('cpus') or '?'} cpus, {host.get('vector') or 'no avx'}"
