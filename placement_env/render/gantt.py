"""The ``rgb_array`` render mode: a simulated step as a Gantt chart.

:func:`gantt_figure` draws the :class:`~placement_env.schedule.Schedule` of a measurement
(``simulate(..., schedule=True)``): one row per device with its ops as bars (coloured by group or
by op type; a device that runs several ops at once, e.g. a CPU with ``concurrency`` > 1, gets one
thin lane per op running at once), one thin row per directed link that carried tensors, and a
second panel with the memory in use on every device over the step next to its capacity. A
measurement without a schedule (a failed placement, or a runtime that records none) gives a text
panel saying why, with the per-device table. :func:`gantt_rgb` returns the picture as an RGB
array, :func:`save_gantt` writes it as a PNG.

Everything drawn comes from the Schedule as the simulator recorded it (bars, links, memory curve
with every change, peaks): nothing of the simulator's model is re-derived here. The data are
plotted in seconds and bytes, and only the tick labels are scaled to us/ms and KiB/MiB/GiB, so
the drawn coordinates are the Schedule's own numbers.

Drawing uses matplotlib's Agg canvas directly (``matplotlib.figure.Figure`` + ``FigureCanvasAgg``),
so it needs no display and never changes the user's pyplot backend. matplotlib is imported on the
first call only.
"""
from __future__ import annotations

import os
import textwrap
from typing import TYPE_CHECKING

import numpy as np

from ..cluster import Cluster
from ..opgraph import OpGraph
from ..placement import Measurement
from ..schedule import Schedule
from .table import ansi_table, per_device
from .units import byte_unit, fmt_bytes, fmt_percent, fmt_seconds, time_unit

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["gantt_figure", "gantt_rgb", "save_gantt", "COLOR_BY"]

COLOR_BY = ("group", "type")
_DPI = 100
_MIN_BAR = 5e-4  # shortest bar drawn, as a fraction of the step, so instantaneous ops stay visible


# ---------------------------------------------------------------------------------------------
# Bars


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


def _op_bars(schedule: Schedule, min_width: float) -> np.ndarray:
    """One rectangle per op, in op index order: device d's row is y in [d, d + 0.8], split into lanes."""
    start, end, dev = schedule.op_start, schedule.op_end, schedule.op_device
    y0 = np.zeros(len(dev))
    height = np.full(len(dev), 0.8)
    for d in np.unique(dev):
        ops = np.flatnonzero(dev == d)
        lane, n_lanes = _lanes(start[ops], end[ops])
        height[ops] = 0.8 / n_lanes
        y0[ops] = d + lane * height[ops]
    return _rects(start, np.maximum(end, start + min_width), y0 + 0.06 * height, y0 + 0.94 * height)


def _link_rows(schedule: Schedule, n_devices: int) -> np.ndarray:
    """Top of every link's row, below the device rows."""
    return n_devices + 0.15 + 0.5 * np.arange(len(schedule.links))


def _transfer_bars(schedule: Schedule, n_devices: int, min_width: float) -> np.ndarray:
    """One rectangle per transfer, in the Schedule's order, on its link's row."""
    start = schedule.transfer_start
    top = _link_rows(schedule, n_devices)[schedule.transfer_link]
    return _rects(start, np.maximum(schedule.transfer_end, start + min_width), top, top + 0.35)


def _colors(graph: OpGraph, color_by: str) -> np.ndarray:
    """RGBA colour of every op."""
    from matplotlib import colormaps

    if color_by == "group":
        keys = graph.group.astype(np.int64)
    else:
        _, keys = np.unique(graph.op_types, return_inverse=True)
    palette = np.concatenate([colormaps["tab20"](np.arange(20)), colormaps["tab20b"](np.arange(20))])
    # spread neighbouring keys over the palette so adjacent groups differ
    return palette[(keys * 7) % len(palette)]


# ---------------------------------------------------------------------------------------------
# Panels


