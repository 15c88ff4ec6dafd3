"""A picture of a cluster's interconnect (``placement-env cluster NAME --plot FILE``).

* With a topology (switches and full-duplex links, e.g. ``k80-4gpu``): a tree drawing. The switch with the
  most links is at the top (the host on the K80 machines), every other node one row below the neighbour
  through which a breadth-first search first reaches it, and each parent centred over its children. Every
  link is a line labelled with its bandwidth per direction and its label (e.g. "PCIe 3.0 x16 slot"); a link
  between two nodes of one row (NVLink between GPUs) is an arc below the row.
* Without one (a link per device pair: ``paper-*``, the DGX presets, ``local:N``): the devices on a circle
  and a line per pair, its width and colour by bandwidth, labelled with it (both directions when they differ).

Devices are boxes (the CPU grey, GPUs green) showing name, kind, memory and TFLOP/s; switches are circles.
Drawing uses matplotlib's Agg canvas directly, as :mod:`.gantt` does: no display, no pyplot state.
"""
from __future__ import annotations

import os
import textwrap
from collections import deque
from pathlib import Path

import numpy as np

from ..cluster import Cluster
from ..output_paths import write_output_file

__all__ = ["save_cluster_picture"]

_KIND_COLOURS = {"CPU": "#d9d9d9", "GPU": "#b7e1a1"}
_SWITCH_COLOUR = "#9ecae1"


def _device_label(cluster: Cluster, i: int) -> str:
    d = cluster.devices[i]
    return f"{d.name}\n{d.kind}, {d.memory_bytes / 2**30:.4g} GiB\n{d.peak_flops / 1e12:.3g} TFLOP/s"


def _gbps(bandwidth: float) -> str:
    return f"{bandwidth / 1e9:.3g} GB/s"


def _tree_positions(cluster: Cluster) -> dict[str, tuple[float, float]]:
    """(x, y) of every node of the cluster's topology: breadth-first rows from the best-linked switch, leaves
    one unit apart left to right, each parent centred over its children."""
    topology = cluster.topology
    nodes = [d.name for d in cluster.devices] + list(topology.switches)
    neighbours: dict[str, list[str]] = {node: [] for node in nodes}
    for link in topology.links:
        neighbours[link.a].append(link.b)
        neighbours[link.b].append(link.a)
    candidates = list(topology.switches) or nodes
    root = max(candidates, key=lambda node: len(neighbours[node]))
    children: dict[str, list[str]] = {node: [] for node in nodes}
    depth = {root: 0}
    queue = deque([root])
    while queue:
        node = queue.popleft()
        for other in neighbours[node]:
            if other not in depth:
                depth[other] = depth[node] + 1
                children[node].append(other)
                queue.append(other)
    positions: dict[str, tuple[float, float]] = {}
    next_leaf = [0.0]

    def place(node: str) -> float:
        xs = [place(child) for child in children[node]]
        x = float(np.mean(xs)) if xs else next_leaf[0]
        if not xs:
            next_leaf[0] += 1.0
        positions[node] = (x, -float(depth[node]))
        return x

    place(root)
    deepest = max(depth.values()) + 1
    for node in nodes:  # not linked to the rest (the topology check refuses this for devices)
        if node not in positions:
            positions[node] = (next_leaf[0], -float(deepest))
            next_leaf[0] += 1.0
    return positions


def _draw_node(ax, xy: tuple[float, float], text: str, colour: str, switch: bool) -> None:
    style = "circle,pad=0.35" if switch else "round,pad=0.35"
    ax.annotate(text, xy, ha="center", va="center", fontsize=7, zorder=3,
                bbox={"boxstyle": style, "facecolor": colour, "edgecolor": "0.3"})


