"""Suite files: a suite of one's own tasks, written in TOML or JSON, read by one strict reader.

A suite file gives the suite's ``name`` (default: the file's stem), optional defaults of a run (``methods``,
``budgets``, ``seeds``) and its ``tasks``, each a ``name``, a graph (a ``benchmark`` name or a ``graph`` file: a
saved OpGraph, a TF GraphDef or MetaGraphDef, a Keras model file, with the file's import options), a ``cluster``
(a preset, ``local:N`` or a cluster JSON file), a ``runtime`` and a ``model`` label; paths are relative to the
suite file. The schema, with an example, is in docs/harness.md ("Your own tasks").

Everything is checked when the file is read, before any run: a syntax error, an unknown or missing field, a value
of the wrong type or out of range, a graph or cluster file that does not exist, an unknown benchmark, cluster or
method is a SuiteFileError naming the file, the line, the field and what is accepted. Neither ``tomllib`` nor
``json`` tells where a value is, so the reader scans the text itself for the line of every key and list item
(:func:`toml_lines`, :func:`json_lines`), after the parser has accepted it.
"""
from __future__ import annotations

import bisect
import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path, PurePath
from typing import Any

from ..benchmarks import benchmark_blocks
from ..cluster import load_cluster, preset_names
from ..cluster.checks import show
from ..errors import ArgumentError, PlacementEnvError, SuiteFileError
from ..evaluation import RUNTIMES
from ..problem import method
from .suites import SUITES, Task
from .task_graph import GRAPH_FILES, OPTION_RULES, check_graph_option, check_graph_options

SUITE_FILE_SUFFIXES = (".toml", ".json")
MAX_SUITE_FILE_BYTES = 16 * 2**20  # a suite file lists tasks; past this it is not one
FieldPath = tuple  # a field's path in the parsed file: ("tasks", 2, "cluster")

# The fields of a suite file and of a task, with what each accepts (for messages).
SUITE_FIELDS = {
    "name": "the suite's name, which its rows carry (default: the file's stem)",
    "methods": "a non-empty list of methods, each a name, a preset, 'module:callable' or 'name@key=value,...', "
               "or 'all'",
    "budgets": "a non-empty list of budgets, each an integer >= 0 (runtime evaluations; 0 for zero-shot methods)",
    "seeds": "a non-empty list of seeds, each an integer >= 0",
    "tasks": "a non-empty list of tasks",
}
GRAPH_OPTIONS = tuple(OPTION_RULES)
TASK_FIELDS = {
    "name": "the task's name, unique in the suite",
    "benchmark": "a benchmark name, as pe.load_benchmark takes it",
    "graph": "the path of a graph file: " + "; ".join(f"{suffix}, {what}" for suffix, (what, _) in GRAPH_FILES.items()),
    "cluster": 'a cluster preset name, "local:N" or the path of a cluster .json file',
    "runtime": f"one of {', '.join(RUNTIMES)} (default sim)",
    "model": "a label for reports",
    **OPTION_RULES,
}


@dataclass(frozen=True)
class SuiteFile:
    """A suite file as read: its ``name`` (which rows carry), its ``tasks`` (with absolute paths) and the defaults
    of a run it gives (None where it gives none)."""

    path: Path
    name: str
    tasks: tuple[Task, ...]
    methods: tuple[str, ...] | None = None
    budgets: tuple[int, ...] | None = None
    seeds: tuple[int, ...] | None = None


def is_suite_file(name: Any) -> bool:
    """Whether suite ``name`` is the path of a suite file (it ends in .toml or .json)."""
    return isinstance(name, (str, os.PathLike)) and PurePath(name).suffix.lower() in SUITE_FILE_SUFFIXES


def read_suite_file(path: str | os.PathLike) -> SuiteFile:
    """The suite file at ``path`` (TOML or JSON, by its suffix), every field checked; a SuiteFileError names the
    file, the line and the field of the first problem, and what the field accepts."""
    path = Path(path)
    if not is_suite_file(path):
        raise SuiteFileError(f"{path}: not a suite file by its name; a suite file ends in .toml or .json")
    text = _read_text(path)
    if path.suffix.lower() == ".toml":
        data, lines = _parse_toml(path, text)
    else:
        data, lines = _parse_json(path, text)
    return _Reader(path, lines).suite(data)


