"""A task's graph: a benchmark name, or a graph file (a saved OpGraph, a TF graph, a Keras model) and its digest.

The runner and ``validate`` both load a task's graph through :func:`load_task_graph`, so a row is replayed on the
graph it was made on. A task names its graph in ``Task.benchmark``: a benchmark name (``pe.load_benchmark``), or
the path of a file whose suffix is one of :data:`GRAPH_FILES`; a TF or Keras file may need import options
(``Task.graph_options``, recorded in a row's ``graph_options``). The graph of a file carries the digest of the
file's content (:func:`graph_file_digest`), which every row records (``versions["graph"]``), so that ``validate``
reports a row as stale instead of replaying it on a file that has changed since.
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ..benchmarks import load_benchmark
from ..cluster.checks import bad_argument, check_number
from ..errors import ArgumentError, GraphFormatError, GraphImportError
from ..opgraph import OpGraph

# The graph files a task may name, by suffix: what the file holds, and the import options it takes (the first of
# which a Keras file needs). TF files are read by pe.from_tf; a Keras model file is loaded with keras (safe mode,
# not compiled) and its training step traced by pe.from_tf for an input of ``input_shape``.
GRAPH_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    ".npz": ("a saved OpGraph as OpGraph.save writes it, grouped as it was saved", ()),
    ".pb": ("a binary GraphDef", ("fetches", "unknown_dim")),
    ".pbtxt": ("a text GraphDef", ("fetches", "unknown_dim")),
    ".meta": ("a MetaGraphDef", ("fetches", "unknown_dim")),
    ".keras": ("a Keras 3 model file (model.save)", ("input_shape", "input_dtype")),
}
REQUIRED_OPTIONS = {".keras": ("input_shape",)}
INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64")
DIGEST_KEY = "file_digest"  # the key of a graph file's digest in OpGraph.meta
OPTION_RULES = {
    "fetches": "a non-empty list of op names (default: the graph's train_op collection, else its update sinks)",
    "unknown_dim": "an integer >= 1, the size assumed for every unknown dimension",
    "input_shape": "a non-empty list of integers >= 1, the model input's shape with the batch first",
    "input_dtype": f"one of {', '.join(INPUT_DTYPES)} (default float32)",
}


def is_graph_file(benchmark: Any) -> bool:
    """Whether a task's ``benchmark`` names a graph file (a suffix of :data:`GRAPH_FILES`) rather than a benchmark."""
    return isinstance(benchmark, str) and PurePath(benchmark).suffix in GRAPH_FILES


def accepted_graph_files() -> str:
    """The graph files a task may name, in words, for error messages."""
    return "; ".join(f"{suffix} ({what})" for suffix, (what, _) in GRAPH_FILES.items())


def check_graph_options(benchmark: str, options: Any) -> dict[str, Any]:
    """``options`` as the import options of graph ``benchmark`` (a benchmark name takes none); ArgumentError naming
    the option, its value and what is accepted."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise bad_argument("graph_options", options, "a mapping of import option to value")
    checked = {key: check_graph_option(benchmark, key, value) for key, value in options.items()}
    if is_graph_file(benchmark):
        suffix = PurePath(benchmark).suffix
        missing = [key for key in REQUIRED_OPTIONS.get(suffix, ()) if key not in checked]
        if missing:
            raise ArgumentError(f"graph {benchmark!r:.200}: a {suffix} file needs the import option {missing[0]} "
                                f"({OPTION_RULES[missing[0]]})")
    return checked


def check_graph_option(benchmark: str, key: Any, value: Any) -> Any:
    """The value of import option ``key`` of graph ``benchmark`` as JSON holds it; ArgumentError naming the option,
    its value and its rule, or the options graph ``benchmark`` takes."""
    if not is_graph_file(benchmark):
        raise ArgumentError(f"graph option {key!r:.100}: import options are for a TF or Keras graph file; "
                            f"{benchmark!r:.200} is a benchmark name")
    suffix = PurePath(benchmark).suffix
    accepted = GRAPH_FILES[suffix][1]
    if key not in accepted:
        raise ArgumentError(f"graph option {key!r:.100} for {benchmark!r:.200}: a {suffix} file takes "
                            + (", ".join(accepted) if accepted else "no import options"))
    rule = OPTION_RULES[key]
    if key == "unknown_dim":
        return check_number(value, key, 1, integer=True, error=bad_argument, rule=rule)
    if key == "input_dtype":
        if not isinstance(value, str) or value not in INPUT_DTYPES:
            raise bad_argument(key, value, rule)
        return value
    if not isinstance(value, (list, tuple)) or not value:
        raise bad_argument(key, value, rule)
    if key == "fetches":
        if not all(isinstance(name, str) and name for name in value):
            raise bad_argument(key, value, rule)
        return list(value)
    try:
        return [check_number(size, key, 1, integer=True, error=bad_argument, rule=rule) for size in value]
    except ArgumentError:
        raise bad_argument(key, value, rule) from None


def file_digest(path: str | Path) -> str:
    """A short fingerprint of a file's content (as ``Cluster.digest`` is of a cluster's definition)."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def graph_file_digest(graph: OpGraph) -> str | None:
    """The digest of the file ``graph`` was loaded from by :func:`load_task_graph` (None for a benchmark)."""
    digest = graph.meta.get(DIGEST_KEY)
    return digest if isinstance(digest, str) else None


def load_task_graph(benchmark: str, graph_options: Mapping[str, Any] | None = None) -> OpGraph:
    """The graph of a task: ``pe.load_benchmark(benchmark)`` for a benchmark name; for a graph file
    (:data:`GRAPH_FILES`) the graph it holds, imported with ``graph_options``, carrying the file's digest
    (:func:`graph_file_digest`). A missing or unreadable file is a GraphFormatError or GraphImportError naming it."""
    options = check_graph_options(benchmark, graph_options)
    if not is_graph_file(benchmark):
        return load_benchmark(benchmark)
    path = Path(benchmark)
    if not path.is_file():
        raise GraphFormatError(f"{path}: no such graph file" + (" (a folder)" if path.is_dir() else "")
                               + f"; a task's graph file is one of: {accepted_graph_files()}")
    digest = file_digest(path)
    if path.suffix == ".npz":
        graph = OpGraph.load(path)
    elif path.suffix == ".keras":
        graph = _keras_graph(path, options)
    else:
        from ..tf_import import from_tf

        graph = from_tf(path, fetches=options.get("fetches"), unknown_dim=options.get("unknown_dim"))
    return dataclasses.replace(graph, meta={**graph.meta, DIGEST_KEY: digest})


def _keras_graph(path: Path, options: dict[str, Any]) -> OpGraph:
    """The training step of the Keras model saved in ``path`` for an input of ``input_shape``."""
    import keras
    import tensorflow as tf

    from ..tf_import import from_tf

    try:  # safe mode: a file that would run its own code (a Lambda layer) is refused
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except Exception as error:  # noqa: BLE001 - keras raises ValueError, TypeError, zip and IO errors by case
        raise GraphImportError(f"{path}: not a Keras model file keras can load safely ({type(error).__name__}: "
                               f"{str(error)[:300]})") from None
    spec = tf.TensorSpec(options["input_shape"], options.get("input_dtype", "float32"))
    return from_tf(model, input_spec=spec)
