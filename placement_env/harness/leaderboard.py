"""Methods compared at equal budgets: the leaderboard table and the anytime curves of a results file.

A method *searches* when it spent runtime evaluations (``evaluations > 0``); heuristics that spend
none keep rows of their own. For every (task, searching method, budget) the table gives the mean
and range of the best runtime over seeds, the evaluations and wall time spent, and the median
number of evaluations after which the method was faster than the expert placement (from the
row's ``anytime`` record: the best-so-far after each improvement). The chart draws best-so-far
against evaluations and against wall time per task, with the expert, the best zero-budget
heuristic and the lower bound as lines. Methods are told apart by their labels with arguments
(``results.method_label``). The scored leaderboard of a benchmark's tracks (one score per track and budget)
is ``leaderboard_page``'s.
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

import numpy as np

from ..render.table import markdown_row, plot_text
from .results import method_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEURISTIC_BUDGET = 0  # a row that spent this many evaluations is a heuristic, not a search


def _ok(row: dict[str, Any]) -> bool:
    return bool(row["ok"]) and isinstance(row["runtime_s"], (int, float))


def searches(row: dict[str, Any]) -> bool:
    """Whether a results row spent runtime evaluations (a search), not a zero-budget heuristic."""
    return int(row.get("evaluations", 0)) > HEURISTIC_BUDGET


def in_key_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` sorted by suite, task, method label, seed and budget: what is made of a results file does not
    depend on its row order (a parallel run writes rows in the order they finish)."""
    return sorted(rows, key=lambda row: (row.get("suite", ""), row["task"], method_label(row), row.get("seed", 0),
                                         row.get("budget", 0)))