def run_settings(suite: str, methods: list[str] | None = None, budgets: list[int] | None = None,
                 seeds: list[int] | None = None) -> dict[str, Any]:
    """``run_suite``'s arguments (but ``results``) for ``suite`` and the methods, budgets and seeds a command line
    gave (None: not given): a suite file gives the rows' name, the tasks and, where not given, its own methods,
    budgets and seeds; the rest default to every built-in method ("all"), ``DEFAULT_BUDGET`` and seed 0."""
    from .runner import DEFAULT_BUDGET

    found = read_suite_file(suite) if is_suite_file(suite) else None
    return {"suite": found.name if found else suite, "tasks": found.tasks if found else None,
            "methods": methods or (found and found.methods) or ["all"],
            "budget": budgets or (found and found.budgets) or [DEFAULT_BUDGET],
            "seeds": seeds or (found and found.seeds) or [0]}


# ---- reading the text ----

def _read_text(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SUITE_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SuiteFileError(f"{path}: no such suite file") from None
    except IsADirectoryError:
        raise SuiteFileError(f"{path}: a folder, not a suite file (.toml or .json)") from None
    except OSError as error:
        raise SuiteFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(data) > MAX_SUITE_FILE_BYTES:
        raise SuiteFileError(f"{path}: more than {MAX_SUITE_FILE_BYTES:,} bytes; a suite file is read up to that size")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise SuiteFileError(f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x}); a suite file is UTF-8 "
                             "TOML or JSON") from None


def _parse_toml(path: Path, text: str) -> tuple[dict[str, Any], dict[FieldPath, int]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"at line (\d+)", str(error))
        line = int(found.group(1)) if found else text.count("\n") + 1
        raise SuiteFileError(f"{path}:{line}: not valid TOML: {error}") from None
    return data, toml_lines(text)


