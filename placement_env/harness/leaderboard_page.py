"""``placement-env leaderboard``: the scores of any number of results files as a Markdown page, a CSV and a plot
per track, with the declared fields of the submitted methods beside them.

``write_leaderboard(files, out_dir, submissions=...)`` reads the files (a row key in two files is an error: a
method's row has one source), scores them (``score.standings``) and writes, through an ``OutputFolder`` (nothing is
written through a symbolic link), ``leaderboard.md`` (per track its plot, then per budget the methods by score and
the leading methods' mean step time per task, and a warning with each method's machines where a table's
measured rows ran on more than one), ``leaderboard.csv`` (a line per track, budget and method) and
``<track>.png`` (score against budget).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..env.rewards import DEFAULT_FAILING_SIGNAL_S
from ..errors import ResultsFormatError
from ..output_paths import OutputFolder, check_output_folder, file_name_part
from ..problem import METHODS, PRESETS
from ..render.table import markdown_row, markdown_text, plot_text
from .bounds_file import bound_of, gap, read_bounds
from .leaderboard import png
from .results import finished, method_label, read_rows, row_key
from .score import CONFIDENCE, HOST_MARK, Standing, mixed_machines, references, standings
from .submission import check_submissions, read_submission

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_LINE_STYLES = ("-", "--", ":", "-.")  # the next ten lines once matplotlib's ten colours are used
_MARKERS = ("o", "s", "^", "D")  # likewise; what tells a point apart where a method has one budget (no line)
DODGE_DECADES = 0.12  # how far apart (log10 of the budget) the first and the last method's points are drawn
LEADING_METHODS = 6  # methods per track and budget whose mean step time per task the page lists
_PLAIN = re.compile(r"[^`|\\\x00-\x1f\x7f-\x9f\u2028\u2029]*")  # text a code span shows as it is


def read_leaderboard_rows(files: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """The rows of every results file (each must exist and hold rows); a ResultsFormatError for a row key
    (``results.row_key``) that two files hold, naming both."""
    if not files:
        raise ValueError("no results files given; name at least one")
    seen: dict[tuple, str] = {}
    rows = []
    for path in files:
        for row in read_rows(path, must_exist=True):
            key = row_key(row)
            if key in seen:
                raise ResultsFormatError(f"{path}: the row of suite {key[0]!r}, task {key[1]!r}, method {key[2]!r}, "
                                         f"seed {key[3]}, budget {key[4]} is in {seen[key]} too; give each row once")
            seen[key] = str(path)
            rows.append(row)
    return rows


def ships_with_project(label: str) -> bool:
    """Whether method ``label`` is one of this repository's: a built-in method or preset (``problem.METHODS``,
    ``problem.PRESETS``) or a callable of its ``agents`` package, with any arguments."""
    name = label.split("@", 1)[0]
    return name in METHODS or name in PRESETS or name.split(".", 1)[0] == "agents"


def _code(text: str) -> str:
    """``text`` as a Markdown code span, or escaped plain text where a code span would not show it as it is."""
    return f"`{text}`" if _PLAIN.fullmatch(text) else markdown_text(text)


def _score_cell(s: Standing) -> str:
    if s.score is None:
        missing = [f"{s.missing_tasks} task(s) missing ({s.missing_rows} task-seed rows)"] if s.missing_rows else []
        missing += [f"{s.unreferenced} task(s) without a reference"] if s.unreferenced else []
        return "no score: " + "; ".join(missing)
    if s.interval is None:
        return f"{s.score:.3f} (1 seed: no interval)"
    return f"{s.score:.3f} [{s.interval[0]:.3f}, {s.interval[1]:.3f}]"


def _declared_cell(label: str, declared: dict[str, dict[str, Any]]) -> str:
    submission = declared.get(label)
    if submission is None:
        return "built in" if ships_with_project(label) else "not declared"
    code = f"[code](<{submission['code']}>)" if submission["code"] else "no public code"
    return (f"{markdown_text(submission['name'])}: {'open source' if submission['open_source'] else 'closed'} / "
            f"{'deterministic' if submission['deterministic'] else 'nondeterministic'} / {code}")


def _to_beat_cell(s: Standing) -> str:
    if s.budget == 0:
        return "-"
    return "never" if s.to_beat is None else f"{s.to_beat:,.0f} ({s.beat} of {s.rows} rows)"


def _submissions_section(declared: dict[str, dict[str, Any]]) -> list[str]:
    submissions = list({id(s): s for s in declared.values()}.values())
    if not submissions:
        return []
    header = ["submission", "methods", "authors", "code", "open source", "deterministic", "hardware", "wall time",
              "date", "description"]
    lines = ["## Submissions", "", markdown_row(header), "|" + "---|" * len(header)]
    for s in submissions:
        cells = [markdown_text(s["name"]), ", ".join(_code(m) for m in s["methods"]), markdown_text(s["authors"]),
                 f"<{s['code']}>" if s["code"] else "-", "yes" if s["open_source"] else "no",
                 "yes" if s["deterministic"] else "no",
                 *(markdown_text(s[k]) for k in ("hardware", "wall_time", "date", "description"))]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def leaderboard_markdown(table: Sequence[Standing], refs: dict[tuple[str, str], float],
                         declared: dict[str, dict[str, Any]] | None = None, *, sources: Sequence[str] = (),
                         task_bounds: dict[tuple[str, str], float] | None = None) -> str:
    """The page: per track its plot, then per budget the methods by score and the leading methods' mean step
    time per task beside the task's reference (``refs``: ``score.references``); ``declared``: label -> its
    submission's fields (``submission.check_submissions``); ``task_bounds``: (track, task) -> a lower bound on its
    step time (``placement-env bound``), for each method's gap to it."""
    declared = declared or {}
    task_bounds = task_bounds or {}
    lines = ["# Leaderboard", "",
             "Score: per seed, the geometric mean over the track's tasks of the task's reference step time (the best "
             "built-in zero-budget heuristic's) over the method's; a failed placement counts as a "
             f"{DEFAULT_FAILING_SIGNAL_S:g} s step. The score is the mean over seeds with its {CONFIDENCE:.0%} "
             "interval (Student t). Above 1 beats the reference on the tasks' geometric mean. On measured tasks every "
             "step time is first divided by the step time of the anchor placement (every group on device 0) measured "
             "in the same run, so that runs on a slower or faster machine compare.", ""]
    if sources:
        lines += ["Made by `placement-env leaderboard` from " + ", ".join(_code(str(s)) for s in sources) + ".", ""]
    lines += _submissions_section(declared)
    sections: dict[str, dict[int, list[Standing]]] = defaultdict(lambda: defaultdict(list))
    for s in table:
        sections[s.suite][s.budget].append(s)
    plots = plot_names(list(sections))
    header = ["#", "method", f"score [{CONFIDENCE:.0%} interval]", "seeds", "failures",
              "evaluations to beat the reference (median; rows that did)", "wall s per row (total)",
              "open source / deterministic / code"] + (["gap to the bound (geometric mean over tasks)"]
                                                       if task_bounds else [])
    for suite, budgets in sections.items():
        lines += [f"## {_code(suite)}", "", f"![score against budget, {markdown_text(suite)}]({plots[suite]})", ""]
        for budget, members in budgets.items():
            lines += [f"### {_code(suite)}, budget {budget:,}", "", "| " + " | ".join(header) + " |",
                      "|" + "---|" * len(header)]
            for rank, s in enumerate(members, 1):
                cells = [str(rank) if s.score is not None else "-", _code(s.method), _score_cell(s), str(len(s.seeds)),
                         str(s.failures), _to_beat_cell(s), f"{s.wall_s:.3g} ({s.wall_total_s:.3g})",
                         _declared_cell(s.method, declared)]
                if task_bounds:
                    above = mean_gap(s, suite, task_bounds)
                    cells.append("-" if above is None else f"+{above:.1%}")
                lines.append("| " + " | ".join(cells) + " |")
            lines += ["", *_machines_note(members), *_task_table(suite, members, refs, task_bounds), ""]
    return "\n".join(lines)