def _axes(fig, cluster: Cluster, schedule: Schedule):
    """The timeline axes (devices and links) above the memory axes, sharing time."""
    names = [d.name for d in cluster.devices]
    links = schedule.links.tolist()
    labels = names + ["100% busy"] + [f"{names[s]}\u2192{names[t]} 000.0 KiB" for s, t in links]
    left = min(0.35, (30 + 5.6 * max(len(x) for x in labels)) / fig.get_figwidth() / _DPI)
    height_px = fig.get_figheight() * _DPI
    n_dev = cluster.n_devices
    gs = fig.add_gridspec(2, 1, height_ratios=[max(2.0, n_dev + 0.5 * len(links)), 1.5 + 0.15 * n_dev],
                          hspace=min(0.25, 45 / height_px * 2), left=left, right=0.985,
                          top=1 - 45 / height_px, bottom=40 / height_px)
    ax = fig.add_subplot(gs[0])
    return ax, fig.add_subplot(gs[1], sharex=ax)


def _draw_timeline(ax, graph: OpGraph, cluster: Cluster, measurement: Measurement, schedule: Schedule,
                   color_by: str) -> None:
    """Ops on their device rows, transfers on their link rows."""
    from matplotlib.collections import PolyCollection

    n_dev = cluster.n_devices
    names = [d.name for d in cluster.devices]
    makespan = schedule.makespan or 1.0
    colors = _colors(graph, color_by)
    min_width = makespan * _MIN_BAR
    for gid, bars, facecolors in (("ops", _op_bars(schedule, min_width), colors),
                                  ("transfers", _transfer_bars(schedule, n_dev, min_width),
                                   colors[schedule.transfer_src_op])):
        collection = PolyCollection(bars, facecolors=facecolors, edgecolors="none", antialiased=False)
        collection.set_gid(gid)
        ax.add_collection(collection)
    busy = per_device(measurement.busy_s, n_dev, np.float64)
    labels = [names[d] if busy is None else f"{names[d]}\n{100 * busy[d] / makespan:.0f}% busy" for d in range(n_dev)]
    labels += [f"{names[s]}\u2192{names[t]} {fmt_bytes(b)}"
               for (s, t), b in zip(schedule.links.tolist(), schedule.link_bytes.tolist())]
    link_rows = _link_rows(schedule, n_dev)
    ax.set_yticks(np.concatenate([np.arange(n_dev) + 0.4, link_rows + 0.175]))
    ax.set_yticklabels(labels, fontsize=8 if len(labels) < 12 else 6)
    ax.set_ylim(n_dev + (0.15 + 0.5 * len(link_rows) if len(link_rows) else 0.0) + 0.05, -0.1)
    ax.set_xlim(0.0, makespan * 1.01)
    for d in range(1, n_dev + 1):
        ax.axhline(d - 0.1, color="0.85", lw=0.6)
    ax.grid(axis="x", color="0.9", lw=0.5)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelbottom=False)
    ax.tick_params(labelsize=7)
    ax.set_title(f"ops coloured by {color_by}; lower rows: transfers per link", fontsize=8, loc="left", color="0.35")


def _draw_memory(ax, cluster: Cluster, schedule: Schedule) -> None:
    """Bytes in use per device over the step (every recorded change), peaks and capacities."""
    from matplotlib import colormaps
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    n_dev = cluster.n_devices
    makespan = schedule.makespan or 1.0
    peak = schedule.memory_peak
    cap = cluster.memory_bytes.astype(np.float64)
    top = float(max(peak.max(), 1))
    dev_colors = colormaps["tab10"](np.arange(n_dev) % 10)
    times = np.append(schedule.memory_time, makespan * 1.01)
    for d, device in enumerate(cluster.devices):
        label = f"{device.name}: peak {fmt_bytes(peak[d])} of {fmt_bytes(cap[d])} ({fmt_percent(peak[d] / cap[d])})"
        used = schedule.memory_in_use[d]
        (curve,) = ax.step(times, np.append(used, used[-1]), where="post", color=dev_colors[d], lw=1.1, label=label)
        curve.set_gid(f"memory {d}")
        ax.plot([makespan * 1.005], [peak[d]], marker="<", ms=4, color=dev_colors[d])
        if cap[d] <= 1.6 * top:  # capacity line only where it fits the scale (always when near OOM)
            ax.axhline(cap[d], color=dev_colors[d], ls="--", lw=0.8)
    y_top = (top if all(cap > 1.6 * top) else max(top, cap.min())) * 1.15
    ax.set_ylim(0, y_top)
    scale, unit = byte_unit(top)
    nbins = int(np.clip(ax.yaxis.get_tick_space(), 1, 9))  # as matplotlib's own automatic ticks
    ticks = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(0, y_top / scale) * scale
    ax.yaxis.set_major_locator(FixedLocator(ticks[ticks <= y_top]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y / scale:g}"))
    time_scale, time_name = time_unit(makespan)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x * time_scale:g}"))
    ax.set_ylabel(f"memory ({unit})", fontsize=8)
    ax.set_xlabel(f"time ({time_name})", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6.5, loc="upper left", frameon=False, ncol=1 if n_dev <= 4 else 2)
    ax.grid(color="0.9", lw=0.5)


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
        text = (f"{graph.name} on {cluster.name}: step {fmt_seconds(measurement.runtime_s)}, "
                f"{fmt_bytes(measurement.bytes_moved)} moved  [ok]")
        return text, "black"
    text = f"{graph.name} on {cluster.name}: FAILED ({measurement.failure})"
    if measurement.failure == "oom" and np.isfinite(measurement.runtime_s):
        text += f", step would take {fmt_seconds(measurement.runtime_s)}"
    return text, "firebrick"


