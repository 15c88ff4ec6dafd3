"""The learning curve PNGs: pre-training's (the samples' mean reward per update and the greedy placements'
runtime against the best heuristic, geometric mean over the tasks, over evaluations) and the cost model's
(training loss and held-out Spearman correlation over steps)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from agents.common.run_files import write_png


def plot_training(path: Path, rows: Sequence[dict[str, float]], *, title: str = "") -> None:
    """Write the curve of the log ``rows`` to ``path`` (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    x = [row["evaluations"] for row in rows]
    ax.plot(x, [row["mean_reward"] for row in rows], lw=0.6, alpha=0.7, label="mean reward of the samples")
    ax.set_xlabel("runtime evaluations (all tasks)")
    ax.set_ylabel("reward, -sqrt(runtime / lower bound)")
    greedy = [(row["evaluations"], row["greedy_ratio"]) for row in rows if math.isfinite(row["greedy_ratio"])]
    ax2 = ax.twinx()
    if greedy:
        ax2.plot(*zip(*greedy), color="C1", lw=1.6, marker=".", label="greedy / best heuristic (geo. mean)")
    ax2.axhline(1.0, color="C1", ls="--", lw=0.8)
    ax2.set_ylabel("greedy runtime / best heuristic", color="C1")
    ax2.set_yscale("log")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title or "GNN placer")
    figure.tight_layout()
    write_png(path, figure)


def plot_cost_training(path: Path, rows: Sequence[dict[str, float]]) -> None:
    """The training loss and the held-out Spearman correlation over steps (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    steps = [row["step"] for row in rows]
    ax.plot(steps, [row["loss"] for row in rows], color="C0", label="training loss")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (log units squared)")
    ax2 = ax.twinx()
    ax2.plot(steps, [row["held_out_spearman"] for row in rows], color="C1", marker=".",
             label="held-out Spearman (mean over tasks)")
    ax2.set_ylabel("Spearman", color="C1")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="center right")
    ax.set_title("GNN placer's cost model")
    figure.tight_layout()
    write_png(path, figure)
