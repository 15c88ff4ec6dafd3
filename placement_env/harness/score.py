"""Scores per track and budget: pure functions over results rows.

The score of a method (a label with its arguments, ``results.method_label``) on a track (a suite) at a budget is,
per seed, the geometric mean over the track's tasks of the task's reference step time over the method's step
time; a placement that failed (out of memory, say, or a method that raised) is charged the failing signal
(``DEFAULT_FAILING_SIGNAL_S``) as its step time. The score is the mean over seeds with a 95% confidence interval
(Student t over the per-seed scores; none for one seed). Above 1 beats the reference.

The reference of a task is the step time of the best built-in zero-budget heuristic (``REFERENCE_HEURISTICS``,
not every method that spends no evaluation: a learned placer used zero-shot spends none too). On a track of a
versioned benchmark it is the one frozen in the benchmark's file where the file has one (every simulated task), so
every results file is scored against the same number; otherwise it is the best, over the heuristics the track
names (the frozen file's list, else ``REFERENCE_HEURISTICS``), of a heuristic's mean successful step time over its
zero-evaluation rows without arguments. A method that lacks a row for some task and seed at a budget, or a track
with a task that has no reference, gets no score, and the counts of what is missing instead.

On a measured task, step times are first divided by the row's anchor (``anchor_s``: the task's anchor placement,
every group on device 0, measured right after the row's placement on the same workers), so that rows measured on
days when the machine ran at different speeds compare, and so do rows measured on different machines. A measured
row without an anchor (written before rows recorded one) takes the mean step time of the rows without one that
placed the anchor placement itself, on the same suite and task. A measured task with a row that has neither is
scored in seconds, as a simulated one.

The anchor evens out a machine's speed, not its balance of compute against copies, so measured rows from different
machines still compare poorly. Each standing names the machines its measured rows ran on (``machine_marks``: the
``local:N`` definition's digest, which holds the host's memory, and the recorded host where there is one), and
``mixed_machines`` tells which tables hold rows of more than one.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..env.rewards import DEFAULT_FAILING_SIGNAL_S
from ..problem import ZERO_BUDGET_HEURISTICS
from . import placebench
from .host import host_label
from .leaderboard import evaluations_to_beat, in_key_order
from .results import ANCHOR_DEVICE, finished, method_label

# The built-in methods that place a graph from its costs alone, spending no runtime evaluation: the single-device
# placements, the graph partitioners, the list schedulers and the expert (as written today and as TF 1.x placed it).
REFERENCE_HEURISTICS: tuple[str, ...] = ("single_cpu", "single_gpu", *ZERO_BUDGET_HEURISTICS, "expert_tf1")
CONFIDENCE = 0.95
# How far apart a run's anchors may lie before the run is called unsteady: on a quiet machine a placement measured
# twice in a row agrees within 3.2-5.6% (docs/runtimes.md, "How well the measurement agrees with itself"), so a
# spread of three times that says the machine's state moved during the run.
STEADY_SPREAD = 0.15


@dataclass
class Standing:
    """One method on one track (``suite``) at one budget."""

    suite: str
    budget: int
    method: str  # the label, with arguments
    seeds: list[int]  # the seeds it has rows for
    per_seed: list[float]  # the score of each seed that has every task (None-free, in seed order)
    score: float | None  # mean of per_seed; None unless every seed has every task and every task a reference
    interval: tuple[float, float] | None  # the 95% t interval of the mean; None for one seed or no score
    missing_rows: int  # (task, seed) pairs without a row, over its seeds
    missing_tasks: int  # tasks without a row for at least one of its seeds
    unreferenced: int  # tasks of the track without a reference step time
    rows: int
    failures: int  # rows whose placement failed (charged the failing signal)
    wall_s: float  # mean over rows
    wall_total_s: float
    to_beat: float | None  # median over rows that beat the reference of the evaluations it took them
    beat: int  # rows that beat the reference
    task_means: dict[str, float] = field(default_factory=dict)  # mean charged step time per task, over seeds
    anchored: set[str] = field(default_factory=set)  # tasks whose step times are over the anchor's (no unit)
    machines: tuple[str, ...] = ()  # machine_marks of its measured rows, sorted


def failed(row: dict[str, Any]) -> bool:
    """Whether a row's placement has no usable step time (its method failed, or the placement did not run)."""
    runtime = row["runtime_s"]
    return not (row["ok"] and isinstance(runtime, (int, float)) and math.isfinite(runtime))


