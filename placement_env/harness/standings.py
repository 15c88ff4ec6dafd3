"""Scores per track and budget, and the leaderboard page made of them.

The score of a method on a track (a suite) at a budget is, per seed, the geometric mean over the track's tasks of
the task's reference step time over the method's step time; a placement that failed (out of memory, say, or a method
that raised) is charged the failing signal (``DEFAULT_FAILING_SIGNAL_S``) as its step time. The score is the mean
over seeds with a 95% confidence interval (Student t over the per-seed scores; none for one seed). Above 1 beats
the reference.

The reference of a task is the best step time of the built-in zero-budget heuristics (``REFERENCE_HEURISTICS``):
frozen in the benchmark file for a track of a versioned benchmark's simulated tasks, else the best of those
heuristics' rows at budget 0 in the results read. A method (label with arguments) that lacks a row for some task
and seed at a budget gets no score, and the count of missing (task, seed) pairs instead.

``write_leaderboard(files, out_dir)`` writes ``leaderboard.md`` (per track and budget, the methods by score, then
each task's mean step time for the leading methods), ``leaderboard.csv`` (a line per track, budget and method) and
a plot per track (score against budget). Declared fields of submissions (``read_submission``) are shown beside the
methods they name.
"""
from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..env.rewards import DEFAULT_FAILING_SIGNAL_S
from ..errors import ResultsFormatError
from ..output_paths import check_output_folder
from ..problem import ZERO_BUDGET_HEURISTICS
from . import placebench
from .leaderboard import evaluations_to_beat, in_key_order
from .results import UNFINISHED, method_label, read_results

REFERENCE_HEURISTICS: tuple[str, ...] = ("single_cpu", "single_gpu", *ZERO_BUDGET_HEURISTICS, "expert_tf1")
CONFIDENCE = 0.95
LEADING_METHODS = 6  # methods per budget whose per-task step times the page lists


@dataclass
class Standing:
    """One method on one track at one budget."""

    suite: str
    budget: int
    method: str
    seeds: list[int]
    per_seed: list[float]  # the score of each complete seed
    score: float | None
    interval: tuple[float, float] | None
    missing: int  # (task, seed) pairs without a row
    failures: int
    wall_s: float  # mean over rows
    to_beat: int | None  # median evaluations to beat the reference, over rows that did
    beat: int  # rows that beat the reference
    task_means: dict[str, float] = field(default_factory=dict)  # mean charged step time per task


def charged(row: dict[str, Any]) -> float:
    """The step time a row is scored by: its runtime if it succeeded, else the failing signal."""
    ok = row["ok"] and isinstance(row["runtime_s"], (int, float)) and math.isfinite(row["runtime_s"])
    return float(row["runtime_s"]) if ok else DEFAULT_FAILING_SIGNAL_S