def _parse_json(path: Path, text: str) -> tuple[dict[str, Any], dict[FieldPath, int]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SuiteFileError(f"{path}:{error.lineno}: not valid JSON: {error.msg} (line {error.lineno}, column "
                             f"{error.colno})") from None
    except (ValueError, RecursionError) as error:  # an int of too many digits, deep nesting
        raise SuiteFileError(f"{path}:1: not a suite file ({type(error).__name__}: {str(error)[:200]})") from None
    try:
        lines = json_lines(text)
    except _JsonProblem as problem:
        raise SuiteFileError(f"{path}:{problem.line}: {problem.message}") from None
    if not isinstance(data, dict):
        raise SuiteFileError(f"{path}:1: a JSON {type(data).__name__} at the top; a suite file is a JSON object with "
                             f"the fields {', '.join(SUITE_FIELDS)}")
    return data, lines


class _Lines:
    """Line numbers of positions in a text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.lines: dict[FieldPath, int] = {}
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]

    def line(self, pos: int | None = None) -> int:
        return bisect.bisect_left(self._newlines, self.pos if pos is None else pos) + 1

    def mark(self, path: FieldPath, pos: int | None = None) -> None:
        self.lines.setdefault(path, self.line(pos))


_TOML_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_TOML_SCALAR_END = re.compile(r"[,\]}#\r\n]")


class _TomlScanner(_Lines):
    """The line of every key, table and array item of a TOML text that ``tomllib`` accepted."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.arrays: dict[FieldPath, int] = {}  # array-of-tables path -> tables seen so far

    def scan(self) -> dict[FieldPath, int]:
        text, prefix = self.text, ()
        while True:
            self.skip(newlines=True)
            if self.pos >= len(text):
                return self.lines
            start = self.pos
            if text.startswith("[[", start):
                self.pos += 2
                parts = self.key()
                self.pos = text.index("]]", self.pos) + 2
                table = self.resolve(parts[:-1]) + parts[-1:]
                index = self.arrays.get(table, 0)
                self.arrays[table] = index + 1
                self.mark(table, start)
                prefix = table + (index,)
                self.mark(prefix, start)
            elif text[start] == "[":
                self.pos += 1
                prefix = self.resolve(self.key())
                self.pos = text.index("]", self.pos) + 1
                self.mark(prefix, start)
            else:
                self.key_value(prefix)

    def resolve(self, parts: FieldPath) -> FieldPath:
        """The path of table header ``parts``, each array of tables on it standing for its last table."""
        path: FieldPath = ()
        for part in parts:
            path += (part,)
            if path in self.arrays:
                path += (self.arrays[path] - 1,)
        return path

    def skip(self, newlines: bool = False) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                return

    def key(self) -> FieldPath:
        parts = []
        while True:
            self.skip()
            c = self.text[self.pos]
            if c == '"':
                end = self.string_end(self.pos)
                parts.append(tomllib.loads(f"k = {self.text[self.pos:end]}")["k"])
                self.pos = end
            elif c == "'":
                end = self.text.index("'", self.pos + 1)
                parts.append(self.text[self.pos + 1:end])
                self.pos = end + 1
            else:
                found = _TOML_BARE_KEY.match(self.text, self.pos)
                parts.append(found.group())
                self.pos = found.end()
            self.skip()
            if not self.text.startswith(".", self.pos):
                return tuple(parts)
            self.pos += 1

    def key_value(self, prefix: FieldPath) -> None:
        start = self.pos
        parts = self.key()
        for k in range(1, len(parts) + 1):
            self.mark(prefix + parts[:k], start)
        self.skip()
        self.pos += 1  # '='
        self.value(prefix + parts)

    def string_end(self, pos: int) -> int:
        """Where the basic string starting at ``pos`` ends (after its closing quote)."""
        i = pos + 1
        while self.text[i] != '"':
            i += 2 if self.text[i] == "\\" else 1
        return i + 1

    def multiline_end(self, pos: int, quote: str) -> int:
        """Where the multi-line string starting at ``pos`` ends (up to two quotes may close its content)."""
        text, i = self.text, pos + 3
        while not text.startswith(quote * 3, i):
            i += 2 if quote == '"' and text[i] == "\\" else 1
        end = i + 3
        while end < i + 5 and end < len(text) and text[end] == quote:
            end += 1
        return end

    def value(self, path: FieldPath) -> None:
        self.skip()
        text, pos = self.text, self.pos
        if text.startswith('"""', pos) or text.startswith("'''", pos):
            self.pos = self.multiline_end(pos, text[pos])
        elif text[pos] == '"':
            self.pos = self.string_end(pos)
        elif text[pos] == "'":
            self.pos = text.index("'", pos + 1) + 1
        elif text[pos] == "[":
            self.pos += 1
            index = 0
            while True:
                self.skip(newlines=True)
                if text[self.pos] == "]":
                    self.pos += 1
                    return
                self.mark(path + (index,))
                self.value(path + (index,))
                index += 1
                self.skip(newlines=True)
                if text[self.pos] == ",":
                    self.pos += 1
        elif text[pos] == "{":
            self.pos += 1
            while True:
                self.skip(newlines=True)
                if text[self.pos] == "}":
                    self.pos += 1
                    return
                self.key_value(path)
                self.skip(newlines=True)
                if text[self.pos] == ",":
                    self.pos += 1
        else:
            end = _TOML_SCALAR_END.search(text, pos)
            self.pos = len(text) if end is None else end.start()
            if self.pos == pos:  # no value here: TOML this scanner does not follow (it stops rather than loop)
                raise ValueError(f"no value at offset {pos}")


def toml_lines(text: str) -> dict[FieldPath, int]:
    """The line (1-based) of every key, table and array item of TOML ``text`` (valid TOML: ``tomllib`` accepted
    it), by its path in the parsed document, e.g. ``("tasks", 1, "cluster")``."""
    scanner = _TomlScanner(text)
    try:
        return scanner.scan()
    except (IndexError, ValueError, AttributeError, RecursionError, tomllib.TOMLDecodeError):
        return scanner.lines  # TOML this scanner does not follow: the lines found so far (messages fall back)


class _JsonProblem(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


_JSON_SPACE = re.compile(r"[ \t\r\n]*")
_JSON_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|-?Infinity")


class _JsonScanner(_Lines):
    """The line of every key and array item of a JSON text that ``json`` accepted; a key given twice in an object,
    and NaN or Infinity (which ``json`` accepts), are a _JsonProblem."""

    def skip(self) -> None:
        self.pos = _JSON_SPACE.match(self.text, self.pos).end()

    def value(self, path: FieldPath) -> None:
        self.skip()
        text, c = self.text, self.text[self.pos]
        if c in "{[":
            close = "}" if c == "{" else "]"
            self.pos += 1
            self.skip()
            index, first = 0, {}
            while text[self.pos] != close:
                if c == "{":
                    line = self.line()
                    key, self.pos = scanstring(text, self.pos + 1)
                    if key in first:
                        raise _JsonProblem(line, f"{_label(path + (key,))} is given twice in one object (first on "
                                                 f"line {first[key]}); give each field once")
                    first[key] = line
                    item: FieldPath = path + (key,)
                    self.mark(item, self.pos)
                    self.skip()
                    self.pos += 1  # ':'
                else:
                    self.skip()
                    item = path + (index,)
                    self.mark(item)
                    index += 1
                self.value(item)
                self.skip()
                if text[self.pos] == ",":
                    self.pos += 1
                    self.skip()
            self.pos += 1
        elif c == '"':
            _, self.pos = scanstring(text, self.pos + 1)
        else:
            found = _JSON_SCALAR.match(text, self.pos)
            if found.group() in ("NaN", "Infinity", "-Infinity"):
                raise _JsonProblem(self.line(), f"{_label(path)} = {found.group()}: not a number a suite file takes")
            self.pos = found.end()


def json_lines(text: str) -> dict[FieldPath, int]:
    """The line (1-based) of every key and array item of JSON ``text`` (valid JSON: ``json`` accepted it), by its
    path in the parsed document; _JsonProblem for a key given twice in an object, NaN or Infinity."""
    scanner = _JsonScanner(text)
    try:
        scanner.value(())
    except (IndexError, ValueError, AttributeError, RecursionError):
        pass  # JSON this scanner does not follow: the lines found so far (messages fall back)
    return scanner.lines


def _label(path: FieldPath) -> str:
    """A field's path as a label: ``tasks[1].cluster``."""
    label = ""
    for part in path:
        label += f"[{part}]" if isinstance(part, int) else (f".{part}" if label else str(part))
    return label or "the document"


# ---- checking the fields ----

class _Reader:
    """Checks a parsed suite file field by field, each problem a SuiteFileError at the field's line."""

    def __init__(self, path: Path, lines: dict[FieldPath, int]) -> None:
        self.path, self.lines = path, lines
        self.base = Path(os.path.abspath(path)).parent  # relative paths in the file are relative to it
        self.task_names: dict[str, int] = {}  # task name -> line, of the tasks read so far
        self.task_name: dict[int, str] = {}  # task index -> its name, for messages

    def line(self, path: FieldPath) -> int:
        """The line of ``path``, else of the nearest enclosing field that has one (1 at worst)."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return 1

    def fail(self, path: FieldPath, problem: str, *, at: FieldPath | None = None) -> SuiteFileError:
        """The error for field ``path``, at its line (or at the line of ``at``)."""
        where = _label(path)
        if len(path) >= 2 and path[0] == "tasks" and isinstance(path[1], int):
            name = self.task_name.get(path[1])
            where += f" (task {name!r})" if name else ""
        return SuiteFileError(f"{self.path}:{self.line(path if at is None else at)}: {where}: {problem}")

    def unknown_fields(self, table: dict[str, Any], path: FieldPath, accepted: dict[str, str], what: str) -> None:
        for key in table:
            if key not in accepted:
                close = difflib.get_close_matches(str(key), list(accepted), n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                raise self.fail(path + (key,), f"unknown field{hint}; {what} has the fields {', '.join(accepted)}")

    def text(self, table: dict[str, Any], path: FieldPath, key: str, rule: str) -> str:
        value = table[key]
        if not isinstance(value, str) or not value.strip() or value != value.strip() or not value.isprintable():
            raise self.fail(path + (key,), f"{show(value)}; expected a non-empty line of text without surrounding "
                                           f"spaces: {rule}")
        return value

    def numbers(self, data: dict[str, Any], key: str) -> tuple[int, ...]:
        values = self.non_empty_list(data, (), key)
        first: dict[int, int] = {}
        for index, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                what = "runtime evaluations; 0 for zero-shot methods" if key == "budgets" else "a seed"
                raise self.fail((key, index), f"{show(value)}; expected an integer >= 0 ({what})")
            if value in first:
                raise self.fail((key, index), f"{value} is given twice (first as {key}[{first[value]}]); give each "
                                              "once")
            first[value] = index
        return tuple(values)

    def non_empty_list(self, table: dict[str, Any], path: FieldPath, key: str) -> list[Any]:
        value = table[key]
        if not isinstance(value, list) or not value:
            raise self.fail(path + (key,), f"{show(value) if not isinstance(value, dict) else 'a table'}; expected "
                                           f"{SUITE_FIELDS[key] if not path else TASK_FIELDS[key]}")
        return value

    # -- the suite --

    def suite(self, data: dict[str, Any]) -> SuiteFile:
        self.unknown_fields(data, (), SUITE_FIELDS, "a suite file")
        name = self.suite_name(data)
        methods = self.methods(data) if "methods" in data else None
        budgets = self.numbers(data, "budgets") if "budgets" in data else None
        seeds = self.numbers(data, "seeds") if "seeds" in data else None
        if "tasks" not in data:
            raise SuiteFileError(f"{self.path}:1: missing field tasks: {SUITE_FIELDS['tasks']} (a [[tasks]] table "
                                 "each in TOML, a list of objects in JSON)")
        entries = self.non_empty_list(data, (), "tasks")
        self.task_name = {index: entry.get("name") for index, entry in enumerate(entries)
                          if isinstance(entry, dict) and isinstance(entry.get("name"), str)}
        tasks = tuple(self.task(entry, ("tasks", index)) for index, entry in enumerate(entries))
        return SuiteFile(self.path, name, tasks, methods, budgets, seeds)

    def suite_name(self, data: dict[str, Any]) -> str:
        if "name" not in data:
            name = self.path.stem
            if not name:
                raise SuiteFileError(f"{self.path}:1: the file's stem gives no suite name; give a field name")
        else:
            name = self.text(data, (), "name", SUITE_FIELDS["name"])
        from . import placebench

        if name in SUITES or placebench.is_benchmark_suite(name):
            at = ("name",) if "name" in data else ()
            source = "" if "name" in data else " (the file's stem: give the suite a field name)"
            raise self.fail(("name",), f"{show(name)}{source} is a built-in suite's name; expected a name of its "
                                       "own (rows carry the suite's name, so the same name for other tasks would "
                                       "mix their results)", at=at)
        return name

    def methods(self, data: dict[str, Any]) -> tuple[str, ...]:
        values = self.non_empty_list(data, (), "methods")
        first: dict[str, int] = {}
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(("methods", index), f"{show(value)}; expected a method as a string "
                                                    "(name, preset, 'module:callable' or 'name@key=value,...')")
            if value != "all":
                try:
                    method(value)
                except PlacementEnvError as error:  # UnknownMethodError, MethodArgumentError
                    raise self.fail(("methods", index), str(error)) from None
            if value in first:
                raise self.fail(("methods", index), f"{show(value)} is given twice (first as methods[{first[value]}])")
            first[value] = index
        return tuple(values)

    # -- a task --

    def task(self, entry: Any, path: FieldPath) -> Task:
        if not isinstance(entry, dict):
            raise self.fail(path, f"{show(entry)}; expected a task (a table with the fields "
                                  f"{', '.join(TASK_FIELDS)})")
        self.unknown_fields(entry, path, TASK_FIELDS, "a task")
        for key in ("name", "cluster"):
            if key not in entry:
                raise self.fail(path, f"missing field {key}: {TASK_FIELDS[key]}")
        name = self.text(entry, path, "name", TASK_FIELDS["name"])
        if name in self.task_names:
            raise self.fail(path + ("name",), f"{show(name)} is the name of an earlier task too (line "
                                              f"{self.task_names[name]}); each task needs a name of its own")
        self.task_names[name] = self.line(path + ("name",))
        given = [key for key in ("benchmark", "graph") if key in entry]
        if len(given) != 1:
            problem = "no graph" if not given else "both benchmark and graph"
            raise self.fail(path + (given[-1],) if given else path,
                            f"{problem}; give one of benchmark: {TASK_FIELDS['benchmark']}, or graph: "
                            f"{TASK_FIELDS['graph']}")
        benchmark, options = self.benchmark(entry, path) if given == ["benchmark"] else self.graph(entry, path)
        cluster, gpus = self.cluster(entry, path)
        runtime = entry.get("runtime", "sim")
        if runtime not in RUNTIMES:
            raise self.fail(path + ("runtime",), f"{show(runtime)}; expected {TASK_FIELDS['runtime']}")
        model = self.text(entry, path, "model", TASK_FIELDS["model"]) if "model" in entry else ""
        return Task(name, benchmark, cluster, runtime, model=model, gpus=gpus, graph_options=options)

    def benchmark(self, entry: dict[str, Any], path: FieldPath) -> tuple[str, dict[str, Any]]:
        name = self.text(entry, path, "benchmark", TASK_FIELDS["benchmark"])
        if PurePath(name).suffix in GRAPH_FILES:
            raise self.fail(path + ("benchmark",), f"{show(name)} is a graph file; give it as graph = {show(name)}")
        try:
            benchmark_blocks(name)  # resolves the name without building the graph
        except PlacementEnvError as error:
            raise self.fail(path + ("benchmark",), str(error)) from None
        options = [key for key in GRAPH_OPTIONS if key in entry]
        if options:
            raise self.fail(path + (options[0],), "import options are for a graph file (field graph); a benchmark "
                                                  "takes none")
        return name, {}

    def graph(self, entry: dict[str, Any], path: FieldPath) -> tuple[str, dict[str, Any]]:
        given = self.text(entry, path, "graph", TASK_FIELDS["graph"])
        suffix = PurePath(given).suffix
        if suffix not in GRAPH_FILES:
            raise self.fail(path + ("graph",), f"{show(given)}; expected {TASK_FIELDS['graph']}")
        file = self.resolve(given)
        if not os.path.isfile(file):
            what = "a folder, not a file" if os.path.isdir(file) else "no such file"
            raise self.fail(path + ("graph",), f"{show(given)}: {what} ({file}; paths are relative to the suite "
                                               "file)")
        options = {}
        for key in GRAPH_OPTIONS:
            if key in entry:
                try:
                    options[key] = check_graph_option(file, key, entry[key])
                except ArgumentError as error:
                    raise self.fail(path + (key,), str(error)) from None
        try:
            check_graph_options(file, options)
        except ArgumentError as error:
            raise self.fail(path, str(error), at=path + ("graph",)) from None
        return file, options

    def cluster(self, entry: dict[str, Any], path: FieldPath) -> tuple[str, int]:
        given = self.text(entry, path, "cluster", TASK_FIELDS["cluster"])
        presets = preset_names()
        spec = given if given in presets or given.startswith("local:") else self.resolve(given)
        if spec != given and not os.path.exists(spec):
            close = difflib.get_close_matches(given, presets, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise self.fail(path + ("cluster",), f"{show(given)}: no cluster preset of that name{hint} and no file "
                                                 f"{spec}; expected {TASK_FIELDS['cluster']} (presets: "
                                                 f"{', '.join(presets)})")
        try:
            cluster = load_cluster(spec)
        except (PlacementEnvError, OSError) as error:
            raise self.fail(path + ("cluster",), f"{show(given)}: {error}") from None
        return spec, int(sum(device.kind == "GPU" for device in cluster.devices))

    def resolve(self, given: str) -> str:
        """Path ``given`` relative to the suite file, made absolute."""
        return os.path.normpath(os.path.join(self.base, os.path.expanduser(given)))