def charged(row: dict[str, Any]) -> float:
    """The step time a row is scored by: its runtime if it succeeded, else the failing signal."""
    return DEFAULT_FAILING_SIGNAL_S if failed(row) else float(row["runtime_s"])


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values`` (ValueError for none or a value that is not positive)."""
    if not values or min(values) <= 0:
        raise ValueError(f"geometric mean of {list(values)!r}: expected one or more positive numbers")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` interval of the mean of ``values`` by Student's t (n - 1 degrees of freedom); None for
    fewer than two values, whose spread is unknown."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    mean = float(np.mean(values))
    half = float(t.ppf(0.5 + confidence / 2, len(values) - 1)) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean - half, mean + half


def row_key(row: dict[str, Any]) -> tuple:
    """What tells a row apart in a results file: suite, task, method label, seed and budget."""
    return row["suite"], row["task"], method_label(row), row["seed"], row["budget"]


def _places_the_anchor(row: dict[str, Any]) -> bool:
    placement = row.get("placement") or []
    return bool(placement) and all(device == ANCHOR_DEVICE for device in placement)


def anchors(rows: Iterable[dict[str, Any]]) -> dict[tuple, float]:
    """``row_key`` -> the anchor step time a measured row's step time is divided by, for the rows of every
    measured task whose rows all have one (see the module docstring)."""
    rows = list(rows)
    legacy: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if (row.get("runtime") == "measured" and "anchor_s" not in row and _places_the_anchor(row)
                and not failed(row)):
            legacy[(row["suite"], row["task"])].append(float(row["runtime_s"]))
    legacy_anchor = {task: float(np.mean(times)) for task, times in legacy.items()}
    found: dict[tuple, float] = {}
    unanchored: set[tuple[str, str]] = set()
    for row in rows:
        if row.get("runtime") != "measured":
            continue
        task = (row["suite"], row["task"])
        anchor = row["anchor_s"] if "anchor_s" in row else legacy_anchor.get(task)
        if anchor is None:
            unanchored.add(task)
        else:
            found[row_key(row)] = float(anchor)
    return {key: anchor for key, anchor in found.items() if key[:2] not in unanchored}


DIGEST_SHOWN = 8  # leading hex digits of a cluster digest that name it on a page
HOST_MARK = "host: "  # how a machine mark that is a recorded host begins


def machine_marks(row: dict[str, Any]) -> set[str]:
    """What tells the machine a measured row ran on from another: ``"<cluster> <digest>"`` (a ``local:N``
    cluster's digest holds the host's memory, so it differs between hosts that differ in memory) and
    ``"host: <host_label>"`` where the row records its host; none for a simulated row."""
    if row.get("runtime") != "measured":
        return set()
    digest = (row.get("versions") or {}).get("cluster")
    marks = {f"{row['cluster']} {str(digest)[:DIGEST_SHOWN]}"} if digest else set()
    if row.get("host"):
        marks.add(HOST_MARK + host_label(row["host"]))
    return marks


def mixed_machines(members: Sequence["Standing"]) -> bool:
    """Whether the measured rows of ``members`` (one table: a track at a budget) ran on more than one machine: one
    cluster name under two digests, or two recorded hosts."""
    digests: dict[str, set[str]] = defaultdict(set)
    hosts = set()
    for s in members:
        for mark in s.machines:
            if mark.startswith(HOST_MARK):
                hosts.add(mark)
            else:
                name, digest = mark.rsplit(" ", 1)
                digests[name].add(digest)
    return len(hosts) > 1 or any(len(found) > 1 for found in digests.values())


def scored_time(row: dict[str, Any], anchor_of: dict[tuple, float]) -> float:
    """The step time a row is scored by (``charged``), over its anchor where it has one in ``anchor_of``
    (``anchors``)."""
    return charged(row) / anchor_of.get(row_key(row), 1.0)


def anchor_spreads(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(suite, task) -> the least and the largest ``anchor_s`` of the rows that have one, and how many they are."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.get("anchor_s") is not None:
            found[(row["suite"], row["task"])].append(float(row["anchor_s"]))
    return {task: (min(anchors), max(anchors), len(anchors)) for task, anchors in found.items()}


def steadiness_lines(rows: Iterable[dict[str, Any]]) -> list[str]:
    """What a run's measured rows say of the machine: per task with two or more anchors, their range, and a warning
    where one spreads past ``STEADY_SPREAD`` (none for rows without anchors)."""
    spreads = {task: spread for task, spread in sorted(anchor_spreads(rows).items()) if spread[2] > 1}
    lines = [f"{task}: the anchor placement measured {low * 1e3:.4g}-{high * 1e3:.4g} ms over {n} rows "
             f"(+{high / low - 1:.0%})" for (_, task), (low, high, n) in spreads.items()]
    unsteady = [task for (_, task), (low, high, _) in spreads.items() if high / low - 1 > STEADY_SPREAD]
    if unsteady:
        lines.append(f"warning: the same placement measured more than {STEADY_SPREAD:.0%} apart within this run on "
                     f"{len(unsteady)} of {len(spreads)} tasks ({', '.join(unsteady)}): the machine was not steady "
                     "(other load, or its host's); these rows compare poorly with others, even over their anchors")
    return lines


def reference_heuristics(suite: str) -> tuple[str, ...]:
    """The heuristics whose best is a task's reference on ``suite``: those its benchmark version froze the
    references with, or ``REFERENCE_HEURISTICS`` for a suite that is not a benchmark's track."""
    benchmark = placebench.benchmark_of_suite(suite)
    return tuple(benchmark.data["heuristics"]) if benchmark is not None else REFERENCE_HEURISTICS