def _machines_note(members: Sequence[Standing]) -> list[str]:
    """A warning, with the machines each method's rows ran on, where a table's measured rows come from more than
    one machine (``score.mixed_machines``); none otherwise. Methods are grouped by their whole set of machine
    marks, so two hosts that share a ``local:N`` digest get a line each, and a method whose rows come from both
    gets a line of its own naming both."""
    if not mixed_machines(members):
        return []
    methods_on: dict[tuple[str, ...], list[str]] = defaultdict(list)  # machine marks -> methods
    for s in members:
        methods_on[s.machines].append(s.method)
    lines = ["**Measured on more than one machine.** The anchor evens out a machine's speed, not its balance of "
             "compute against copies between workers, so scores compare only between methods measured on one "
             "machine. The machines (a `local:N` cluster's digest holds its host's memory; the host where rows "
             "recorded it), and whose rows ran there:", ""]
    for marks, methods in methods_on.items():
        digests = [mark for mark in marks if not mark.startswith(HOST_MARK)]
        hosts = [markdown_text(mark.removeprefix(HOST_MARK)) for mark in marks if mark.startswith(HOST_MARK)]
        where = (f" (host: {hosts[0]})" if len(hosts) == 1
                 else f" (rows from {len(hosts)} hosts: {'; '.join(hosts)})" if hosts else "")
        lines.append(f"- {', '.join(_code(mark) for mark in digests) or 'simulated only'}{where}: "
                     + ", ".join(_code(m) for m in methods))
    return [*lines, ""]


