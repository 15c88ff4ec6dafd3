"""Replay every placement of a results file and flag rows whose runtime does not reproduce.

Simulated and grappler runtimes are deterministic, so they must reproduce exactly; measured
runtimes must lie within ``tolerance`` (relative): for a row with an anchor (``anchor_s``), its step time over
its anchor against the replay's over the anchor placement measured right after it, so that a row measured on a
slower or faster machine than this one still compares. This is how third-party results are checked.

A row records the simulator's model version, the digest of its cluster's definition and, for a task
whose graph is a file, the digest of the file (see ``results.versions``); its graph is loaded as the
runner loaded it (``task_graph.load_task_graph``). A row from another simulator version, made on a
cluster of the same name that is now defined differently (a preset that was recalibrated), or made on
a graph file that has changed since, is not replayed: it is reported as *stale*, with both versions,
instead of as a mismatch. Rows from before versions were recorded are replayed.

The replay measures the row's placement; the method is not run again, so a row is replayed the same
whatever its method and arguments (``method``, ``method_args``), which need not be importable here.

A results file is third-party input, so ``validate`` replays only what runs on this machine and
connects to nothing: ``sim`` and ``grappler`` rows in this process, ``measured`` rows on local
workers of a ``local:N`` cluster (in their private network namespace), each measurement tried once
under a time limit (``row_timeout_s``; by default the measured runtime's, scaled to the graph). A
row measured on a remote TF cluster (a cluster JSON with a ``remote_target``), or on a cluster
without local workers, a row whose benchmark or cluster cannot be loaded here, and a measured
replay that runs past the time limit or whose machinery fails are reported as *skipped*, with the
reason, and not judged.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from ..cluster import Cluster, digest_is_portable, load_cluster
from ..errors import (DriverError, InvalidPlacementError, IsolationError, PlacementEnvError, ResultsFormatError,
                      UnknownSuiteError)
from ..evaluation import Evaluator
from ..placement import INFRASTRUCTURE, Measurement
from ..runtime.simulated import SIMULATOR_VERSION, model_changed_since
from . import placebench
from .host import host_description, host_label
from .results import anchor_placement, expected_number, method_label, read_results, show
from .task_graph import graph_file_digest, load_task_graph

DEFAULT_MEASURED_TOLERANCE = 0.2


@dataclass(frozen=True)
class Mismatch:
    line: int  # the row's line in the results file (1-based)
    row: dict[str, Any]
    reason: str
    stale: bool = False  # made by another simulator version or cluster definition: not replayed
    skipped: bool = False  # cannot be replayed here, locally and safely, or its measurement did not finish

    @property
    def failed(self) -> bool:
        """The row was replayed and does not reproduce."""
        return not (self.stale or self.skipped)


def _benchmark_version(suite: str) -> str:
    """``"<version>:<digest>"`` of the shipped benchmark version whose track ``suite`` is ("" if none ships)."""
    try:
        benchmark = placebench.benchmark_of_suite(suite)
    except UnknownSuiteError:
        return ""
    return "" if benchmark is None else f"{benchmark.name}:{benchmark.digest}"


def _stale_reason(row: dict[str, Any], evaluator: Evaluator) -> str:
    """Why ``row`` cannot be replayed here ("" when it can)."""
    cluster = evaluator.cluster
    made = row["versions"] if isinstance(row.get("versions"), dict) else {}
    simulator = made.get("simulator")
    if row["runtime"] == "sim" and simulator is not None and model_changed_since(str(simulator), cluster):
        return f"made by simulator version {simulator}; this is version {SIMULATOR_VERSION}"
    digest = made.get("cluster")  # a local:N cluster's digest holds its host's RAM: such rows are checked by name
    if digest is not None and digest != cluster.digest and digest_is_portable(cluster):
        return (f"made on cluster {row['cluster']!r} as defined then (digest {digest}); it is now defined "
                f"differently (digest {cluster.digest})")
    digest = made.get("opgraph")  # a graph file's rows are checked by the file's digest below (an import may name
    if digest is not None and "graph" not in made and digest != evaluator.graph.digest:  # its ops anew each time)
        return (f"made on graph {show(row['benchmark'])} as built then (digest {digest}); it builds differently here "
                f"(digest {evaluator.graph.digest}: another TensorFlow or builder version)")
    digest, now = made.get("benchmark"), _benchmark_version(row["suite"])
    if digest is not None and digest != now:
        return f"made for benchmark {digest}; this package ships {now or 'no such version'}"
    digest, now = made.get("graph"), graph_file_digest(evaluator.graph)
    if digest is not None and digest != now:
        return (f"made on graph file {show(row['benchmark'])} as it was then (digest {digest}); the file has changed "
                f"since (digest {now})")
    return ""


def _not_local_reason(cluster: Cluster, runtime: str) -> str:
    """Why rows of ``runtime`` on ``cluster`` cannot be replayed on this machine ("" when they can)."""
    if runtime != "measured":
        return ""  # the simulator and grappler run in this process and connect to nothing
    if cluster.remote_target:
        return (f"measured on the remote TF cluster at {cluster.remote_target} (cluster {cluster.name!r}); validate "
                "connects to no server: replay it where that cluster runs, with pe.Evaluator(..., 'measured')")
    if not cluster.local_workers:
        return (f"measured, but cluster {cluster.name!r} has no local TF workers here to measure on "
                '(a "local:N" cluster has)')
    return ""


class _Replayers:
    """One Evaluator per (benchmark, cluster, runtime) of a results file, or the reason its rows are skipped."""

    def __init__(self, row_timeout_s: float | None) -> None:
        # One try per measured replay, so a row takes at most the workers' start, its timeout and the margin.
        self.measured_options = {"retries": 0, **({} if row_timeout_s is None else {"timeout_s": row_timeout_s})}
        self._evaluators: dict[str, Evaluator | str] = {}

    @staticmethod
    def _key(row: dict[str, Any]) -> str:
        # a cluster may be a dict; a graph file's import options are part of its graph
        return json.dumps([row["benchmark"], row["cluster"], row["runtime"], row.get("graph_options", {})],
                          sort_keys=True)

    def get(self, row: dict[str, Any]) -> Evaluator | str:
        key = self._key(row)
        if key not in self._evaluators:
            self._evaluators[key] = self._make(row["benchmark"], row.get("graph_options", {}), row["cluster"],
                                               row["runtime"])
        return self._evaluators[key]

    def refuse(self, row: dict[str, Any], reason: str) -> None:
        """Skip this row's (benchmark, cluster, runtime) from now on, closing its evaluator."""
        key = self._key(row)
        evaluator = self._evaluators.get(key)
        if isinstance(evaluator, Evaluator):
            evaluator.close()
        self._evaluators[key] = reason

    def _make(self, benchmark: Any, graph_options: Any, cluster_spec: Any, runtime: str) -> Evaluator | str:
        try:
            cluster = load_cluster(cluster_spec)
            reason = _not_local_reason(cluster, runtime)
            if reason:
                return reason
            options = self.measured_options if runtime == "measured" else None
            return Evaluator(load_task_graph(benchmark, graph_options), cluster, runtime, measured_options=options)
        except (PlacementEnvError, OSError) as error:
            return f"cannot be loaded here: {error}"

    def close(self) -> None:
        for evaluator in self._evaluators.values():
            if isinstance(evaluator, Evaluator):
                evaluator.close()


