"""Lower bounds per task in a file, and each result's distance to them: ``placement-env bound`` and ``--bounds``.

``write_bounds(suite, path)`` appends one JSON line per task of a suite (``pe.bound`` of its graph and cluster:
the bound, its parts, the solver's status and seconds), skipping tasks the file has for the same graph, cluster
and simulator. ``read_bounds`` reads them back, keyed by what a results row names: (benchmark, cluster, the
graph's fingerprint ``versions.opgraph``). ``bound_of(row, bounds)`` is a row's bound, or None when the file has
none for the graph and cluster it ran on; ``gap`` is a step time's distance to it (step time / bound - 1).
A bound holds for simulated rows only: measured rows get none.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from ..cluster import load_cluster
from ..errors import ResultsFormatError
from ..evaluation import LOWER_BOUNDS, bound
from ..runtime.simulated import SIMULATOR_VERSION
from .results import MAX_SECONDS, expected_number
from .suites import Task, resolve_suite
from .task_graph import load_task_graph

__all__ = ["bound_of", "gap", "read_bounds", "write_bounds"]

BOUND_COLUMNS = ("benchmark", "cluster", "task", "opgraph", "cluster_digest", "simulator", "method", "bound_s",
                 "parts", "status", "solver_s", "time_limit_s")


def _key(benchmark: str, cluster: Any, opgraph: str) -> tuple[str, str, str]:
    return (benchmark, cluster if isinstance(cluster, str) else json.dumps(cluster, sort_keys=True), opgraph)


def read_bounds(paths: Sequence[str | os.PathLike]) -> dict[tuple[str, str, str], float]:
    """(benchmark, cluster, opgraph digest) -> the largest bound (s) the files give it, made by this simulator's
    version; a ResultsFormatError naming the file, line and column of a malformed line."""
    found: dict[tuple[str, str, str], float] = {}
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise ResultsFormatError(f"bounds file {str(path)!r} cannot be read ({error.strerror or error})") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}, line {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ResultsFormatError(f"{where}: not JSON ({error.msg})") from None
            if not isinstance(row, dict) or any(column not in row for column in BOUND_COLUMNS):
                raise ResultsFormatError(f"{where}: expected a JSON object with {', '.join(BOUND_COLUMNS)}")
            value = row["bound_s"]
            if value is not None and expected_number(value, maximum=MAX_SECONDS):
                raise ResultsFormatError(f"{where}: bound_s = {value!r}; expected seconds >= 0 or null (no placement "
                                         "fits)")
            if str(row["simulator"]) != str(SIMULATOR_VERSION) or value is None:
                continue  # made by another simulator: it may not hold for this one's rows
            key = _key(row["benchmark"], row["cluster"], row["opgraph"])
            found[key] = max(found.get(key, 0.0), float(value))
    return found


def bound_of(row: dict[str, Any], bounds: dict[tuple[str, str, str], float]) -> float | None:
    """The bound of the file for a simulated results row's graph and cluster (None if none or not simulated)."""
    if row.get("runtime") != "sim" or str(row.get("versions", {}).get("simulator")) != str(SIMULATOR_VERSION):
        return None
    return bounds.get(_key(row["benchmark"], row["cluster"], str(row.get("versions", {}).get("opgraph", ""))))


def gap(step_s: float | None, bound_s: float | None) -> float | None:
    """``step_s / bound_s - 1`` (how far above the bound), None when either is missing or the bound is 0."""
    if step_s is None or bound_s is None or not bound_s > 0 or not math.isfinite(step_s):
        return None
    return step_s / bound_s - 1


def _done(path: Path) -> set[tuple[str, str, str, str]]:
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(*_key(r["benchmark"], r["cluster"], r["opgraph"]), r["method"]) for r in rows
            if str(r.get("simulator")) == str(SIMULATOR_VERSION)}


def write_bounds(suite: str, path: str | os.PathLike, *, method: str = "windows", time_limit_s: float = 60.0,
                 tasks: Sequence[Task] | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Append ``pe.bound(..., method=method, time_limit_s=...)`` of every simulated task of ``suite`` (or ``tasks``)
    to ``path`` (JSON lines), skipping tasks it has already; returns the lines written."""
    if method not in LOWER_BOUNDS:
        raise ValueError(f"method={method!r}; expected one of {', '.join(LOWER_BOUNDS)}")
    name, chosen = resolve_suite(suite, tasks)
    path = Path(path)
    done = _done(path)
    written = []
    for task in tqdm([t for t in chosen if t.runtime == "sim"], desc=f"bounds of {name}", disable=not progress):
        graph = load_task_graph(task.benchmark, task.graph_options)
        cluster = load_cluster(task.cluster)
        if (*_key(task.benchmark, task.cluster, graph.digest), method) in done:
            continue
        found = bound(graph, cluster, method=method, time_limit_s=time_limit_s)
        row = {"benchmark": task.benchmark, "cluster": task.cluster, "task": task.name, "opgraph": graph.digest,
               "cluster_digest": cluster.digest, "simulator": str(SIMULATOR_VERSION), "method": method,
               "bound_s": found.value_s if math.isfinite(found.value_s) else None,
               "parts": {k: (v if math.isfinite(v) else None) for k, v in found.parts.items()},
               "status": found.status, "solver_s": round(found.solver_s, 3), "time_limit_s": time_limit_s}
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        done.add((*_key(task.benchmark, task.cluster, graph.digest), method))
        written.append(row)
    return written