def references(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per task: the expert's runtime, the best zero-budget heuristic's, and the lower bound."""
    out: dict[str, dict[str, float | None]] = {}
    for row in in_key_order(rows):
        entry = out.setdefault(row["task"], {"expert": None, "best_heuristic": None, "lower_bound": None})
        entry["lower_bound"] = row["lower_bound_s"]
        if searches(row) or not _ok(row):
            continue
        runtime = float(row["runtime_s"])
        if method_label(row) == "expert":
            entry["expert"] = runtime if entry["expert"] is None else min(entry["expert"], runtime)
        if entry["best_heuristic"] is None or runtime < entry["best_heuristic"]:
            entry["best_heuristic"] = runtime
    return out


def evaluations_to_beat(row: dict[str, Any], target: float | None) -> int | None:
    """The evaluations after which the row's best was first below ``target`` (None: never, or unknown)."""
    if target is None:
        return None
    for evaluations, runtime, _ in row.get("anytime", []):
        if runtime < target:
            return int(evaluations)
    return None


def leaderboard_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (task, method label, budget) of searching rows, plus one per zero-budget heuristic."""
    refs = references(rows)
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in in_key_order(rows):
        budget = row["budget"] if searches(row) else HEURISTIC_BUDGET
        groups[(row["task"], method_label(row), budget)].append(row)
    entries = []
    for (task, method, budget), members in groups.items():
        runtimes = [float(r["runtime_s"]) for r in members if _ok(r)]
        recorded = [r for r in members if "anytime" in r]  # rows from before anytime records have none
        beaten_known = [b for b in (evaluations_to_beat(r, refs[task]["expert"]) for r in recorded) if b is not None]
        entries.append({
            "task": task, "method": method, "budget": budget, "seeds": len(members),
            "mean": float(np.mean(runtimes)) if runtimes else None,
            "min": min(runtimes) if runtimes else None, "max": max(runtimes) if runtimes else None,
            "failed": len(members) - len(runtimes),
            "evaluations": float(np.mean([r["evaluations"] for r in members])),
            "wall_s": float(np.mean([r["wall_s"] for r in members])),
            "to_beat_expert": (int(np.median(beaten_known)), len(beaten_known)) if beaten_known else None,
            "recorded": len(recorded),
        })
    entries.sort(key=lambda e: (e["task"], e["budget"], math.inf if e["mean"] is None else e["mean"], e["method"]))
    return entries


def leaderboard_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per task, the heuristics, then every searching method by budget, fastest first."""
    refs = references(rows)
    header = ["task", "method", "budget", "seeds", "best runtime: mean (range)", "vs expert", "evaluations",
              "wall s", "evaluations to beat the expert (median, seeds that did)"]
    lines = [markdown_row(header), "|" + "---|" * len(header)]
    for entry in leaderboard_rows(rows):
        expert = refs[entry["task"]]["expert"]
        if entry["mean"] is None:
            runtime, versus = f"failed ({entry['failed']})", "-"
        else:
            runtime = f"{entry['mean']:.4g} ({entry['min']:.4g}-{entry['max']:.4g})"
            versus = "-" if expert is None else f"{(expert - entry['mean']) / expert:+.1%}"
        beat = entry["to_beat_expert"]
        if entry["budget"] == HEURISTIC_BUDGET or not entry["recorded"]:
            beat_cell = "-"
        else:
            beat_cell = "never" if beat is None else f"{beat[0]:,} ({beat[1]}/{entry['recorded']})"
        budget = "heuristic" if entry["budget"] == HEURISTIC_BUDGET else f"{entry['budget']:,}"
        lines.append(markdown_row([entry["task"], entry["method"], budget, str(entry["seeds"]), runtime, versus,
                                   f"{entry['evaluations']:,.0f}", f"{entry['wall_s']:.3g}", beat_cell]))
    return "\n".join(lines)


def png(figure: Figure) -> Callable[[BinaryIO], None]:
    """What writes ``figure`` as a PNG into a binary file (for ``OutputFolder.write``)."""
    return lambda handle: figure.savefig(handle, format="png")


def anytime_figure(rows: list[dict[str, Any]], *, budget: int | None = None) -> Figure:
    """Best-so-far per task against evaluations (left) and wall time (right), one line per method
    (the median over seeds) at ``budget`` (default: each method's largest)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    refs = references(rows)
    curves = _curves(rows, budget)
    tasks = list(curves)
    figure = Figure(figsize=(12, 3.4 * max(1, len(tasks))), dpi=100)
    FigureCanvasAgg(figure)
    for k, task in enumerate(tasks):
        for column, axis in enumerate(("evaluations", "wall time (s)")):
            axes = figure.add_subplot(len(tasks), 2, 2 * k + column + 1)
            for method, by_axis in sorted(curves[task].items()):
                grid, best = by_axis[column]
                axes.step(grid, best, where="post", label=plot_text(method), linewidth=1.2)
            for name, style in (("expert", "k--"), ("best_heuristic", "k:"), ("lower_bound", "k-.")):
                if refs[task][name] is not None:
                    axes.axhline(refs[task][name], color=style[0], linestyle=style[1:], linewidth=0.8,
                                 label=name.replace("_", " "))
            axes.set_xscale("log")
            axes.set_xlabel(axis)
            axes.set_ylabel("best step time (s)")
            axes.set_title(plot_text(task), fontsize=10)
            if column == 1:
                axes.legend(fontsize=6, loc="upper right")
    figure.tight_layout()
    return figure


def _curves(rows: list[dict[str, Any]], budget: int | None) -> dict[str, dict[str, tuple]]:
    """{task: {method: ((evaluation grid, median best-so-far), (wall grid, median best-so-far))}}."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in in_key_order(rows):
        if searches(row) and row.get("anytime"):
            by_key[(row["task"], method_label(row))].append(row)
    out: dict[str, dict[str, tuple]] = defaultdict(dict)
    for (task, method), members in by_key.items():
        top = max(r["budget"] for r in members) if budget is None else budget
        traces = [np.asarray(r["anytime"], dtype=np.float64) for r in members if r["budget"] == top]
        if not traces:
            continue
        curves = []
        for column in (0, 2):  # evaluations, wall seconds
            end = max(trace[-1, column] for trace in traces)
            start = max(min(trace[0, column] for trace in traces), 1e-4)
            grid = np.geomspace(start, max(end, start * 1.01), 200)
            values = np.array([_best_so_far(trace, column, grid) for trace in traces])
            with warnings.catch_warnings():  # grid points before any seed's first success stay NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                curves.append((grid, np.nanmedian(values, axis=0)))
        out[task][method] = tuple(curves)
    return out


def _best_so_far(trace: np.ndarray, column: int, grid: np.ndarray) -> np.ndarray:
    """The trace's best runtime at each point of ``grid`` (NaN before its first success)."""
    index = np.searchsorted(trace[:, column], grid, side="right") - 1
    return np.where(index >= 0, trace[np.maximum(index, 0), 1], np.nan)


def budget_pivot(rows: list[dict[str, Any]], methods: list[str], budgets: list[int]) -> str:
    """Markdown, one row per task: the best zero-budget heuristic, then each of ``methods`` (labels, as
    ``results.method_label`` gives them) at each of ``budgets`` as the mean best runtime over seeds (and the number of seeds); the fastest mean in bold."""
    refs = references(rows)
    cells: dict[tuple[str, str, int], dict[str, Any]] = {
        (e["task"], e["method"], e["budget"]): e for e in leaderboard_rows(rows)}
    columns = [(m, b) for b in budgets for m in methods]
    header = ["task", "best heuristic", *(f"{m} @ {b:,}" for m, b in columns)]
    lines = [markdown_row(header), "|" + "---|" * len(header)]
    for task in refs:
        means = {c: cells[(task, *c)]["mean"] for c in columns if (task, *c) in cells and cells[(task, *c)]["mean"]}
        fastest = min(means.values(), default=None)
        row = [task, "-" if refs[task]["best_heuristic"] is None else f"{refs[task]['best_heuristic']:.4g}"]
        for column in columns:
            if column not in means:
                row.append("-")
                continue
            text = f"{means[column]:.4g} ({cells[(task, *column)]['seeds']})"
            row.append(f"**{text}**" if means[column] == fastest else text)
        lines.append(markdown_row(row))
    return "\n".join(lines)