def _unfinished_reason(row: dict[str, Any], m: Measurement) -> str:
    """Why the measured replay ``m`` of ``row`` says nothing about it ("" when it does): the machinery
    failed, or it ran past its time limit where the row says the placement ran."""
    if m.failure == INFRASTRUCTURE:
        return f"the measuring machinery failed, so the placement was not measured: {m.message}"
    if m.failure == "timeout" and row["ok"]:
        return f"the replay ran past its time limit of {m.extra.get('timeout_s', float('nan')):g} s ({m.message})"
    return ""


def _compare(number: int, row: dict[str, Any], m: Measurement, tolerance: float,
             anchor: Measurement | None = None) -> Mismatch | None:
    """The mismatch between ``row`` and its replay ``m``, if any; ``anchor``, the replay's measurement of the anchor
    placement where the row has an anchor, makes a measured row's step time over its anchor the number compared."""
    claimed = row["runtime_s"]
    if bool(row["ok"]) != m.ok:
        return Mismatch(number, row, f"ok={row['ok']} but the replay says ok={m.ok} ({m.failure})")
    if m.ok and row["runtime"] in ("sim", "grappler") and claimed != m.runtime_s:
        return Mismatch(number, row, f"runtime_s={claimed!r} but the replay gives {m.runtime_s!r}")
    if not (m.ok and row["runtime"] == "measured"):
        return None
    if anchor is not None and anchor.ok:
        ratio, replayed = claimed / row["anchor_s"], m.runtime_s / anchor.runtime_s
        if not math.isclose(ratio, replayed, rel_tol=tolerance):
            return Mismatch(number, row, f"runtime_s / anchor_s = {ratio:.4g} but the replay measures {replayed:.4g} "
                                         f"({m.runtime_s:.6g} s over {anchor.runtime_s:.6g} s; tolerance "
                                         f"{tolerance:.0%}){_other_host(row)}")
    elif not math.isclose(claimed, m.runtime_s, rel_tol=tolerance):
        return Mismatch(number, row, f"runtime_s={claimed:.6g} but the replay measures {m.runtime_s:.6g} "
                                     f"(tolerance {tolerance:.0%}){_other_host(row)}")
    return None


