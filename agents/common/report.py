"""What an agent's command line shows at the end of a run: the learning-curve plot, and the table of its
best runtime against every zero-budget baseline, the search baselines at the agent's own evaluation
budget, and the lower bound (with the reference lines the plot takes from it)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from agents.common.run_files import write_png
from placement_env import Evaluator, Problem, load_benchmark, load_cluster, solve

BASELINE_METHODS = ("single_cpu", "single_gpu", "expert", "scotch", "mincut", "metis", "heft", "m_topo", "m_etf")
# Plain search from the best heuristic, given the evaluations the agent spent (the fair comparison).
SEARCH_METHODS = ("hill_climbing_warm", "simulated_annealing_warm", "cross_entropy_warm", "brkga_warm")


def plot_curve(path: Path, history: Sequence[dict[str, float]], *, title: str = "",
               references: dict[str, float] | None = None) -> None:
    """Learning curve PNG: mean and best runtime of the samples over evaluations (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    if history:
        x = [row["evaluations"] for row in history]
        ax.plot(x, [row.get("mean_ok_runtime_s", row["mean_runtime_s"]) for row in history], lw=0.8, alpha=0.7,
                label="mean of the successful samples")
        ax.plot(x, [row["best_runtime_s"] for row in history], lw=1.6, label="best so far")
        ax2 = ax.twinx()
        ax2.plot(x, [row["success_rate"] for row in history], lw=0.6, color="0.6", alpha=0.6)
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("fraction of samples that ran", color="0.5", fontsize=8)
    for k, (name, value) in enumerate((references or {}).items()):
        if value is not None and math.isfinite(value):
            ax.axhline(value, ls="--", lw=0.9, color=f"C{k + 2}", label=f"{name} {value:.4g} s")
    finite = [row["best_runtime_s"] for row in history if math.isfinite(row["best_runtime_s"])]
    if finite:
        refs = [v for v in (references or {}).values() if v is not None and math.isfinite(v)]
        ax.set_ylim(0, max([3.0 * min(finite), *refs]) * 1.1)
    ax.set_xlabel("runtime evaluations")
    ax.set_ylabel("step time (s)")
    ax.set_title(title or "REINFORCE seq2seq")
    ax.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    write_png(path, figure)


def baseline_runtimes(benchmark: str, cluster: str, runtime: str, methods: Sequence[str] = BASELINE_METHODS,
                      budgets: dict[str, int] | None = None, progress: bool = False,
                      measured_options: dict[str, Any] | None = None
                      ) -> tuple[dict[str, float | None], dict[str, str], float]:
    """Each baseline's runtime (None if it has none), a note for those without one, and the lower bound.
    ``budgets``: runtime evaluations per method (default 100; the zero-budget heuristics spend none)."""
    evaluator = Evaluator(load_benchmark(benchmark), load_cluster(cluster), runtime, measured_options=measured_options)
    results: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    lower = evaluator.lower_bound()
    for method in tqdm(methods, desc="baselines", unit="method", disable=not progress, leave=False):
        problem = Problem.make(evaluator.graph, evaluator.cluster, benchmark=benchmark, evaluator=evaluator,
                               budget=(budgets or {}).get(method, 100))
        try:
            solution = solve(method, problem)
            m = evaluator(solution.placement)  # the answer's runtime, outside the method's budget
        except Exception as error:  # noqa: BLE001 - a missing baseline is "n/a", never fatal
            results[method], notes[method] = None, f"n/a ({type(error).__name__})"
            continue
        results[method] = float(m.runtime_s) if m.ok else None
        if not m.ok:
            notes[method] = f"fails ({m.failure})"
    return results, notes, lower


def baseline_table(benchmark: str, cluster: str, runtime: str, ours: float, ours_label: str = "reinforce_seq2seq",
                   methods: Sequence[str] = BASELINE_METHODS, search_budget: int = 0, progress: bool = False,
                   measured_options: dict[str, Any] | None = None) -> tuple[str, dict[str, float | None]]:
    """Markdown table of ``ours`` against the baselines (and, with ``search_budget`` > 0, the search baselines
    given that many evaluations), the lower bound and the gap to it; and the runtimes by name."""
    searches = SEARCH_METHODS if search_budget > 0 else ()
    results, notes, lower = baseline_runtimes(benchmark, cluster, runtime, (*methods, *searches),
                                              budgets={m: search_budget for m in searches}, progress=progress,
                                              measured_options=measured_options)
    ok = {k: v for k, v in results.items() if v is not None}
    best_name = min(ok, key=ok.get) if ok else None
    lines = ["| method | step time (s) | vs ours | gap to lower bound |", "|---|---|---|---|"]

    def line(name: str, value: float | None, note: str = "") -> str:
        if value is None:
            return f"| {name} | {note or 'n/a'} | | |"
        versus = f"{(value / ours - 1) * 100:+.1f}%" if math.isfinite(ours) and ours_label not in name else ""
        return f"| {name} | {value:.4f} | {versus} | {(value / lower - 1) * 100:+.1f}% |"

    lines.append(line(f"**{ours_label}**", ours if math.isfinite(ours) else None, "no successful placement"))
    for method in (*methods, *searches):
        label = method + (f" ({search_budget:,} evaluations)" if method in searches else "")
        lines.append(line(label + (" (best baseline)" if method == best_name else ""), results[method],
                          notes.get(method, "")))
    lines.append(f"| lower bound | {lower:.4f} | | 0% |")
    results["lower bound"] = lower
    return "\n".join(lines), results


def curve_references(values: dict[str, float | None]) -> dict[str, float]:
    """The lines a learning curve gets from a :func:`baseline_table`: expert, the best baseline, the lower bound."""
    refs = {k: v for k, v in values.items() if k in ("expert", "lower bound") and v is not None}
    ok = {k: v for k, v in values.items() if k in BASELINE_METHODS and v is not None}
    if ok:
        best = min(ok, key=ok.get)
        refs[f"best baseline ({best})"] = ok[best]
    return refs
