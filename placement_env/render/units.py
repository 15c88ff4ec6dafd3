"""Human-readable bytes, seconds and percentages, shared by the Gantt chart and the text table."""
from __future__ import annotations

import numpy as np

__all__ = ["fmt_bytes", "byte_unit", "time_unit", "fmt_percent", "fmt_seconds"]

_BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def fmt_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps the number >= 1, e.g. ``"1.5 MiB"``."""
    n = float(n)
    for size, unit in _BYTE_UNITS:
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def byte_unit(n: float) -> tuple[float, str]:
    """(bytes per unit, unit name) of the largest binary unit not above ``n``; (1, "B") below 1 KiB."""
    for size, unit in _BYTE_UNITS:
        if n >= size:
            return float(size), unit
    return 1.0, "B"


def time_unit(seconds: float) -> tuple[float, str]:
    """(units per second, unit name) for an axis that spans ``seconds``: us, ms or s."""
    if seconds < 1e-3:
        return 1e6, "us"
    if seconds < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


def fmt_percent(fraction: float) -> str:
    """``fraction`` as a percentage with 3 significant digits; tiny non-zero values as ``"<0.01%"``."""
    percent = 100.0 * float(fraction)
    if percent == 0 or percent >= 0.01:
        return f"{percent:.3g}%" if percent < 100 else f"{percent:.0f}%"
    return "<0.01%"


def fmt_seconds(s: float) -> str:
    """``s`` seconds in s, ms or us; ``"n/a"`` when not finite."""
    if not np.isfinite(s):
        return "n/a"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"
