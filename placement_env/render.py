"""Pictures and tables of a placed, measured training step: the environment's render modes.

* :func:`gantt_rgb` draws a simulated schedule (``simulate(..., schedule=True)``) as an RGB array:
  one row per device with its ops as bars (coloured by group or by op type; a device that runs
  several ops at once, e.g. a CPU with ``concurrency`` > 1, gets one thin lane per op running
  at once), one thin row per directed link that carried tensors, and a second panel with the
  memory in use on every device over the step next to its capacity. A measurement without a
  schedule (a failed placement, or a runtime that records none) gives a text panel saying why,
  with the per-device table.
* :func:`save_gantt` writes the same picture as a PNG.
* :func:`ansi_table` is the text form: per device its kind, groups and ops placed, busy seconds
  and peak memory against capacity, then runtime, status and bytes moved.

The memory curve is exact for the simulator's memory model (see
:mod:`placement_env.runtime.simulated`): persistent bytes for the whole step, each output from its
producer's start until its last local consumer and last outbound transfer end, each received copy
from its transfer's start until its last consumer on the destination ends. Only the order of
events that share one instant is approximated (frees before allocations), so the drawn curve can
miss a spike of zero duration; the simulator's own ``peak_bytes`` is marked on the curve and used
in every label.

Drawing uses matplotlib's Agg canvas directly (``matplotlib.figure.Figure`` + ``FigureCanvasAgg``),
so it needs no display and never changes the user's pyplot backend. matplotlib is imported on the
first call only.
"""
from __future__ import annotations

import os
import textwrap
from typing import Any

import numpy as np

from .cluster import Cluster
from .opgraph import OpGraph
from .placement import Measurement

__all__ = ["gantt_rgb", "save_gantt", "ansi_table", "memory_curves"]

_DPI = 100
_COLOR_BY = ("group", "type")
_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


# ---------------------------------------------------------------------------------------------
# Small helpers