def _other_host(row: dict[str, Any]) -> str:
    """"; measured on <host>, replayed on <this host>" where the row records a host other than this one, else ""."""
    made, here = row.get("host"), host_description()
    if not made or made == here:
        return ""
    return f"; measured on {host_label(made)}, replayed on {host_label(here)}"


def _replay_anchor(row: dict[str, Any], evaluator: Any, m: Measurement) -> Measurement | None:
    """For a measured row with an anchor whose placement ran, the anchor placement measured right after it (as the
    run measured it), so that the step times compare over a machine that may run faster or slower than the
    row's did."""
    if row["runtime"] != "measured" or row.get("anchor_s") is None or not m.ok:
        return None
    return evaluator(anchor_placement(len(row["placement"])))


def validate(results: str | os.PathLike, *, tolerance: float = DEFAULT_MEASURED_TOLERANCE,
             row_timeout_s: float | None = None, progress: bool = True) -> tuple[int, list[Mismatch]]:
    """(rows replayed, rows that do not reproduce, are stale or were skipped). Rows without a placement
    (method errors) are passed over; stale (``Mismatch.stale``) and skipped (``Mismatch.skipped``) rows
    are reported with the reason, not judged. ``row_timeout_s`` limits each measured replay (None: the
    measured runtime's limit, scaled to the graph).
    A missing, empty or unreadable file, or a row that cannot be a real result (see ``results.read_results``; a
    placement of the wrong length), is a ResultsFormatError naming the file and line. A ``tolerance`` that is not a
    finite number >= 0, or a ``row_timeout_s`` that is not a finite number > 0, is a ValueError."""
    expected = expected_number(tolerance)
    if expected:
        raise ValueError(f"tolerance = {tolerance!r}; {expected} (relative: 0.2 is 20%)")
    expected = "" if row_timeout_s is None else expected_number(row_timeout_s, above=True)
    if expected:
        raise ValueError(f"row_timeout_s = {row_timeout_s!r}; {expected} (seconds) or None")
    found = read_results(results, must_exist=True)
    replayers = _Replayers(row_timeout_s)
    mismatches: list[Mismatch] = []
    checked = 0
    try:
        for number, row in tqdm(zip(found.lines, found.rows), total=len(found.rows), desc="validate", unit="row",
                                disable=not progress):
            if not row["placement"]:
                continue
            if row["failure"] == INFRASTRUCTURE:
                mismatches.append(Mismatch(number, row, "records a failure of the measuring machinery, not a result "
                                                        "of the placement (a resumed run redoes it)", skipped=True))
                continue
            evaluator = replayers.get(row)
            if isinstance(evaluator, str):
                mismatches.append(Mismatch(number, row, evaluator, skipped=True))
                continue
            stale = _stale_reason(row, evaluator)
            if stale:
                mismatches.append(Mismatch(number, row, stale, stale=True))
                continue
            try:
                m = evaluator(row["placement"])
            except InvalidPlacementError as error:
                raise ResultsFormatError(f"{results}:{number}: the row of task {show(row['task'])}, method "
                                         f"{show(method_label(row))}: {error}") from None
            except (IsolationError, DriverError) as error:  # no local workers can run here: skip the rest too
                replayers.refuse(row, f"cannot be measured here: {error}")
                mismatches.append(Mismatch(number, row, f"cannot be measured here: {error}", skipped=True))
                continue
            unfinished = _unfinished_reason(row, m)
            if unfinished:
                mismatches.append(Mismatch(number, row, unfinished, skipped=True))
                continue
            checked += 1
            mismatch = _compare(number, row, m, tolerance, _replay_anchor(row, evaluator, m))
            if mismatch is not None:
                mismatches.append(mismatch)
    finally:
        replayers.close()
    return checked, mismatches
