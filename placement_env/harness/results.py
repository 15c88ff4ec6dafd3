"""The results file: one JSON object per line, appended row by row, so an interrupted run loses nothing."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import ResultsBusyError, ResultsFormatError
from ..cluster import Cluster
from ..evaluation import RUNTIMES
from ..placement import INFRASTRUCTURE
from ..runtime.simulated import SIMULATOR_VERSION

COLUMNS = ("suite", "task", "benchmark", "cluster", "runtime", "method", "seed", "budget", "placement",
           "runtime_s", "ok", "failure", "message", "evaluations", "wall_s", "lower_bound_s", "versions")


def versions(cluster: Cluster | None = None) -> dict[str, str]:
    """Versions of what produced a row: packages (read from package metadata; TF is not imported),
    the simulator's model version and, given the row's ``cluster``, the digest of its definition."""
    found = {"simulator": str(SIMULATOR_VERSION)}
    if cluster is not None:
        found["cluster"] = cluster.digest
    for package in ("placement_env", "tensorflow-cpu", "tensorflow", "numpy", "numba", "gymnasium"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def row_key(row: dict[str, Any]) -> tuple:
    """What makes a row unique in a results file: (suite, task, method, seed, budget), so one file can
    hold a method at several budgets."""
    return (row["suite"], row["task"], row["method"], row["seed"], row["budget"])


def check_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ResultsFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ResultsFormatError(f"{where}: missing column(s) {', '.join(missing)}; a row has {', '.join(COLUMNS)}")
    placement = row["placement"]
    if not isinstance(placement, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in placement):
        raise ResultsFormatError(f"{where}: placement must be a list of device indices, got {placement!r:.80}")
    for column in ("seed", "budget", "evaluations"):
        value = row[column]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ResultsFormatError(f"{where}: {column} = {value!r:.40}; expected a non-negative integer")
    if row["evaluations"] > row["budget"]:
        raise ResultsFormatError(f"{where}: evaluations = {row['evaluations']} exceeds the budget {row['budget']}")
    if row["runtime"] not in RUNTIMES:
        raise ResultsFormatError(f"{where}: runtime = {row['runtime']!r:.40}; expected one of {', '.join(RUNTIMES)}")
    if not isinstance(row["ok"], bool):
        raise ResultsFormatError(f"{where}: ok = {row['ok']!r:.40}; expected true or false")
    if row["ok"] and not placement:
        raise ResultsFormatError(f"{where}: ok is true but the row has no placement to replay")
    return row


def read_rows(path: str | os.PathLike, *, must_exist: bool = False) -> list[dict[str, Any]]:
    """Every row of a results file, checked; a missing file has no rows (an error with ``must_exist``,
    which also refuses a file without rows). A file that is not UTF-8 text is an error naming it."""
    path = Path(path)
    if not path.exists():
        if must_exist:
            raise ResultsFormatError(f"{path}: no such results file")
        return []
    try:
        rows = _parse_rows(path)
    except UnicodeDecodeError:
        raise ResultsFormatError(f"{path}: not a results file (not UTF-8 text; one JSON object per line)") from None
    if must_exist and not rows:
        raise ResultsFormatError(f"{path}: the results file has no rows")
    return rows


def _parse_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                if not line.endswith("\n") and line.lstrip().startswith("{"):
                    continue  # the last line of a run killed mid-write: ignore it, keep the rest
                raise ResultsFormatError(f"{path}:{number}: not JSON ({error})") from None
            rows.append(check_row(row, f"{path}:{number}"))
    return rows


def append_row(path: str | os.PathLike, row: dict[str, Any]) -> None:
    """Append one row and flush it to disk."""
    check_row(row, "new row")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def drop_torn_tail(path: str | os.PathLike) -> bool:
    """Cut a last line without a newline (a row of a run killed mid-write) so appends start clean; True if
    cut. A last line that is not the start of a row is left alone (read the file with ``read_rows`` first:
    it names what is wrong with a file that is not a results file)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return False
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return False
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
    except ValueError:
        if not data[start:].lstrip().startswith(b"{"):
            return False
        with open(path, "r+b") as handle:
            handle.truncate(start)
        return True
    with open(path, "ab") as handle:  # a complete row that only lacks its newline
        handle.write(b"\n")
    return False


def finished_keys(rows: Iterable[dict[str, Any]]) -> set[tuple]:
    """Keys of the rows a resumed run skips: all but those whose measuring machinery failed
    (``failure="infrastructure"``), which a rerun does again."""
    return {row_key(row) for row in rows if row["failure"] != INFRASTRUCTURE}


@contextlib.contextmanager
def results_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the advisory lock of results file ``path`` (``<path>.lock``, with the owner's pid) while a run
    appends to it; a second run on the same file fails at once with ResultsBusyError instead of
    duplicating rows. The lock goes with the process, however it ends."""
    lock_path = Path(f"{os.fspath(path)}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            raise ResultsBusyError(f"{path}: another run (pid {owner}) is writing this results file; wait for it "
                                   "or write to another file") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