def _fmt_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps the number >= 1."""
    n = float(n)
    for size, unit in _UNITS:
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _unit_for(n: float) -> tuple[float, str]:
    for size, unit in _UNITS:
        if n >= size:
            return float(size), unit
    return 1.0, "B"


def _fmt_percent(fraction: float) -> str:
    percent = 100.0 * float(fraction)
    if percent == 0 or percent >= 0.01:
        return f"{percent:.3g}%" if percent < 100 else f"{percent:.0f}%"
    return "<0.01%"


def _fmt_seconds(s: float) -> str:
    if not np.isfinite(s):
        return "n/a"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _per_device(values: Any, n: int, dtype: Any) -> np.ndarray | None:
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


def _status(measurement: Measurement) -> str:
    if measurement.ok:
        return "ok"
    return f"FAILED ({measurement.failure})"


# ---------------------------------------------------------------------------------------------
# Text table


def ansi_table(graph: OpGraph, cluster: Cluster, measurement: Measurement) -> str:
    """A plain-text table of ``measurement``: one line per device, then runtime, status and traffic."""
    n = cluster.n_devices
    groups, ops = _placement_counts(graph, cluster, measurement)
    busy = _per_device(measurement.busy_s, n, np.float64)
    peak = _per_device(measurement.peak_bytes, n, np.int64)
    header = ("device", "kind", "groups", "ops", "busy s", "peak mem", "capacity", "use %")
    rows = []
    for d, device in enumerate(cluster.devices):
        cap = device.memory_bytes
        rows.append((
            device.name,
            device.kind,
            "-" if groups is None else str(int(groups[d])),
            "-" if ops is None else str(int(ops[d])),
            "-" if busy is None else f"{busy[d]:.6g}",
            "-" if peak is None else f"{peak[d] / 2**30:.4f} GiB" + (f" ({_fmt_bytes(peak[d])})" if peak[d] else ""),
            f"{cap / 2**30:.2f} GiB",
            "-" if peak is None else f"{100.0 * peak[d] / cap:.2f}" + (" OOM" if peak[d] > cap else ""),
        ))
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(header)]
    left = {0, 1}  # text columns are left-aligned, numbers right-aligned

    def line(cells) -> str:
        return "  ".join(c.ljust(w) if k in left else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))

    out = [f"{graph.name} on {cluster.name}: {graph.n_ops} ops, {graph.n_groups} groups, "
           f"{n} devices (runtime: {measurement.runtime or '?'})",
           line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    runtime = _fmt_seconds(measurement.runtime_s) if measurement.ok else "n/a"
    out.append(f"step time: {runtime}   status: {_status(measurement)}   "
               f"bytes moved: {int(measurement.bytes_moved)} ({_fmt_bytes(measurement.bytes_moved)})")
    if not measurement.ok and measurement.message:
        out.append(f"reason: {measurement.message}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Schedule analysis


def _schedule(measurement: Measurement, graph: OpGraph) -> dict[str, np.ndarray] | None:
    schedule = (measurement.extra or {}).get("schedule")
    if not schedule:
        return None
    try:
        arrays = {k: np.asarray(v) for k, v in schedule.items()}
        if arrays["op_start"].shape != (graph.n_ops,) or arrays["op_device"].shape != (graph.n_ops,):
            return None
        for key in ("transfer_src_op", "transfer_src_device", "transfer_dst_device", "transfer_start",
                    "transfer_end", "transfer_bytes", "op_end"):
            arrays[key]  # noqa: B018 - presence check
    except KeyError:
        return None
    if not np.all(np.isfinite(arrays["op_start"])) or not np.all(np.isfinite(arrays["op_end"])):
        return None
    return arrays


def _transfer_outputs(graph: OpGraph, schedule: dict[str, np.ndarray], n_dev: int) -> np.ndarray | None:
    """Global output index carried by every transfer of ``schedule``, or None if it cannot be matched.

    The simulator numbers transfers by first use of (output, destination device) walking ops in
    index order and each op's out-edges in edge order; the same walk here recovers the outputs.
    """
    dev = schedule["op_device"].astype(np.int64)
    src = graph.edge_src.astype(np.int64)
    slot = graph.edge_src_output.astype(np.int64)
    dst_dev = dev[graph.edge_dst]
    cross = (slot >= 0) & (dst_dev != dev[src])
    gout = graph.output_ptr[src] + np.maximum(slot, 0)
    keys = gout[cross] * n_dev + dst_dev[cross]
    _, first = np.unique(keys, return_index=True)
    order = np.sort(first)  # stable edge order of first use, i.e. the simulator's transfer ids
    edges = np.flatnonzero(cross)[order]
    outputs = gout[edges]
    n_t = len(schedule["transfer_src_op"])
    if (len(edges) != n_t or not np.array_equal(src[edges], schedule["transfer_src_op"])
            or not np.array_equal(dst_dev[edges], schedule["transfer_dst_device"])):
        return None
    return outputs


def memory_curves(graph: OpGraph, cluster: Cluster, measurement: Measurement):
    """Memory in use per device over the step of a simulated schedule.

    Returns ``(times, used)``: ``times`` sorted event instants (length k), ``used[d, j]`` the bytes
    in use on device d from ``times[j]`` until ``times[j + 1]``; None without a schedule. Exact
    for the simulator's memory model except that frees at an instant are applied before the
    allocations at that instant (see the module docstring).
    """
    schedule = _schedule(measurement, graph)
    if schedule is None:
        return None
    n_dev = cluster.n_devices
    dev = schedule["op_device"].astype(np.int64)
    start, end = schedule["op_start"].astype(np.float64), schedule["op_end"].astype(np.float64)
    outputs = _transfer_outputs(graph, schedule, n_dev)
    if outputs is None:
        return None
    owner = np.repeat(np.arange(graph.n_ops), np.diff(graph.output_ptr))
    out_bytes = graph.output_bytes.astype(np.int64)

    src = graph.edge_src.astype(np.int64)
    dst = graph.edge_dst.astype(np.int64)
    slot = graph.edge_src_output.astype(np.int64)
    data = slot >= 0
    gout = graph.output_ptr[src] + np.maximum(slot, 0)
    local = data & (dev[dst] == dev[src])
    # an output lives until its producer ends, its last local consumer ends and its last send ends
    out_free = end[owner].copy()
    np.maximum.at(out_free, gout[local], end[dst[local]])
    t_end = schedule["transfer_end"].astype(np.float64)
    t_start = schedule["transfer_start"].astype(np.float64)
    if len(outputs):
        np.maximum.at(out_free, outputs, t_end)
    # a received copy lives from its transfer's start until its last consumer there ends
    copy_free = t_end.copy()
    if len(outputs):
        index = {int(o) * n_dev + int(d): t for t, (o, d) in enumerate(zip(outputs, schedule["transfer_dst_device"]))}
        remote = np.flatnonzero(data & ~local)
        tids = np.fromiter((index[int(gout[e]) * n_dev + int(dev[dst[e]])] for e in remote), np.int64, len(remote))
        np.maximum.at(copy_free, tids, end[dst[remote]])

    alloc_dev = np.concatenate([dev[owner], schedule["transfer_dst_device"].astype(np.int64)])
    alloc_t0 = np.concatenate([start[owner], t_start])
    alloc_t1 = np.concatenate([out_free, copy_free])
    alloc_b = np.concatenate([out_bytes, schedule["transfer_bytes"].astype(np.int64)])
    keep = alloc_b > 0
    alloc_dev, alloc_t0, alloc_t1, alloc_b = alloc_dev[keep], alloc_t0[keep], alloc_t1[keep], alloc_b[keep]

    persistent = np.bincount(dev, weights=graph.persistent_bytes, minlength=n_dev).astype(np.int64)
    times = np.unique(np.concatenate([[0.0], alloc_t0, alloc_t1]))
    used = np.zeros((n_dev, len(times)), np.int64)
    # +b at the first instant >= t0, -b at the first instant >= t1 (frees first is implicit:
    # the value at an instant is what is in use just after it)
    i0 = np.searchsorted(times, alloc_t0)
    i1 = np.searchsorted(times, alloc_t1)
    np.add.at(used, (alloc_dev, i0), alloc_b)
    np.add.at(used, (alloc_dev, i1), -alloc_b)
    used = np.cumsum(used, axis=1) + persistent[:, None]
    return times, used


def _lanes(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, int]:
    """Greedy lane of every interval (intervals in one lane do not overlap) and the lane count."""
    order = np.lexsort((end, start))
    lane = np.zeros(len(start), np.int64)
    lane_free: list[float] = []
    for i in order:
        s = start[i]
        for k, free in enumerate(lane_free):
            if free <= s:
                lane[i] = k
                lane_free[k] = end[i]
                break
        else:
            lane[i] = len(lane_free)
            lane_free.append(end[i])
    return lane, max(1, len(lane_free))


def _rects(x0, x1, y0, y1) -> np.ndarray:
    """(k, 4, 2) rectangle vertices for a PolyCollection."""
    x0, x1, y0, y1 = (np.broadcast_to(np.asarray(a, np.float64), np.shape(x0)) for a in (x0, x1, y0, y1))
    return np.stack([np.stack([x0, y0], -1), np.stack([x1, y0], -1),
                     np.stack([x1, y1], -1), np.stack([x0, y1], -1)], axis=1)


# ---------------------------------------------------------------------------------------------
# Pictures


def _figure(width: int, height: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _colors(graph: OpGraph, color_by: str) -> np.ndarray:
    """RGBA colour of every op."""
    from matplotlib import colormaps

    if color_by not in _COLOR_BY:
        raise ValueError(f"color_by={color_by!r}: must be one of {_COLOR_BY}")
    if color_by == "group":
        keys = graph.group.astype(np.int64)
    else:
        _, keys = np.unique(graph.op_types, return_inverse=True)
    palette = np.concatenate([colormaps["tab20"](np.arange(20)), colormaps["tab20b"](np.arange(20))])
    # spread neighbouring keys over the palette so adjacent groups differ
    return palette[(keys * 7) % len(palette)]


def _draw_gantt(fig, graph: OpGraph, cluster: Cluster, measurement: Measurement, schedule, color_by: str) -> None:
    from matplotlib.collections import PolyCollection

    n_dev = cluster.n_devices
    names = [d.name for d in cluster.devices]
    dev = schedule["op_device"].astype(np.int64)
    start, end = schedule["op_start"].astype(np.float64), schedule["op_end"].astype(np.float64)
    colors = _colors(graph, color_by)
    makespan = float(max(end.max() if end.size else 0.0,
                         schedule["transfer_end"].max() if len(schedule["transfer_end"]) else 0.0))
    makespan = makespan if makespan > 0 else 1.0
    tscale, tunit = (1e6, "us") if makespan < 1e-3 else (1e3, "ms") if makespan < 1.0 else (1.0, "s")
    start, end = start * tscale, end * tscale
    makespan_s, makespan = makespan, makespan * tscale

    src_d = schedule["transfer_src_device"].astype(np.int64)
    dst_d = schedule["transfer_dst_device"].astype(np.int64)
    links = sorted(set(zip(src_d.tolist(), dst_d.tolist())))
    n_rows = n_dev + len(links)

    labels = names + ["100% busy"] + [f"{names[s]}\u2192{names[t]} 000.0 KiB" for s, t in links]
    left = min(0.35, (30 + 5.6 * max(len(x) for x in labels)) / fig.get_figwidth() / _DPI)
    height_px = fig.get_figheight() * _DPI
    gs = fig.add_gridspec(2, 1, height_ratios=[max(2.0, n_dev + 0.5 * len(links)), 1.5 + 0.15 * n_dev],
                          hspace=min(0.25, 45 / height_px * 2), left=left, right=0.985,
                          top=1 - 45 / height_px, bottom=40 / height_px)
    ax = fig.add_subplot(gs[0])
    mem_ax = fig.add_subplot(gs[1], sharex=ax)

    # device rows: y in [row, row + 0.8], split into lanes where ops overlap
    min_w = makespan * 5e-4  # make instantaneous ops visible as hairlines
    verts, fc = [], []
    y_ticks, y_labels = [], []
    for d in range(n_dev):
        row_top = float(d)
        ops = np.flatnonzero(dev == d)
        y_ticks.append(row_top + 0.4)
        busy = _per_device(measurement.busy_s, n_dev, np.float64)
        label = names[d] if busy is None else f"{names[d]}\n{100 * busy[d] / makespan_s:.0f}% busy"
        y_labels.append(label)
        if not ops.size:
            continue
        lane, n_lanes = _lanes(start[ops], end[ops])
        h = 0.8 / n_lanes
        x0 = start[ops]
        x1 = np.maximum(end[ops], x0 + min_w)
        y0 = row_top + lane * h
        verts.append(_rects(x0, x1, y0 + 0.06 * h, y0 + 0.94 * h))
        fc.append(colors[ops])
    # link rows: thin bands below the devices
    t_start = schedule["transfer_start"].astype(np.float64) * tscale
    t_end = schedule["transfer_end"].astype(np.float64) * tscale
    for k, (s, t) in enumerate(links):
        row_top = n_dev + 0.15 + 0.5 * k
        sel = np.flatnonzero((src_d == s) & (dst_d == t))
        x0 = t_start[sel]
        x1 = np.maximum(t_end[sel], x0 + min_w)
        verts.append(_rects(x0, x1, row_top, row_top + 0.35))
        fc.append(colors[schedule["transfer_src_op"][sel].astype(np.int64)])
        y_ticks.append(row_top + 0.175)
        y_labels.append(f"{names[s]}\u2192{names[t]} {_fmt_bytes(schedule['transfer_bytes'][sel].sum())}")
    if verts:
        ax.add_collection(PolyCollection(np.concatenate(verts), facecolors=np.concatenate(fc),
                                         edgecolors="none", antialiased=False))
    bottom = n_dev + (0.15 + 0.5 * len(links) if links else 0.0)
    ax.set_ylim(bottom + 0.05, -0.1)
    ax.set_xlim(0.0, makespan * 1.01)
    ax.set_yticks(y_ticks)
    ax.set_yticklabels(y_labels, fontsize=8 if n_rows < 12 else 6)
    for d in range(1, n_dev + 1):
        ax.axhline(d - 0.1, color="0.85", lw=0.6)
    ax.grid(axis="x", color="0.9", lw=0.5)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelbottom=False)
    ax.set_title(f"ops coloured by {color_by}; lower rows: transfers per link", fontsize=8, loc="left", color="0.35")

    # memory panel
    curves = memory_curves(graph, cluster, measurement)
    peak = _per_device(measurement.peak_bytes, n_dev, np.int64)
    cap = cluster.memory_bytes.astype(np.float64)
    top = float(max(peak.max() if peak is not None else 0, curves[1].max() if curves else 0, 1))
    scale, unit = _unit_for(top)
    from matplotlib import colormaps

    dev_colors = colormaps["tab10"](np.arange(n_dev) % 10)
    for d in range(n_dev):
        label = names[d]
        if peak is not None:
            label += f": peak {_fmt_bytes(peak[d])} of {_fmt_bytes(cap[d])} ({_fmt_percent(peak[d] / cap[d])})"
        if curves is not None:
            times, used = curves
            x = np.append(times * tscale, makespan * 1.01)
            y = np.append(used[d], used[d][-1]) / scale
            mem_ax.step(x, y, where="post", color=dev_colors[d], lw=1.1, label=label)
        elif peak is not None:
            mem_ax.hlines(peak[d] / scale, 0, makespan, color=dev_colors[d], lw=1.1, label=label + " (peak only)")
        if peak is not None:
            mem_ax.plot([makespan * 1.005], [peak[d] / scale], marker="<", ms=4, color=dev_colors[d])
        if cap[d] <= 1.6 * top:  # capacity line only where it fits the scale (always when near OOM)
            mem_ax.axhline(cap[d] / scale, color=dev_colors[d], ls="--", lw=0.8)
    mem_ax.set_ylim(0, top / scale * 1.15 if all(cap > 1.6 * top) else max(top, cap.min()) / scale * 1.15)
    mem_ax.set_ylabel(f"memory ({unit})", fontsize=8)
    mem_ax.set_xlabel(f"time ({tunit})", fontsize=8)
    mem_ax.tick_params(labelsize=7)
    mem_ax.legend(fontsize=6.5, loc="upper left", frameon=False, ncol=1 if n_dev <= 4 else 2)
    mem_ax.grid(color="0.9", lw=0.5)
    ax.tick_params(labelsize=7)


def _draw_text_panel(fig, graph: OpGraph, cluster: Cluster, measurement: Measurement) -> None:
    if measurement.ok:
        why = ("no schedule recorded for this measurement "
               f"(runtime {measurement.runtime or '?'}; use simulate(..., schedule=True) for a Gantt chart)")
    else:
        why = f"no schedule: the placement failed ({measurement.failure})"
    lines = [why]
    if measurement.message:
        wrapped = textwrap.wrap(measurement.message, 110)
        lines += wrapped[:12] + (["..."] if len(wrapped) > 12 else [])
    table = ansi_table(graph, cluster, measurement).splitlines()
    lines += [""] + [line for line in table if not line.startswith("reason: ")]
    fig.text(0.03, 0.88, "\n".join(lines), family="monospace", fontsize=8, va="top", ha="left",
             color="firebrick" if not measurement.ok else "0.15")


def _title(graph: OpGraph, cluster: Cluster, measurement: Measurement) -> tuple[str, str]:
    if measurement.ok:
        text = (f"{graph.name} on {cluster.name}: step {_fmt_seconds(measurement.runtime_s)}, "
                f"{_fmt_bytes(measurement.bytes_moved)} moved  [ok]")
        return text, "black"
    text = f"{graph.name} on {cluster.name}: FAILED ({measurement.failure})"
    if measurement.failure == "oom" and np.isfinite(measurement.runtime_s):
        text += f", step would take {_fmt_seconds(measurement.runtime_s)}"
    return text, "firebrick"


def _render(graph: OpGraph, cluster: Cluster, measurement: Measurement, width: int, height: int | None,
            color_by: str):
    if color_by not in _COLOR_BY:
        raise ValueError(f"color_by={color_by!r}: must be one of {_COLOR_BY}")
    width = int(width)
    if width < 200:
        raise ValueError(f"width={width}: must be at least 200 pixels")
    schedule = _schedule(measurement, graph)
    if height is None:
        n_links = 0 if schedule is None else len(set(zip(schedule["transfer_src_device"].tolist(),
                                                            schedule["transfer_dst_device"].tolist())))
        height = int(min(2.0, max(0.5, 0.25 + 0.09 * (cluster.n_devices + 0.5 * n_links))) * width)
        height = max(height, 360)
    height = int(height)
    if height < 150:
        raise ValueError(f"height={height}: must be at least 150 pixels")
    fig = _figure(width, height)
    title, color = _title(graph, cluster, measurement)
    fig.suptitle(title, fontsize=10, color=color, x=0.01, ha="left", y=0.985)
    if schedule is None:
        _draw_text_panel(fig, graph, cluster, measurement)
    else:
        _draw_gantt(fig, graph, cluster, measurement, schedule, color_by)
    return fig


def gantt_rgb(graph: OpGraph, cluster: Cluster, measurement: Measurement, *, width: int = 1200,
              height: int | None = None, color_by: str = "group") -> np.ndarray:
    """The schedule of ``measurement`` as an RGB image, shape (height, width, 3), dtype uint8.

    ``measurement`` comes from ``simulate(graph, cluster, op_seconds, placement, schedule=True)``;
    one without a schedule (failed, or from another runtime) renders as a text panel saying why.
    ``height`` defaults to a size that fits the device and link rows; ``color_by`` is ``"group"``
    or ``"type"`` (op type).
    """
    fig = _render(graph, cluster, measurement, width, height, color_by)
    canvas = fig.canvas
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3]
    h, w = image.shape[:2]
    want_h = int(height) if height is not None else int(round(fig.get_figheight() * _DPI))
    want_w = int(width)
    if (h, w) != (want_h, want_w):  # figure inches * dpi rounded differently: pad/crop with white
        out = np.full((want_h, want_w, 3), 255, np.uint8)
        out[:min(h, want_h), :min(w, want_w)] = image[:want_h, :want_w]
        return out
    return np.ascontiguousarray(image, dtype=np.uint8)


def save_gantt(graph: OpGraph, cluster: Cluster, measurement: Measurement, path: str | os.PathLike, *,
               width: int = 1200, height: int | None = None, color_by: str = "group") -> str | os.PathLike:
    """Write the picture of :func:`gantt_rgb` to ``path`` as a PNG; returns ``path``."""
    fig = _render(graph, cluster, measurement, width, height, color_by)
    fig.savefig(os.fspath(path), format="png", dpi=_DPI)
    return path