def references(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(suite, task) -> the task's reference step time (see the module docstring; on an anchored measured task,
    over the anchor's); a task none of whose reference heuristics succeeded has none."""
    rows = list(rows)
    anchor_of = anchors(rows)
    times: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if (row["method"] in reference_heuristics(row["suite"]) and not row.get("method_args")
                and row["evaluations"] == 0 and not failed(row)):
            times[(row["suite"], row["task"], row["method"])].append(scored_time(row, anchor_of))
    out: dict[tuple[str, str], float] = {}
    for (suite, task, _), runtimes in times.items():
        out[(suite, task)] = min(out.get((suite, task), math.inf), float(np.mean(runtimes)))
    anchored = {key[:2] for key in anchor_of}
    for suite, task in {key[:2] for key in times} | {(row["suite"], row["task"]) for row in rows}:
        if (suite, task) in anchored:
            continue
        frozen = _frozen_reference(suite, task)
        if frozen is not None:
            out[(suite, task)] = frozen
    return out


def _frozen_reference(suite: str, task: str) -> float | None:
    benchmark = placebench.benchmark_of_suite(suite)
    if benchmark is None:
        return None
    try:
        frozen = benchmark.task_facts(suite.split("/", 1)[1], task).get("reference_s")
    except KeyError:  # a validation suite's name, or a task the track does not have
        return None
    return None if frozen is None else float(frozen)


def track_tasks(rows: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """suite -> the tasks a method is scored on: a benchmark track's frozen tasks, whatever the rows hold; for
    another suite, every task any row of it has."""
    tasks: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        tasks[row["suite"]].add(row["task"])
    for suite in tasks:
        if placebench.benchmark_of_suite(suite) is not None:
            tasks[suite] = {task.name for task in placebench.suite_tasks(suite)}
    return dict(tasks)


def standings(rows: Iterable[dict[str, Any]]) -> list[Standing]:
    """A Standing per (suite, budget, method label) of the finished rows (``results.finished``), ordered by suite
    (``suite_order``) and budget, then best score first (methods without a score last, by label)."""
    done = [row for row in in_key_order(list(rows)) if finished(row)]
    refs = references(done)
    anchor_of = anchors(done)
    anchored = {key[:2] for key in anchor_of}
    tasks_of = track_tasks(done)
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in done:
        groups[(row["suite"], row["budget"], method_label(row))].append(row)
    out = []
    for (suite, budget, label), members in groups.items():
        by_seed: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for row in members:
            by_seed[row["seed"]][row["task"]] = row
        tasks = sorted(tasks_of[suite])
        unreferenced = sum((suite, task) not in refs for task in tasks)
        absent = [[task for task in tasks if task not in by_seed[seed]] for seed in sorted(by_seed)]
        per_seed = [geometric_mean([refs[(suite, task)] / scored_time(by_seed[seed][task], anchor_of)
                                    for task in tasks])
                    for seed, lacking in zip(sorted(by_seed), absent) if not lacking and not unreferenced]
        complete = len(per_seed) == len(by_seed)
        beats = [n for n in (evaluations_to_beat(row, _reference_seconds(row, refs, anchor_of)) for row in members)
                 if n is not None]
        walls = [float(row["wall_s"]) for row in members]
        out.append(Standing(
            suite, budget, label, sorted(by_seed), per_seed,
            score=float(np.mean(per_seed)) if complete else None,
            interval=t_interval(per_seed) if complete else None,
            missing_rows=sum(map(len, absent)), missing_tasks=len({task for lacking in absent for task in lacking}),
            unreferenced=unreferenced, rows=len(members), failures=sum(map(failed, members)),
            wall_s=float(np.mean(walls)), wall_total_s=float(sum(walls)),
            to_beat=float(np.median(beats)) if beats else None, beat=len(beats),
            task_means={task: float(np.mean([scored_time(by_seed[s][task], anchor_of) for s in by_seed
                                             if task in by_seed[s]]))
                        for task in tasks if any(task in by_seed[s] for s in by_seed)},
            anchored={task for task in tasks if (suite, task) in anchored},
            machines=tuple(sorted(set().union(*map(machine_marks, members))))))
    out.sort(key=lambda s: (suite_order(s.suite), s.budget, s.score is None, -(s.score or 0.0), s.method))
    return out


def _reference_seconds(row: dict[str, Any], refs: dict[tuple[str, str], float],
                       anchor_of: dict[tuple, float]) -> float | None:
    """The reference of a row's task in seconds of the row's own run (times its anchor on an anchored task), which
    its best-so-far record is compared with."""
    reference = refs.get((row["suite"], row["task"]))
    return None if reference is None else reference * anchor_of.get(row_key(row), 1.0)


def suite_order(suite: str) -> tuple:
    """The sort key of a suite: a benchmark's tracks first, in the order its file lists them, then other suites by
    name."""
    benchmark = placebench.benchmark_of_suite(suite)
    if benchmark is None:
        return (1, suite, 0)
    track = suite.split("/", 1)[1]
    order = list(benchmark.tracks)
    return (0, benchmark.name, order.index(track) if track in order else len(order), track)
