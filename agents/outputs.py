"""What every agent's command line writes and prints: atomic files, the CSV log, the learning curve,
the table against the baselines, the placed TF graph of the best placement, and a TensorBoard log."""
from __future__ import annotations

import argparse
import csv
import io
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

# the files every agent's run folder gets
LOG = "log.csv"
BEST_JSON = "best_placement.json"
BEST_PB = "best_placement.pb"
CURVE = "learning_curve.png"
TENSORBOARD = "tensorboard"

BASELINE_METHODS = ("single_cpu", "single_gpu", "expert", "scotch", "mincut", "metis", "heft", "m_topo", "m_etf")


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` through a temporary file, so a crash never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb" if binary else "w", **({} if binary else {"newline": ""})) as handle:
        write(handle)
    os.replace(tmp, path)


def run_dir(agent: str, *parts: str) -> Path:
    """Default output folder of an agent's run: ``runs/<agent>/<part>-<part>-...`` with unsafe characters as ``_``."""
    return Path("runs") / agent / re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def write_log(path: Path, rows: Sequence[dict[str, float]], columns: Sequence[str]) -> None:
    def write(handle: Any) -> None:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    atomic_write(path, write)


class TensorBoardLog:
    """The log rows as TensorBoard scalars in ``directory`` (``tensorboard --logdir <out dir>``), one point per row
    at step ``row[step]``. Written with ``tf.summary`` (which needs the tensorboard package, in the ``agents``
    extra). Opening it replaces the folder's event files by ``rows`` (a resumed run's history), so steps never
    double."""

    def __init__(self, directory: Path, rows: Sequence[dict[str, float]] = (), step: str = "evaluations") -> None:
        import tensorflow as tf

        shutil.rmtree(directory, ignore_errors=True)
        self._tf, self._step = tf, step
        self._writer = tf.summary.create_file_writer(str(directory))
        for row in rows:
            self.write(row)

    def write(self, row: dict[str, float]) -> None:
        with self._writer.as_default(step=int(row[self._step])):
            for key, value in row.items():
                if key != self._step and isinstance(value, (int, float)) and math.isfinite(value):
                    self._tf.summary.scalar(key, value)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


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
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()), binary=True)


def baseline_table(benchmark: str, cluster: str, runtime: str, ours: float, ours_label: str = "reinforce_seq2seq",
                   methods: Sequence[str] = BASELINE_METHODS) -> tuple[str, dict[str, float | None]]:
    """Markdown table of ``ours`` against the baselines, the lower bound and the gap to it."""
    from placement_env.problem import Problem, solve
    from placement_env.benchmarks import load_benchmark
    from placement_env.cluster import load_cluster

    graph, cl = load_benchmark(benchmark), load_cluster(cluster)
    results: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    lower = None
    for method in methods:
        problem = Problem.make(graph, cl, runtime=runtime, benchmark=benchmark, budget=100)
        lower = problem.evaluator.lower_bound() if lower is None else lower
        try:
            solution = solve(method, problem)
            m = problem.evaluator(solution.placement)
        except Exception as error:  # noqa: BLE001 - a missing baseline is "n/a", never fatal
            results[method], notes[method] = None, f"n/a ({type(error).__name__})"
            continue
        results[method] = float(m.runtime_s) if m.ok else None
        if not m.ok:
            notes[method] = f"fails ({m.failure})"
    ok = {k: v for k, v in results.items() if v is not None}
    best_name = min(ok, key=ok.get) if ok else None
    lines = ["| method | step time (s) | vs ours | gap to lower bound |", "|---|---|---|---|"]

    def line(name: str, value: float | None, note: str = "") -> str:
        if value is None:
            return f"| {name} | {note or 'n/a'} | | |"
        versus = f"{(value / ours - 1) * 100:+.1f}%" if math.isfinite(ours) and ours_label not in name else ""
        return f"| {name} | {value:.4f} | {versus} | {(value / lower - 1) * 100:+.1f}% |"

    lines.append(line(f"**{ours_label}**", ours if math.isfinite(ours) else None, "no successful placement"))
    for method in methods:
        lines.append(line(method + (" (best baseline)" if method == best_name else ""), results[method],
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


def export_best(benchmark: str, cluster: str, placement: Any, path: Path) -> str:
    """Write the placed TF graph of ``placement``; a line saying where, or why not."""
    try:
        from placement_env.benchmarks import load_benchmark
        from placement_env.cluster import load_cluster
        from placement_env.tf_import.export import export_placed_graph

        export_placed_graph(load_benchmark(benchmark), load_cluster(cluster), placement, str(path))
        return f"placed TF graph: {path}"
    except Exception as error:  # noqa: BLE001 - e.g. a synthetic graph without a GraphDef
        return f"note: no placed TF graph written ({type(error).__name__}: {error})"


def _integer(text: str, least: int, kind: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind}: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a {kind}, got {text}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1, "positive integer")


def non_negative_int(text: str) -> int:
    return _integer(text, 0, "whole number >= 0")


def _finite_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    value = _finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _finite_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def check_task_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``parser.error`` (exit 2, naming the flag) for an unknown ``--benchmark``/``--cluster`` or a negative ``--seed``."""
    from placement_env.benchmarks import benchmark_names
    from placement_env.cluster import load_cluster

    if args.seed < 0:
        parser.error(f"argument --seed: expected an integer >= 0, got {args.seed}")
    if args.benchmark not in benchmark_names() and not args.benchmark.startswith("synthetic:"):
        parser.error(f"argument --benchmark: unknown benchmark {args.benchmark!r}; "
                     f"choose from {', '.join(benchmark_names())} or synthetic:N")
    try:
        load_cluster(args.cluster)
    except Exception as error:  # noqa: BLE001
        parser.error(f"argument --cluster: {error}")