def _draw_topology(ax, cluster: Cluster) -> None:
    positions = _tree_positions(cluster)
    lowest = min(y for _, y in positions.values())
    for link in cluster.topology.links:
        (xa, ya), (xb, yb) = positions[link.a], positions[link.b]
        if yb > ya:  # (xb, yb) the lower end: labels sit nearer it, where sibling links are further apart
            (xa, ya), (xb, yb) = (xb, yb), (xa, ya)
        if ya == yb:  # a link within a row (e.g. NVLink between GPUs): an arc below it, deeper the longer
            t = np.linspace(0.0, 1.0, 30)
            dip = 0.3 * abs(xb - xa)
            xs, ys = xa + t * (xb - xa), ya - 4 * dip * t * (1 - t)
            label_at = ((xa + xb) / 2, ya - dip)
            lowest = min(lowest, ya - dip)
        else:
            xs, ys = np.array([xa, xb]), np.array([ya, yb])
            label_at = (xa + 0.62 * (xb - xa), ya + 0.62 * (yb - ya))
        ax.plot(xs, ys, color="0.45", lw=1.2, zorder=1)
        text = "\n".join([_gbps(link.bandwidth), *textwrap.wrap(link.label, 18)])
        ax.annotate(text, label_at, ha="center", va="center", fontsize=6, color="0.15",
                    zorder=2, bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                    "alpha": 0.8})
    for i, d in enumerate(cluster.devices):
        _draw_node(ax, positions[d.name], _device_label(cluster, i), _KIND_COLOURS.get(d.kind, "white"), False)
    for switch in cluster.topology.switches:
        _draw_node(ax, positions[switch], switch, _SWITCH_COLOUR, True)
    xs = [x for x, _ in positions.values()]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(lowest - 0.7, 0.5)


def _draw_pairs(ax, cluster: Cluster) -> None:
    from matplotlib import colormaps

    n = cluster.n_devices
    angle = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    off = ~np.eye(n, dtype=bool)
    finite = cluster.bandwidth[off & np.isfinite(cluster.bandwidth)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (1.0, 1.0)
    cmap = colormaps["viridis"]
    for i in range(n):
        for j in range(i + 1, n):
            there, back = float(cluster.bandwidth[i, j]), float(cluster.bandwidth[j, i])
            share = 0.0 if high == low else (np.log(min(there, back)) - np.log(low)) / (np.log(high) - np.log(low))
            ax.plot(*xy[[i, j]].T, color=cmap(0.15 + 0.7 * share), lw=1.0 + 3.0 * share, zorder=1)
            text = _gbps(there) if there == back else f"{_gbps(there)} / {_gbps(back)}"
            if n <= 5:
                ax.annotate(text, tuple(xy[[i, j]].mean(axis=0)), ha="center", va="center", fontsize=6, zorder=2,
                            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                  "alpha": 0.8})
    for i, d in enumerate(cluster.devices):
        _draw_node(ax, tuple(xy[i]), _device_label(cluster, i), _KIND_COLOURS.get(d.kind, "white"), False)
    if n > 5:
        ax.set_title(f"links per direction: {_gbps(low)} (thin) to {_gbps(high)} (thick)", fontsize=8)
    ax.set_xlim(-1.5, 1.5)
    ax.set_ylim(-1.4, 1.4)


def save_cluster_picture(cluster: Cluster, path: str | os.PathLike[str]) -> Path:
    """Draw ``cluster``'s interconnect (see the module docstring) into the PNG file ``path`` (never through a
    symbolic link: ``output_paths.write_output_file``); the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width = max(6.0, 1.5 * cluster.n_devices + 1.0) if cluster.topology else 7.0
    fig = Figure(figsize=(width, 5.0 if cluster.topology else 6.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    (_draw_topology if cluster.topology is not None else _draw_pairs)(ax, cluster)
    ax.set_axis_off()
    extra = f"; a fixed {cluster.transfer_overhead_s * 1e6:.3g} us per cross-device tensor" \
        if cluster.transfer_overhead_s else ""
    fig.suptitle(f"{cluster.name}: {cluster.n_devices} devices{extra}", fontsize=9)
    fig.tight_layout()
    return write_output_file(path, lambda handle: fig.savefig(handle, format="png", dpi=110))