# ---------------------------------------------------------------------------------------------
# Figures


def _schedule_of(graph: OpGraph, cluster: Cluster, measurement: Measurement) -> Schedule | None:
    schedule = measurement.schedule
    if schedule is not None and (len(schedule.op_device) != graph.n_ops or schedule.n_devices != cluster.n_devices):
        raise ValueError(f"the measurement's schedule has {len(schedule.op_device)} ops on {schedule.n_devices} "
                         f"devices, but {graph.name!r} on {cluster.name!r} has {graph.n_ops} ops on "
                         f"{cluster.n_devices} devices")
    return schedule


def _height(cluster: Cluster, schedule: Schedule | None, width: int, height: int | None) -> int:
    """``height``, or by default a height that fits the device and link rows."""
    if height is None:
        n_links = 0 if schedule is None else len(schedule.links)
        height = int(min(2.0, max(0.5, 0.25 + 0.09 * (cluster.n_devices + 0.5 * n_links))) * width)
        height = max(height, 360)
    height = int(height)
    if height < 150:
        raise ValueError(f"height={height}: must be at least 150 pixels")
    return height


def gantt_figure(graph: OpGraph, cluster: Cluster, measurement: Measurement, *, width: int = 1200,
                 height: int | None = None, color_by: str = "group") -> Figure:
    """The picture of :func:`gantt_rgb` as a matplotlib ``Figure`` on an Agg canvas.

    With a schedule, its first axes hold the timeline (PolyCollections with gid ``"ops"``, one bar
    per op in op order, and ``"transfers"``, one bar per transfer in the Schedule's order) and its
    second the memory panel (one step line per device, gid ``"memory <d>"``), all in seconds and bytes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if color_by not in COLOR_BY:
        raise ValueError(f"color_by={color_by!r}: must be one of {COLOR_BY}")
    width = int(width)
    if width < 200:
        raise ValueError(f"width={width}: must be at least 200 pixels")
    schedule = _schedule_of(graph, cluster, measurement)
    height = _height(cluster, schedule, width, height)
    fig = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    FigureCanvasAgg(fig)
    title, color = _title(graph, cluster, measurement)
    fig.suptitle(title, fontsize=10, color=color, x=0.01, ha="left", y=0.985)
    if schedule is None:
        _draw_text_panel(fig, graph, cluster, measurement)
    else:
        ax, mem_ax = _axes(fig, cluster, schedule)
        _draw_timeline(ax, graph, cluster, measurement, schedule, color_by)
        _draw_memory(mem_ax, cluster, schedule)
    return fig


def gantt_rgb(graph: OpGraph, cluster: Cluster, measurement: Measurement, *, width: int = 1200,
              height: int | None = None, color_by: str = "group") -> np.ndarray:
    """The schedule of ``measurement`` as an RGB image, shape (height, width, 3), dtype uint8.

    ``measurement`` comes from ``simulate(graph, cluster, op_seconds, placement, schedule=True)``;
    one without a schedule (failed, or from another runtime) renders as a text panel saying why.
    ``height`` defaults to a size that fits the device and link rows; ``color_by`` is ``"group"``
    or ``"type"`` (op type).
    """
    fig = gantt_figure(graph, cluster, measurement, width=width, height=height, color_by=color_by)
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
    fig = gantt_figure(graph, cluster, measurement, width=width, height=height, color_by=color_by)
    fig.savefig(os.fspath(path), format="png", dpi=_DPI)
    return path