def mean_gap(standing: Standing, suite: str, task_bounds: dict[tuple[str, str], float]) -> float | None:
    """The geometric mean over a standing's tasks of its mean step time over the task's bound, minus 1 (None
    unless every task it has has a bound)."""
    ratios = [mean / task_bounds[suite, task] for task, mean in standing.task_means.items()
              if task_bounds.get((suite, task), 0) > 0]
    if not ratios or len(ratios) < len(standing.task_means):
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) - 1


def _task_table(suite: str, members: Sequence[Standing], refs: dict[tuple[str, str], float],
                task_bounds: dict[tuple[str, str], float]) -> list[str]:
    leading = [s for s in members if s.score is not None][:LEADING_METHODS]
    if not leading:
        return []
    tasks = sorted({task for s in leading for task in s.task_means})
    with_bounds = any((suite, task) in task_bounds for task in tasks)
    lines = [f"Mean step time per task (s; a failure counts {DEFAULT_FAILING_SIGNAL_S:g}), the leading methods"
             + (" (in brackets: how far above the task's lower bound)" if with_bounds else "") + ":", "",
             "| task | reference | " + ("lower bound | " if with_bounds else "")
             + " | ".join(_code(s.method) for s in leading) + " |",
             "|---|---|" + ("---|" if with_bounds else "") + "---|" * len(leading)]
    anchored = {task for s in leading for task in s.anchored}
    if anchored:
        lines[0] = lines[0][:-1] + ("; on the measured tasks marked †, the step time over the anchor's, every group on "
                                    "device 0, measured in the same run:")
    for task in tasks:
        reference = refs.get((suite, task))
        limit = task_bounds.get((suite, task))
        cells = [_code(task) + (" †" if task in anchored else ""), "-" if reference is None else f"{reference:.4g}"]
        if with_bounds:
            cells.append("-" if limit is None else f"{limit:.4g}")
        for s in leading:
            mean = s.task_means.get(task)
            above = gap(mean, limit)
            cells.append("-" if mean is None else f"{mean:.4g}" + ("" if above is None else f" (+{above:.0%})"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


CSV_COLUMNS = ("suite", "budget", "method", "score", "low", "high", "seeds", "missing_tasks", "missing_rows",
               "unreferenced_tasks", "rows", "failures", "wall_s_mean", "wall_s_total", "evaluations_to_beat_reference",
               "rows_that_beat_reference", "submission", "open_source", "deterministic", "code", "machines")


def leaderboard_csv(table: Sequence[Standing], declared: dict[str, dict[str, Any]] | None = None) -> str:
    """A line per track, budget and method (``CSV_COLUMNS``); empty cells where there is no value."""
    declared = declared or {}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in table:
        low, high = s.interval or (None, None)
        sub = declared.get(s.method)
        origin = ("built in" if ships_with_project(s.method) else "not declared", None, None, None) if sub is None \
            else (sub["name"], sub["open_source"], sub["deterministic"], sub["code"])
        writer.writerow([s.suite, s.budget, s.method, s.score, low, high, len(s.seeds), s.missing_tasks, s.missing_rows,
                         s.unreferenced, s.rows, s.failures, round(s.wall_s, 6), round(s.wall_total_s, 6), s.to_beat,
                         s.beat, *origin, "; ".join(s.machines)])
    return out.getvalue()


def plot_names(suites: Sequence[str]) -> dict[str, str]:
    """suite -> the file name of its plot beside the page: the name with ``/`` as ``_`` made a file name
    (``output_paths.file_name_part``), or, where two suites would share that, the name itself made one (which
    differs for every suite)."""
    readable = {suite: f"{file_name_part(suite.replace('/', '_'))}.png" for suite in suites}
    counts = Counter(readable.values())
    return {suite: name if counts[name] == 1 else f"{file_name_part(suite)}.png" for suite, name in readable.items()}


def score_figure(table: Sequence[Standing], suite: str) -> Figure:
    """Score against budget (log x; budget 0 drawn at 1) on ``suite``, a line with interval bars per method
    scored at a positive budget; methods scored only at budget 0 are grey points with their names."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 5), dpi=120)
    FigureCanvasAgg(figure)
    axis = figure.add_subplot(1, 1, 1)
    by_method: dict[str, list[Standing]] = defaultdict(list)
    for s in table:
        if s.suite == suite and s.score is not None:
            by_method[s.method].append(s)
    budgets = sorted({s.budget for s in table if s.suite == suite} | {0})
    lines = 0
    zero_only = []
    n_lines = sum(any(s.budget > 0 for s in members) for members in by_method.values())
    for method, members in sorted(by_method.items()):
        members.sort(key=lambda s: s.budget)
        y = [s.score for s in members]
        if all(s.budget == 0 for s in members):
            axis.plot([1], y, marker="s", ms=3, color="grey")
            zero_only.append((y[0], method))
            continue
        err = [[s.score - (s.interval or (s.score, s.score))[0] for s in members],
               [(s.interval or (s.score, s.score))[1] - s.score for s in members]]
        # each method's points shifted a little along the log axis, so that bars at one budget stand side by side
        shift = 10 ** (DODGE_DECADES * (lines / (n_lines - 1) - 0.5)) if n_lines > 1 else 1.0
        cycle = lines // 10  # the colours repeat every ten lines: the line style and marker tell those apart
        axis.errorbar([max(s.budget, 1) * shift for s in members], y, yerr=err, marker=_MARKERS[cycle % len(_MARKERS)],
                      ms=3, capsize=2, linestyle=_LINE_STYLES[cycle % len(_LINE_STYLES)], label=plot_text(method))
        lines += 1
    _label_points(axis, zero_only)
    axis.set_xscale("log")
    axis.set_xlim(0.8, max(budgets[-1], 10) * 1.5)
    axis.set_xticks([max(b, 1) for b in budgets], [f"{b:,}" for b in budgets])
    axis.axhline(1.0, color="black", lw=1)
    axis.set_xlabel("budget (runtime evaluations; methods scored only at 0 in grey)")
    axis.set_ylabel("score (reference / step time, geometric mean)")
    axis.set_title(plot_text(suite))
    if axis.get_legend_handles_labels()[0]:  # beside the axes, so it hides no line
        axis.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    figure.tight_layout()
    return figure


def _label_points(axis: Any, points: Sequence[tuple[float, str]]) -> None:
    """Name each of ``points`` (score, method) drawn at budget 0 to its right, labels moved apart vertically so
    none overlaps (a thin line joins a moved label to its point)."""
    if not points:
        return
    scores = [score for score, _ in points]
    gap = 0.03 * max(max(scores) - min(scores), 0.3)
    placed = -math.inf
    for score, method in sorted(points):
        label_y = max(score, placed + gap)
        placed = label_y
        axis.annotate(plot_text(method), (1, score), xytext=(1.3, label_y), fontsize=6, color="grey", va="center",
                      arrowprops={"arrowstyle": "-", "color": "lightgrey", "lw": 0.5} if label_y != score else None)


def write_leaderboard(files: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                      submissions: Sequence[str | os.PathLike] = (), bounds: Sequence[str | os.PathLike] = ()) -> Path:
    """Score the results ``files`` and write ``leaderboard.md``, ``leaderboard.csv`` and ``<track>.png`` per track
    under ``out_dir`` (made if missing), with the declared fields of ``submissions`` (JSON files,
    ``submission.read_submission``) beside the methods they name and each method's gap to the lower bounds of
    ``bounds`` (``placement-env bound`` files); returns the page's path. Every input is read and checked before
    anything is written."""
    out_dir = check_output_folder(out_dir, "out_dir")
    rows = read_leaderboard_rows(files)
    declared = check_submissions([read_submission(path) for path in submissions], {method_label(r) for r in rows})
    table = standings(rows)
    refs = references([row for row in rows if finished(row)])
    tight = read_bounds(bounds)
    task_bounds: dict[tuple[str, str], float] = {}
    for row in rows:
        found = bound_of(row, tight)
        if found is not None:
            task_bounds[row["suite"], row["task"]] = found
    page = leaderboard_markdown(table, refs, declared, sources=[str(path) for path in files], task_bounds=task_bounds)
    with OutputFolder(out_dir) as out:
        for suite, name in plot_names(list(dict.fromkeys(s.suite for s in table))).items():
            out.write(name, png(score_figure(table, suite)))
        out.write("leaderboard.csv", leaderboard_csv(table, declared).encode("utf-8"))
        return out.write("leaderboard.md", page.encode("utf-8"))

