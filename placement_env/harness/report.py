"""The paper-style table and plots from a results file.

Rows are tasks (model x #GPUs); columns are the built-in baselines, the best learned / third-party
method (any method that is not built in: ``BUILT_IN_METHODS``, with any arguments) at one budget, the
lower bound (the rows' own, or a tighter one from a bounds file), the best placement's distance above it, and that
method's gain over the best baseline. A baseline's cell is its best successful
runtime over seeds and budgets, or why it failed; the agent's cell names its budget (when it spent
evaluations) and gives its mean over the seeds run at that budget when there were more than one. A
method is labelled with its arguments (``results.method_label``: ``name@key=value,...``), so two
parameterisations are two methods.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..benchmarks import load_benchmark
from ..cluster import load_cluster
from ..evaluation import Evaluator
from ..output_paths import OutputFolder, file_name_part
from ..problem import BUILT_IN_METHODS
from ..render.table import markdown_row, markdown_text, plot_text
from .bounds_file import bound_of, gap, read_bounds
from .leaderboard import anytime_figure, in_key_order, leaderboard_table, png, searches
from .results import method_label, read_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BASELINE_COLUMNS = (("single_cpu", "1 CPU"), ("single_gpu", "1 GPU"), ("scotch", "Scotch"), ("mincut", "MinCut"),
                    ("expert", "Expert"), ("metis", "METIS"), ("heft", "HEFT"), ("m_topo", "m-TOPO"),
                    ("m_etf", "m-ETF"), ("random_search", "Random search"))
_FAILURE_LABELS = {"oom": "OOM", "no_kernel": "no kernel", "method_error": "n/a", "timeout": "timeout",
                   "crash": "crash", "error": "error", "infrastructure": "infra failure",
                   "configuration": "config error"}


def _best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [r for r in rows if r["ok"] and isinstance(r["runtime_s"], (int, float))]
    return min(ok, key=lambda r: r["runtime_s"]) if ok else (rows[0] if rows else None)


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row["ok"]:
        return f"{row['runtime_s']:.3g}"
    return _FAILURE_LABELS.get(row["failure"], row["failure"] or "failed")


def summarise(rows: list[dict[str, Any]], bounds: dict | None = None) -> dict[str, Any]:
    """{task: {"best": best row per method label, "agent": best non-baseline row, "agent_runtimes": the successful
    runtimes over seeds of that method at that row's budget, ...}}, tasks and methods in key order
    (``leaderboard.in_key_order``), whatever the file's row order. ``lower_bound_s``: the rows' classic bound, or a
    tighter one of ``bounds`` (``bounds_file.read_bounds``) for the task's graph and cluster."""
    builtin = set(BUILT_IN_METHODS)  # every built-in method (with any arguments) is a baseline; the rest agents
    tasks: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in in_key_order(rows):
        tasks.setdefault(row["task"], {}).setdefault(method_label(row), []).append(row)
    summary = {}
    for task, by_method in tasks.items():
        best = {label: _best(method_rows) for label, method_rows in by_method.items()}
        found = [r for r in best.values() if r is not None and r["ok"]]
        agents = [r for r in found if r["method"] not in builtin]
        baselines = [r for r in found if r["method"] in builtin]
        any_row = next(iter(by_method.values()))[0]
        agent = min(agents, key=lambda r: r["runtime_s"]) if agents else None
        summary[task] = {
            "best": best,
            "agent": agent,
            "agent_runtimes": [] if agent is None else [r["runtime_s"] for r in by_method[method_label(agent)]
                                                        if r["ok"] and r.get("budget") == agent.get("budget")],
            "best_baseline": min(baselines, key=lambda r: r["runtime_s"]) if baselines else None,
            "lower_bound_s": max(any_row["lower_bound_s"], bound_of(any_row, bounds or {}) or 0.0),
            "best_s": min((r["runtime_s"] for r in found), default=None),
            "cluster": any_row["cluster"], "benchmark": any_row["benchmark"],
        }
    return summary


def _at_budget(row: dict[str, Any]) -> str:
    """" @ N evaluations" (N its budget) for a row that searched (spent evaluations) within a budget, else ""."""
    budget = row.get("budget")
    return f" @ {budget:,} evaluations" if searches(row) and isinstance(budget, int) else ""


def markdown_table(rows: list[dict[str, Any]], bounds: dict | None = None) -> str:
    """The paper-style comparison table as markdown; ``bounds`` (``bounds_file.read_bounds``): tighter lower bounds
    than the rows' own, where the file has the task's."""
    summary = summarise(rows, bounds)
    present = {method_label(row) for row in rows}
    columns = [(m, label) for m, label in BASELINE_COLUMNS if m in present]
    header = ["task", *(label for _, label in columns), "best agent", "lower bound", "best found vs bound",
              "agent vs best baseline"]
    lines = [markdown_row(header), "|" + "---|" * len(header)]
    for task, info in summary.items():
        agent, baseline = info["agent"], info["best_baseline"]
        gain = "-"
        if agent is not None and baseline is not None:
            gain = (f"{(baseline['runtime_s'] - agent['runtime_s']) / baseline['runtime_s']:+.1%} (vs "
                    f"{method_label(baseline)}{_at_budget(baseline)}, {baseline['runtime_s']:.3g})")
        agent_cell = "-" if agent is None else f"{agent['runtime_s']:.3g} ({method_label(agent)}{_at_budget(agent)})"
        if len(info["agent_runtimes"]) > 1:
            agent_cell += f"; mean {np.mean(info['agent_runtimes']):.3g} over {len(info['agent_runtimes'])} seeds"
        above = gap(info["best_s"], info["lower_bound_s"])
        cells = [task, *(_cell(info["best"].get(m)) for m, _ in columns), agent_cell,
                 f"{info['lower_bound_s']:.3g}", "-" if above is None else f"+{above:.1%}", gain]
        lines.append(markdown_row(cells))
    return "\n".join(lines)


def bar_figure(rows: list[dict[str, Any]]) -> Figure:
    """One panel per task: best runtime per method (failed methods drawn as hatched bars at the top)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summary = summarise(rows)
    n = len(summary)
    columns = max(1, min(3, n))
    figure = Figure(figsize=(5.5 * columns, 3.6 * math.ceil(n / columns)), dpi=100)
    FigureCanvasAgg(figure)
    for k, (task, info) in enumerate(summary.items()):
        axes = figure.add_subplot(math.ceil(n / columns), columns, k + 1)
        methods = list(info["best"])
        values = [info["best"][m]["runtime_s"] if info["best"][m]["ok"] else np.nan for m in methods]
        top = np.nanmax(values) * 1.15 if np.isfinite(values).any() else 1.0
        for i, (method, value) in enumerate(zip(methods, values)):
            if np.isfinite(value):
                axes.bar(i, value, color="tab:blue")
            else:
                axes.bar(i, top, color="none", edgecolor="tab:red", hatch="//")
                axes.text(i, top * 0.5, plot_text(_cell(info["best"][method])), rotation=90, ha="center",
                          va="center", fontsize=7)
        axes.axhline(info["lower_bound_s"], color="black", linestyle="--", linewidth=1, label="lower bound")
        axes.set_xticks(range(len(methods)), [plot_text(m) for m in methods], rotation=45, ha="right", fontsize=8)
        axes.set_ylabel("step time (s)")
        axes.set_title(plot_text(task), fontsize=10)
        axes.legend(fontsize=7)
    figure.tight_layout()
    return figure


def write_report(results: str | os.PathLike, out_dir: str | os.PathLike, *, gantt: bool = True,
                 bounds: Sequence[str | os.PathLike] = ()) -> Path:
    """``report.md`` (the table, and for searching methods the leaderboard at equal budgets), ``bars.png``,
    ``anytime.png`` (best-so-far curves) and, for simulated rows, a Gantt chart of each task's best
    placement (``gantt-<task>.png``, the task's name made a file name by ``output_paths.file_name_part``) under
    ``out_dir``, written through an :class:`~placement_env.output_paths.OutputFolder` (no file is written through
    a symbolic link); returns the markdown path. ``bounds``: bounds files (``placement-env bound``) whose bounds
    replace the rows' classic one where tighter."""
    from ..render.gantt import gantt_figure  # matplotlib, only when a report is written

    rows = read_rows(results, must_exist=True)
    tight = read_bounds(bounds)
    with OutputFolder(out_dir) as out:
        table = markdown_table(rows, tight)
        out.write("bars.png", png(bar_figure(rows)))
        lines = [f"# Results: {markdown_text(results)}", "", "Step time in seconds (best over seeds; lower is better).",
                 "", table, "", "![best runtime per method](bars.png)", ""]
        if any(row.get("anytime") for row in rows):
            out.write("anytime.png", png(anytime_figure(rows)))
            lines += ["## Methods at equal budgets", "", leaderboard_table(rows), "",
                      "![best-so-far against evaluations and wall time](anytime.png)", ""]
        if gantt:
            for task, info in summarise(rows).items():
                best = info["agent"] or info["best_baseline"]
                if best is None or best["runtime"] != "sim":
                    continue
                graph = load_benchmark(best["benchmark"])
                cluster = load_cluster(best["cluster"])
                m = Evaluator(graph, cluster)(best["placement"], schedule=True)
                name = f"gantt-{file_name_part(task)}.png"
                out.write(name, png(gantt_figure(graph, cluster, m)))
                lines += [f"## {markdown_text(task)}: {markdown_text(method_label(best))} ({best['runtime_s']:.3g} s)",
                          "",
                          f"![{markdown_text(task)}]({name})", ""]
        return out.write("report.md", "\n".join(lines).encode("utf-8"))
