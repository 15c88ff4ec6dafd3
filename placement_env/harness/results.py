"""The results file: one JSON object per line, appended row by row, so an interrupted run loses nothing.

Every command reads a results file through :func:`read_results`, which checks each row (types, ranges,
one row per key) and names the file and line of whatever it refuses. A row names its method as it was given
(``method``: a built-in name, a preset or ``module:callable``) and the arguments given with it (``method_args``,
a JSON object; rows written before methods took arguments have none, which is the same as ``{}``); the two make
the method's label, ``name@key=value,...`` (:func:`method_label`). A run resumes through
:class:`ResultsWriter`, the only writer, which refuses a second row for a finished key.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import reprlib
import stat
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO, Iterator, NamedTuple

import numpy as np

from ..errors import ArgumentError, MethodArgumentError, ResultsBusyError, ResultsFormatError
from ..cluster import Cluster
from ..evaluation import RUNTIMES
from ..output_paths import open_output_file
from ..opgraph import OpGraph
from ..placement import INFRASTRUCTURE
from ..problem import MethodSpec
from ..runtime.simulated import SIMULATOR_VERSION
from .task_graph import check_graph_option, graph_file_digest

COLUMNS = ("suite", "task", "benchmark", "cluster", "runtime", "method", "seed", "budget", "placement",
           "runtime_s", "ok", "failure", "message", "evaluations", "wall_s", "lower_bound_s", "versions")
# Columns a row may lack (rows written before they were recorded): the best-so-far record and the method's arguments;
# the import options of a task's TF or Keras graph file, which only its rows have; and, for a measured row, the
# simulated step time of its placement, the measured step time of its task's anchor placement in the same run and
# the machine it was measured on (host.host_description).
OPTIONAL_COLUMNS = ("anytime", "method_args", "graph_options", "simulated_s", "method_info", "anchor_s", "host")
# A measured row's anchor placement: every group on this device (the first worker of a local:N cluster).
ANCHOR_DEVICE = 0
# The failure of a row whose method could not run as configured (a MethodConfigError): like an infrastructure
# failure, it says nothing about the method on the task, so it is not finished work and a rerun does it again.
CONFIGURATION = "configuration"
UNFINISHED = (INFRASTRUCTURE, CONFIGURATION)
MAX_FILE_BYTES = 2**30  # a results file is read up to this size
MAX_LINE_BYTES = 64 * 2**20  # and each of its lines up to this length
MAX_SECONDS = 1e6  # the longest step time (and lower bound) a row may claim: past it, a number is not a result
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # control bytes, which no JSON text holds raw
_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlist = 8


def anchor_placement(n_groups: int) -> np.ndarray:
    """The anchor placement of a graph of ``n_groups`` groups: every group on ``ANCHOR_DEVICE``."""
    return np.full(n_groups, ANCHOR_DEVICE, np.int64)


def show(value: Any) -> str:
    """``value`` as a short repr for an error message, however large it is."""
    return _SHOW.repr(value)


def expected_number(value: Any, *, integer: bool = False, minimum: float = 0, above: bool = False,
                    maximum: float | None = None) -> str:
    """"" if ``value`` is a number (an int, not a bool, when ``integer``; else finite) at least ``minimum``
    (more than it, when ``above``) and at most ``maximum``; else what is expected, as "expected ..."."""
    if integer:
        wanted = "a non-negative integer" if minimum == 0 and not above else \
            f"an integer {'>' if above else '>='} {minimum:g}"
        number_ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        wanted = f"a finite number {'>' if above else '>='} {minimum:g}" + \
            (f" and <= {maximum:g}" if maximum is not None else "")
        number_ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            number_ok = number_ok and math.isfinite(value)
        except OverflowError:  # an int too large for a float
            number_ok = False
    if not number_ok or value < minimum or (above and value == minimum) or (maximum is not None and value > maximum):
        return f"expected {wanted}"
    return ""


def versions(cluster: Cluster | None = None, graph: OpGraph | None = None) -> dict[str, str]:
    """Versions of what produced a row: packages (read from package metadata; TF is not imported),
    the simulator's model version, given the row's ``cluster`` the digest of its definition and, given a
    ``graph`` loaded from a graph file (``task_graph.load_task_graph``), the digest of the file's content."""
    found = {"simulator": str(SIMULATOR_VERSION)}
    if cluster is not None:
        found["cluster"] = cluster.digest
    digest = None if graph is None else graph_file_digest(graph)
    if digest is not None:
        found["graph"] = digest
    for package in ("placement_env", "tensorflow-cpu", "tensorflow", "numpy", "numba", "gymnasium"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def method_spec(row: dict[str, Any]) -> MethodSpec:
    """The method of a checked row with its arguments (none for a row from before they were recorded)."""
    return MethodSpec(row["method"], row.get("method_args") or {})


def method_label(row: dict[str, Any]) -> str:
    """The label of a checked row's method: its name, and its arguments as ``name@key=value,...`` (keys sorted),
    so that two parameterisations of a method are two methods in tables and keys."""
    return str(method_spec(row))


def row_key(row: dict[str, Any]) -> tuple:
    """What makes a row unique in a results file: (suite, task, method label, seed, budget), so one file can
    hold a method at several budgets and with several arguments."""
    return (row["suite"], row["task"], method_label(row), row["seed"], row["budget"])


def finished(row: dict[str, Any]) -> bool:
    """Whether ``row`` is finished work: all rows but those whose measuring machinery failed or whose method
    could not run as configured (``UNFINISHED``), which a rerun does again."""
    return row["failure"] not in UNFINISHED


def _describe(key: tuple) -> str:
    suite, task, method, seed, budget = key
    return f"suite {show(suite)}, task {show(task)}, method {show(method)}, seed {seed}, budget {budget}"


def _check_text(row: dict[str, Any], column: str, where: str, *, empty: bool = True) -> None:
    value = row[column]
    if not isinstance(value, str) or (not empty and not value):
        raise ResultsFormatError(f"{where}: {column} = {show(value)}; expected a {'' if empty else 'non-empty '}string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ResultsFormatError(f"{where}: {column} = {show(value)} holds a lone surrogate; expected Unicode "
                                 "text") from None


def _check_number(value: Any, column: str, where: str, **limits: Any) -> None:
    expected = expected_number(value, **limits)
    if expected:
        raise ResultsFormatError(f"{where}: {column} = {show(value)}; {expected}")


def _check_anytime(trace: Any, where: str) -> None:
    """An ``anytime`` record: a list of [evaluations, best runtime s, wall s] after each improvement."""
    if not isinstance(trace, list):
        raise ResultsFormatError(f"{where}: anytime = {show(trace)}; expected a list of [evaluations, runtime s, "
                                 "wall s]")
    for k, entry in enumerate(trace):
        if not isinstance(entry, list) or len(entry) != 3:
            raise ResultsFormatError(f"{where}: anytime[{k}] = {show(entry)}; expected [evaluations, runtime s, "
                                     "wall s]")
        _check_number(entry[0], f"anytime[{k}][0] (evaluations)", where, integer=True)
        _check_number(entry[1], f"anytime[{k}][1] (runtime s)", where, above=True, maximum=MAX_SECONDS)
        _check_number(entry[2], f"anytime[{k}][2] (wall s)", where)


def check_row(row: Any, where: str) -> dict[str, Any]:
    """``row`` if it is a valid results row; else a ResultsFormatError that starts with ``where`` and names the
    column, its value and what is accepted."""
    if not isinstance(row, dict):
        raise ResultsFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ResultsFormatError(f"{where}: missing column(s) {', '.join(missing)}; a row has {', '.join(COLUMNS)} "
                                 f"(and may have {', '.join(OPTIONAL_COLUMNS)})")
    for column in ("suite", "task", "benchmark", "method"):
        _check_text(row, column, where, empty=False)
    for column in ("failure", "message"):
        _check_text(row, column, where)
    if not isinstance(row["cluster"], dict):
        _check_text(row, "cluster", where, empty=False)  # a preset name, local:N, a JSON path, or the JSON itself
    if row["runtime"] not in RUNTIMES:
        raise ResultsFormatError(f"{where}: runtime = {show(row['runtime'])}; expected one of {', '.join(RUNTIMES)}")
    placement = row["placement"]
    if not isinstance(placement, list) or any(expected_number(d, integer=True) for d in placement):
        raise ResultsFormatError(f"{where}: placement = {show(placement)}; expected a list of device indices "
                                 "(non-negative integers)")
    for column in ("seed", "budget", "evaluations"):
        _check_number(row[column], column, where, integer=True)
    if row["evaluations"] > row["budget"]:
        raise ResultsFormatError(f"{where}: evaluations = {row['evaluations']} exceeds the budget {row['budget']}")
    if not isinstance(row["ok"], bool):
        raise ResultsFormatError(f"{where}: ok = {show(row['ok'])}; expected true or false")
    runtime_s = row["runtime_s"]
    if row["ok"]:
        if not placement:
            raise ResultsFormatError(f"{where}: ok is true but the row has no placement to replay")
        _check_number(runtime_s, "runtime_s", where, above=True, maximum=MAX_SECONDS)
    elif runtime_s is not None and (isinstance(runtime_s, bool) or not isinstance(runtime_s, (int, float))
                                    or runtime_s < 0):
        raise ResultsFormatError(f"{where}: runtime_s = {show(runtime_s)}; a row with ok false has null, NaN or a "
                                 "number >= 0")
    _check_number(row["lower_bound_s"], "lower_bound_s", where, maximum=MAX_SECONDS)
    _check_number(row["wall_s"], "wall_s", where)
    if not isinstance(row["versions"], dict):
        raise ResultsFormatError(f"{where}: versions = {show(row['versions'])}; expected a JSON object")
    if "anytime" in row:
        _check_anytime(row["anytime"], where)
    if "graph_options" in row:
        _check_graph_options(row, where)
    if row.get("simulated_s") is not None:
        _check_number(row["simulated_s"], "simulated_s", where, above=True, maximum=MAX_SECONDS)
    if row.get("anchor_s") is not None:
        _check_number(row["anchor_s"], "anchor_s", where, above=True, maximum=MAX_SECONDS)
    if "method_info" in row:
        _check_method_info(row["method_info"], where)
    if "host" in row and not (isinstance(row["host"], dict) and all(
            isinstance(key, str) and isinstance(value, str) for key, value in row["host"].items())):
        raise ResultsFormatError(f"{where}: host = {show(row['host'])}; expected a JSON object of names to strings "
                                 '(e.g. {"cpu": ..., "cpus": ..., "vector": ...})')
    _check_method(row, where)
    return row


def _check_method_info(info: Any, where: str) -> None:
    """A row's ``method_info`` (what the method recorded, ``Problem.record``): a JSON object of numbers, strings,
    booleans or nulls."""
    if not isinstance(info, dict) or not all(
            isinstance(key, str) and (value is None or isinstance(value, (bool, str, int, float)))
            for key, value in info.items()):
        raise ResultsFormatError(f"{where}: method_info = {show(info)}; expected a JSON object of names to numbers, "
                                 "strings, booleans or nulls")


def _check_graph_options(row: dict[str, Any], where: str) -> None:
    """A row's ``graph_options``: a JSON object of import options its graph file takes, each value in range
    (``task_graph.check_graph_option``; one the file needs but the row lacks makes the row's graph unloadable, which
    ``validate`` reports as skipped)."""
    options = row["graph_options"]
    if not isinstance(options, dict):
        raise ResultsFormatError(f"{where}: graph_options = {show(options)}; expected a JSON object of import option "
                                 "to value")
    for key, value in options.items():
        try:
            check_graph_option(row["benchmark"], key, value)
        except ArgumentError as error:
            raise ResultsFormatError(f"{where}: graph_options = {show(options)}: {error}") from None


def _check_method(row: dict[str, Any], where: str) -> None:
    """The method's name has no '@' and its arguments (``method_args``, if the row has them) are a JSON object of
    identifiers to JSON values with finite numbers, as :class:`MethodSpec` takes them."""
    args = row.get("method_args", {})
    if not isinstance(args, dict):
        raise ResultsFormatError(f"{where}: method_args = {show(args)}; expected a JSON object of argument name to "
                                 "value")
    try:
        MethodSpec(row["method"], args)
    except MethodArgumentError as error:
        raise ResultsFormatError(f"{where}: method {show(row['method'])}, method_args {show(args)}: {error}") from None


class TornTail(NamedTuple):
    """A last line without a newline that is not a complete row: the row of a run killed mid-write."""

    line: int
    offset: int  # where the line starts, in bytes


class Results(NamedTuple):
    """What :func:`read_results` read: the rows, the line of each, and a torn last line (when allowed)."""

    rows: list[dict[str, Any]]
    lines: list[int]
    torn_tail: TornTail | None


def _lines(handle: BinaryIO, path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset, bytes) of each line of ``handle``, within ``MAX_LINE_BYTES`` and ``MAX_FILE_BYTES``."""
    info = os.fstat(handle.fileno())
    if stat.S_ISREG(info.st_mode) and info.st_size > MAX_FILE_BYTES:
        raise ResultsFormatError(f"{path}: {info.st_size:,} bytes; a results file is read up to "
                                 f"{MAX_FILE_BYTES:,} bytes (split it)")
    offset, number = 0, 0
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise ResultsFormatError(f"{path}:{number}: a line longer than {MAX_LINE_BYTES:,} bytes; a results row is "
                                     "shorter (is this a results file?)")
        if offset + len(line) > MAX_FILE_BYTES:
            raise ResultsFormatError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; a results file is read up to "
                                     f"{MAX_FILE_BYTES:,} bytes (split it)")
        yield number, offset, line
        offset += len(line)


def _parse(line: bytes, where: str) -> Any:
    """The JSON value on ``line``; a ResultsFormatError starting with ``where`` if it is none."""
    try:
        text = None if _BINARY.search(line) else line.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        raise ResultsFormatError(f"{where}: not a results file (binary, not UTF-8 text with one JSON object per "
                                 "line)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, an int of too many digits, deep nesting
        raise ResultsFormatError(f"{where}: not JSON ({str(error)[:200]}); a results file holds one JSON object "
                                 "per line") from None


def read_results(path: str | os.PathLike, *, must_exist: bool = False, allow_torn_tail: bool = False) -> Results:
    """Every row of results file ``path``, each checked (:func:`check_row`), read as a stream within
    ``MAX_FILE_BYTES`` and ``MAX_LINE_BYTES``; every problem is a ResultsFormatError naming the file and line.

    A missing file has no rows (an error with ``must_exist``, which also refuses a file without rows). Blank
    lines are passed over. A second row for a key (:func:`row_key`) that already has a finished row is an error;
    a row that follows an unfinished one of its key (``UNFINISHED``: the rerun of it) takes its place. A last line
    without a newline that starts a JSON object but does not parse (a run killed mid-write) is an error unless
    ``allow_torn_tail``, which returns it as ``torn_tail`` instead, for the writer to cut (:class:`ResultsWriter`).
    """
    path = Path(path)
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        if must_exist:
            raise ResultsFormatError(f"{path}: no such results file") from None
        return Results([], [], None)
    except IsADirectoryError:
        raise ResultsFormatError(f"{path}: a folder, not a results file") from None
    current: dict[tuple, tuple[int, dict[str, Any]]] = {}
    torn = None
    with handle:
        for number, offset, line in _lines(handle, path):
            where = f"{path}:{number}"
            if not line.strip():
                continue
            try:
                value = _parse(line, where)
            except ResultsFormatError:
                if line.endswith(b"\n") or not line.lstrip().startswith(b"{"):
                    raise
                if not allow_torn_tail:
                    raise ResultsFormatError(
                        f"{where}: the last line is cut short (no newline, not complete JSON): the row of a run "
                        "killed mid-write? Rerun the run on this file (it cuts the line and does the row again) "
                        "or delete the line") from None
                torn = TornTail(number, offset)
                continue
            row = check_row(value, where)
            key = row_key(row)
            if key in current:
                first, earlier = current.pop(key)
                if finished(earlier):
                    raise ResultsFormatError(f"{where}: a second row for {_describe(key)} (the first is on line "
                                             f"{first}); a results file holds one row per suite, task, method, seed "
                                             "and budget")
            current[key] = (number, row)
    if must_exist and not current:
        raise ResultsFormatError(f"{path}: the results file has no rows")
    return Results([row for _, row in current.values()], [number for number, _ in current.values()], torn)


def read_rows(path: str | os.PathLike, *, must_exist: bool = False) -> list[dict[str, Any]]:
    """The rows of :func:`read_results` (a torn last line is an error)."""
    return read_results(path, must_exist=must_exist).rows


@contextlib.contextmanager
def results_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold the advisory lock of results file ``path`` (``<path>.lock``, with the owner's pid) while a run
    appends to it; a second run on the same file fails at once with ResultsBusyError instead of
    duplicating rows. The lock goes with the process, however it ends."""
    with open_output_file(f"{os.fspath(path)}.lock", append=True) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().decode("utf-8", "replace").strip() or "?"
            raise ResultsBusyError(f"{path}: another run (pid {owner[:20]}) is writing this results file; wait for "
                                   "it or write to another file") from None
        handle.truncate(0)
        handle.write(str(os.getpid()).encode())
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ResultsWriter:
    """Appends rows to results file ``path`` under its lock (:func:`results_lock`); ``finished`` holds the keys
    of the rows already there that a resumed run skips (all but ``UNFINISHED`` ones).

    The file is read first (:func:`read_results`), so a file that is not a results file is refused as it is. A
    torn last line (a run killed mid-write) is cut, with a warning naming the file and line, and its row is done
    again; a last row without its newline gets one. A row whose key is already finished is refused. The file is
    written through :func:`~placement_env.output_paths.open_output_file` (never through a symbolic link)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._handle: BinaryIO | None = None
        self._lock: contextlib.AbstractContextManager | None = results_lock(self.path)
        self._lock.__enter__()
        try:
            if self.path.exists() or self.path.is_symlink():
                self._handle = open_output_file(self.path, append=True)  # a link is refused before it is read
            found = read_results(self.path, allow_torn_tail=True)
            self.finished = {row_key(row): f"line {line}" for row, line in zip(found.rows, found.lines)
                             if finished(row)}
            if self._handle is not None:
                if found.torn_tail is not None:
                    self._handle.truncate(found.torn_tail.offset)
                    warnings.warn(f"{self.path}:{found.torn_tail.line}: cut a last line without a newline that is "
                                  "not a complete row (a run killed mid-write); its row is done again")
                self._end_line(self._handle)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _end_line(handle: BinaryIO) -> None:
        """A newline after a last row that lacks one, so that the next row starts a line of its own."""
        if os.fstat(handle.fileno()).st_size == 0:
            return
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")

    def append(self, row: dict[str, Any]) -> None:
        """Check ``row``, refuse it if its key is finished in the file, append it and flush it to disk."""
        check_row(row, f"new row for {self.path}")
        key = row_key(row)
        if key in self.finished:
            raise ResultsFormatError(f"{self.path}: a row for {_describe(key)} is already there "
                                     f"({self.finished[key]}); a results file holds one row per key")
        if self._handle is None:
            self._handle = open_output_file(self.path, append=True)
        handle = self._handle
        handle.write((json.dumps(row, sort_keys=True) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
        if finished(row):
            self.finished[key] = "written by this run"

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