def references(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(suite, task) -> reference step time: the benchmark file's frozen one where it has one, else the best
    successful row of a ``REFERENCE_HEURISTICS`` method that spent no evaluation."""
    out: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["method"] in REFERENCE_HEURISTICS and not row.get("method_args") and row["evaluations"] == 0 \
                and row["ok"] and isinstance(row["runtime_s"], (int, float)):
            key = (row["suite"], row["task"])
            out[key] = min(out.get(key, math.inf), float(row["runtime_s"]))
    for suite, task in {(row["suite"], row["task"]) for row in rows}:
        benchmark = placebench.benchmark_of_suite(suite)
        if benchmark is None:
            continue
        track = suite.split("/", 1)[1]
        try:
            frozen = benchmark.task_facts(track, task).get("reference_s")
        except KeyError:
            continue
        if frozen is not None:
            out[(suite, task)] = float(frozen)
    return out


def _interval(scores: list[float]) -> tuple[float, float] | None:
    if len(scores) < 2:
        return None
    from scipy.stats import t

    half = t.ppf(0.5 + CONFIDENCE / 2, len(scores) - 1) * float(np.std(scores, ddof=1)) / math.sqrt(len(scores))
    mean = float(np.mean(scores))
    return mean - half, mean + half


def standings(rows: Iterable[dict[str, Any]]) -> list[Standing]:
    """A Standing per (suite, budget, method label) of finished rows, best score first within each suite and
    budget (unscored methods last)."""
    finished = [row for row in in_key_order(list(rows)) if row["failure"] not in UNFINISHED]
    refs = references(finished)
    tasks_of: dict[str, set[str]] = defaultdict(set)
    for row in finished:
        tasks_of[row["suite"]].add(row["task"])
    for suite in tasks_of:
        benchmark = placebench.benchmark_of_suite(suite)
        if benchmark is not None:  # a track's tasks are the frozen ones, whatever the files hold
            tasks_of[suite] = {task.name for task in placebench.suite_tasks(suite)}
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in finished:
        groups[(row["suite"], row["budget"], method_label(row))].append(row)
    out = []
    for (suite, budget, label), members in groups.items():
        by_seed: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for row in members:
            by_seed[row["seed"]][row["task"]] = row
        tasks = sorted(tasks_of[suite])
        per_seed, missing = [], 0
        for seed in sorted(by_seed):
            have = by_seed[seed]
            missing += sum(task not in have for task in tasks)
            if all(task in have and (suite, task) in refs for task in tasks):
                logs = [math.log(refs[(suite, task)] / charged(have[task])) for task in tasks]
                per_seed.append(math.exp(sum(logs) / len(logs)))
        complete = len(per_seed) == len(by_seed) and missing == 0
        beats = [b for b in (evaluations_to_beat(r, refs.get((suite, r["task"]))) for r in members) if b is not None]
        task_means = {task: float(np.mean([charged(by_seed[s][task]) for s in by_seed if task in by_seed[s]]))
                      for task in tasks if any(task in by_seed[s] for s in by_seed)}
        out.append(Standing(suite, budget, label, sorted(by_seed), per_seed,
                            float(np.mean(per_seed)) if complete else None,
                            _interval(per_seed) if complete else None, missing,
                            sum(not (r["ok"] and r["runtime_s"] is not None) for r in members),
                            float(np.mean([r["wall_s"] for r in members])),
                            int(np.median(beats)) if beats else None, len(beats), task_means))
    out.sort(key=lambda s: (s.suite, s.budget, s.score is None, -(s.score or 0.0), s.method))
    return out


# ---- submissions: a results file's declared fields ------------------------------------------------------------
SUBMISSION_FIELDS: dict[str, tuple[type, str]] = {
    "name": (str, "the submission's name"),
    "methods": (list, "the method labels of the results it declares (as the leaderboard shows them)"),
    "authors": (str, "who made it"),
    "code": (str, "a link to the code that produced the rows ('' if none is public)"),
    "open_source": (bool, "whether that code is open source"),
    "deterministic": (bool, "whether a rerun with the same seeds gives the same rows"),
    "hardware": (str, "the machine the wall times were measured on"),
    "wall_time": (str, "what the wall times include (training, pre-training, solver time)"),
    "date": (str, "when the rows were made (YYYY-MM-DD)"),
    "description": (str, "the method in a sentence or two"),
}


def read_submission(path: str | os.PathLike) -> dict[str, Any]:
    """The declared fields of a submission (a JSON object with every key of ``SUBMISSION_FIELDS``, of its type);
    ResultsFormatError naming the file, the field and what is accepted."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ResultsFormatError(f"{where}: cannot read the submission's declared fields ({error})") from None
    if not isinstance(data, dict):
        raise ResultsFormatError(f"{where}: expected a JSON object with the fields {', '.join(SUBMISSION_FIELDS)}")
    unknown = sorted(set(data) - set(SUBMISSION_FIELDS))
    missing = [key for key in SUBMISSION_FIELDS if key not in data]
    if unknown or missing:
        raise ResultsFormatError(f"{where}: " + "; ".join(
            ([f"unknown field(s) {', '.join(map(repr, unknown))}"] if unknown else [])
            + ([f"missing field(s) {', '.join(map(repr, missing))}"] if missing else []))
            + f"; a submission has {', '.join(SUBMISSION_FIELDS)}")
    for key, (kind, what) in SUBMISSION_FIELDS.items():
        value = data[key]
        if not isinstance(value, kind) or (kind is list and not (value and all(isinstance(v, str) for v in value))):
            raise ResultsFormatError(f"{where}: {key} = {value!r}; expected {what} "
                                     f"({'a non-empty list of strings' if kind is list else kind.__name__})")
    return data


# ---- the page ------------------------------------------------------------------------------------------------
def _score_cell(s: Standing) -> str:
    if s.score is None:
        return f"incomplete ({s.missing} task-seed pairs missing)"
    if s.interval is None:
        return f"{s.score:.3f} (1 seed)"
    return f"{s.score:.3f} [{s.interval[0]:.3f}, {s.interval[1]:.3f}]"


def _declared(method: str, submissions: Sequence[dict[str, Any]]) -> str:
    for sub in submissions:
        if method in sub["methods"]:
            code = f"[code]({sub['code']})" if sub["code"] else "no public code"
            return (f"{sub['name']}: {'open source' if sub['open_source'] else 'closed'}, "
                    f"{'deterministic' if sub['deterministic'] else 'nondeterministic'}, {code}, {sub['hardware']}")
    return "built in" if "@" in method or method in _built_in() else ""


def _built_in() -> set[str]:
    from ..problem import BUILT_IN_METHODS, PRESETS

    return {*BUILT_IN_METHODS, *PRESETS}


def leaderboard_markdown(table: Sequence[Standing], submissions: Sequence[dict[str, Any]] = ()) -> str:
    """The page: per suite and budget the methods by score, then the leading methods' mean step time per task."""
    lines = ["# Leaderboard", "",
             "Score: the geometric mean over the track's tasks of the reference step time (the best built-in "
             "zero-budget heuristic's) over the method's, mean over seeds with a 95% interval; a failed placement "
             f"counts as a {DEFAULT_FAILING_SIGNAL_S:g} s step. Above 1 beats the reference.", ""]
    sections: dict[tuple[str, int], list[Standing]] = defaultdict(list)
    for s in table:
        sections[(s.suite, s.budget)].append(s)
    for (suite, budget), members in sections.items():
        if budget == min(b for s_, b in sections if s_ == suite):
            lines += [f"![score against budget, {suite}]({plot_name(suite)})", ""]
        lines += [f"## `{suite}`, budget {budget:,}", "",
                  "| # | method | score [95% interval] | seeds | failures | evaluations to beat the reference "
                  "(median; rows that did) | wall s (mean per row) | declared |",
                  "|---|---|---|---|---|---|---|---|"]
        for rank, s in enumerate(members, 1):
            beat = "-" if budget == 0 else "never" if s.to_beat is None else f"{s.to_beat:,} ({s.beat})"
            lines.append(f"| {rank if s.score is not None else '-'} | `{s.method}` | {_score_cell(s)} | "
                         f"{len(s.seeds)} | {s.failures} | {beat} | {s.wall_s:.3g} | {_declared(s.method, submissions)} |")
        leading = [s for s in members if s.score is not None][:LEADING_METHODS]
        if leading:
            tasks = sorted({task for s in leading for task in s.task_means})
            lines += ["", "Mean step time per task (s), the leading methods:", "",
                      "| task | " + " | ".join(f"`{s.method}`" for s in leading) + " |",
                      "|---|" + "---|" * len(leading)]
            lines += [f"| `{task}` | " + " | ".join(f"{s.task_means.get(task, math.nan):.4g}" for s in leading) + " |"
                      for task in tasks]
        lines.append("")
    return "\n".join(lines)


def plot_name(suite: str) -> str:
    """The file name of a suite's plot, beside the page."""
    return f"{suite.replace('/', '_')}.png"


def _plot(table: Sequence[Standing], suite: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 5))
    by_method: dict[str, list[Standing]] = defaultdict(list)
    for s in table:
        if s.suite == suite and s.score is not None:
            by_method[s.method].append(s)
    for method, members in sorted(by_method.items()):
        members.sort(key=lambda s: s.budget)
        x = [max(s.budget, 1) for s in members]
        y = [s.score for s in members]
        err = [[s.score - (s.interval or (s.score, s.score))[0] for s in members],
               [(s.interval or (s.score, s.score))[1] - s.score for s in members]]
        if len(members) == 1 and members[0].budget == 0:  # a zero-budget method: a point at "0" and its name
            axis.plot([1], y, marker="s", ms=3, color="grey")
            axis.annotate(method, (1.15, y[0]), fontsize=6, color="grey", va="center")
        else:
            axis.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, label=method)
    axis.set_xscale("log")
    axis.set_xlim(0.8, None)
    axis.set_xticks([1, 10, 100, 1000, 10000], ["0", "10", "100", "1,000", "10,000"])
    axis.axhline(1.0, color="black", lw=1)
    axis.set_xlabel("budget (runtime evaluations; zero-budget methods in grey at 0)")
    axis.set_ylabel("score (reference / step time, geometric mean)")
    axis.set_title(suite)
    axis.legend(fontsize=6, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_leaderboard(files: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                      submissions: Sequence[str | os.PathLike] = ()) -> Path:
    """Read the results ``files`` (and the submissions' declared fields), write ``leaderboard.md``,
    ``leaderboard.csv`` and ``<suite>.png`` per suite under ``out_dir``; return the page's path."""
    if not files:
        raise ValueError("no results files given; name at least one")
    rows = [row for path in files for row in read_results(path, must_exist=True).rows]
    declared = [read_submission(path) for path in submissions]
    table = standings(rows)
    out = check_output_folder(out_dir, "out_dir")
    out.mkdir(parents=True, exist_ok=True)
    page = out / "leaderboard.md"
    page.write_text(leaderboard_markdown(table, declared))
    with open(out / "leaderboard.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["suite", "budget", "method", "score", "low", "high", "seeds", "missing", "failures",
                         "wall_s", "evaluations_to_beat_reference"])
        for s in table:
            low, high = s.interval or (None, None)
            writer.writerow([s.suite, s.budget, s.method, s.score, low, high, len(s.seeds), s.missing, s.failures,
                             round(s.wall_s, 4), s.to_beat])
    for suite in sorted({s.suite for s in table}):
        _plot(table, suite, out / plot_name(suite))
    return page
