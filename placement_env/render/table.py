"""The ``ansi`` render mode: a plain-text table of a measurement, one line per device.

Per device its kind, the groups and ops placed there, busy seconds and peak memory against
capacity; then step time, status and bytes moved, and the reason of a failure. Also the escaping
of text (e.g. task names read from a results file) put into a Markdown table, heading or link.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from ..cluster import Cluster
from ..opgraph import OpGraph
from ..placement import Measurement
from .units import fmt_bytes, fmt_seconds

__all__ = ["ansi_table", "markdown_row", "markdown_text", "per_device", "plot_text"]

_MARKDOWN_SPECIAL = re.compile(r"([\\`|\[\]<>])")  # a backslash before each keeps it literal
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")  # line breaks and other control characters

_HEADER = ("device", "kind", "groups", "ops", "busy s", "peak mem", "capacity", "use %")
_LEFT = {0, 1}  # text columns are left-aligned, numbers right-aligned


def markdown_text(text: Any) -> str:
    """``text`` as it reads, for one Markdown table cell, heading or link text: backslashes, backticks, ``|``,
    brackets and angle brackets escaped, each run of line breaks and other control characters one space."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _CONTROL.sub(" ", str(text)))


def plot_text(text: Any) -> str:
    """``text`` for a matplotlib title, tick or legend label, drawn as it reads: dollar signs escaped (so it is
    never parsed as mathematics, which may fail), control characters as spaces."""
    return _CONTROL.sub(" ", str(text)).replace("$", r"\$")


def markdown_row(cells: Iterable[Any]) -> str:
    """One Markdown table row of ``cells``, each escaped with :func:`markdown_text`."""
    return "| " + " | ".join(markdown_text(cell) for cell in cells) + " |"


def per_device(values: Any, n: int, dtype: Any) -> np.ndarray | None:
    """``values`` as an array of one entry per device, or None if the measurement has none."""
    array = np.asarray(values, dtype=dtype)
    return array if array.shape == (n,) else None


def _placement_counts(graph: OpGraph, cluster: Cluster, measurement: Measurement):
    """(groups per device, ops per device), or (None, None) without a usable placement."""
    placement = np.asarray(measurement.placement)
    if placement.shape != (graph.n_groups,) or not placement.size:
        return None, None
    placement = placement.astype(np.int64)
    if placement.min() < 0 or placement.max() >= cluster.n_devices:
        return None, None
    groups = np.bincount(placement, minlength=cluster.n_devices)
    ops = np.bincount(placement[graph.group], minlength=cluster.n_devices)
    return groups, ops


def _device_rows(graph: OpGraph, cluster: Cluster, measurement: Measurement) -> list[tuple[str, ...]]:
    n = cluster.n_devices
    groups, ops = _placement_counts(graph, cluster, measurement)
    busy = per_device(measurement.busy_s, n, np.float64)
    peak = per_device(measurement.peak_bytes, n, np.int64)
    rows = []
    for d, device in enumerate(cluster.devices):
        cap = device.memory_bytes
        rows.append((
            device.name,
            device.kind,
            "-" if groups is None else str(int(groups[d])),
            "-" if ops is None else str(int(ops[d])),
            "-" if busy is None else f"{busy[d]:.6g}",
            "-" if peak is None else f"{peak[d] / 2**30:.4f} GiB" + (f" ({fmt_bytes(peak[d])})" if peak[d] else ""),
            f"{cap / 2**30:.2f} GiB",
            "-" if peak is None else f"{100.0 * peak[d] / cap:.2f}" + (" OOM" if peak[d] > cap else ""),
        ))
    return rows


def _status(measurement: Measurement) -> str:
    if measurement.ok:
        return "ok"
    return f"FAILED ({measurement.failure})"


def ansi_table(graph: OpGraph, cluster: Cluster, measurement: Measurement) -> str:
    """A plain-text table of ``measurement``: one line per device, then runtime, status and traffic."""
    rows = _device_rows(graph, cluster, measurement)
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(_HEADER)]

    def line(cells) -> str:
        return "  ".join(c.ljust(w) if k in _LEFT else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))

    out = [f"{graph.name} on {cluster.name}: {graph.n_ops} ops, {graph.n_groups} groups, "
           f"{cluster.n_devices} devices (runtime: {measurement.runtime or '?'})",
           line(_HEADER), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    runtime = fmt_seconds(measurement.runtime_s) if measurement.ok else "n/a"
    out.append(f"step time: {runtime}   status: {_status(measurement)}   "
               f"bytes moved: {int(measurement.bytes_moved)} ({fmt_bytes(measurement.bytes_moved)})")
    if not measurement.ok and measurement.message:
        out.append(f"reason: {measurement.message}")
    return "\n".join(out) + "\n"
