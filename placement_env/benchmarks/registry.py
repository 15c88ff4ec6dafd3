"""The benchmark graphs by name, built from code (the builders in this package) and cached on disk.

Names: ``rnnlm``, ``nmt``, ``inception_v3`` (the paper's three models at paper scale),
``transformer``, ``gpt2``, ``bert``, ``resnet50`` (modern models at their published base size),
``vgg16`` and ``vgg16_bn`` (a CNN without branches, without and with batch norm), ``mobilenet_v2`` (a chain of
inverted residual units with identity shortcuts), ``mlp_mixer`` (an all-MLP image classifier), ``dlrm`` (a
recommendation model with 26 embedding tables),
the same with ``-tiny`` (small, for tests), ``rnnlm-deep`` (8 layers over 105 steps: 50,808 ops) and
``nmt-deep`` (GNMT's 8 + 8 layers of 1,024 units over 60 + 60 steps: 67,639 ops), for the simulator at
scale, ``<model>-batch<N>`` (a model at paper scale with batch N instead of its own: the same graph
under more or less memory pressure), ``synthetic:<seed>`` (random layered DAGs), ``random_cnn:<seed>``
(random CNNs), ``random_transformer:<seed>`` (random Transformers) and ``random_rnn:<seed>`` (random LSTM and
GRU language models and seq2seq models), the last three also as ``<family>:<seed>-batch<N>``. Keyword
parameters override the builder's (e.g. ``load_benchmark("nmt", batch=32)``).

The imported, ungrouped graph is cached under ``$PLACEMENT_ENV_CACHE`` (default
``~/.cache/placement_env``), keyed by name, parameters, TF version and builder version; grouping
is recomputed on every load (it is deterministic and takes well under a second). A corrupt
cache entry is rebuilt, never trusted.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import logging
import re
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..cache import cache_dir
from ..errors import ArgumentError, GraphFormatError, UnknownBenchmarkError
from ..grouping import DEFAULT_MAX_GROUPS, group_ops
from ..opgraph import FORMAT_VERSION, OpGraph
from ..quiet_tf import import_tensorflow_quietly, tensorflow_version
from .sizes import BLOCKS, DEEP, PARAMS, SYNTHETIC_PAPER

PAPER_MODELS = ("rnnlm", "nmt", "inception_v3")
MODERN_MODELS = ("transformer", "gpt2", "bert", "resnet50")
EXTRA_MODELS = ("vgg16", "vgg16_bn", "mobilenet_v2", "mlp_mixer", "dlrm")  # beyond the paper's and the modern four:
# VGG-16, a CNN whose layers run in sequence, without and with batch norm; MobileNetV2, a chain of inverted residual
# units; MLP-Mixer, layers of a Transformer encoder's shape that mix the tokens with an MLP instead of attention;
# DLRM, a recommendation model whose embedding tables pass one GPU's memory
BUILDER_VERSION = 2  # bump when a builder changes the graphs it makes, to invalidate caches
_SYNTHETIC = re.compile(r"synthetic:([0-9]+)")
RANDOM_FAMILIES = ("random_cnn", "random_transformer", "random_rnn")  # seeded generators with batch variants
_RANDOM = re.compile(rf"({'|'.join(RANDOM_FAMILIES)}):([0-9]+)(?:-batch([0-9]+))?")
_BATCH = re.compile(r"(\w+)-batch([0-9]+)")
log = logging.getLogger(__name__)


def benchmark_names() -> list[str]:
    """The fixed benchmark names; ``synthetic:<seed>`` accepts any non-negative integer seed."""
    models = (*PAPER_MODELS, *MODERN_MODELS, *EXTRA_MODELS)
    return [*models, *(f"{m}-tiny" for m in models), *(f"{m}-deep" for m in DEEP), "synthetic-tiny",
            *(f"{family}-tiny" for family in RANDOM_FAMILIES)]


def benchmark_blocks(name: str, **params: Any) -> tuple[str, ...]:
    """The name scopes of benchmark ``name``'s blocks in forward order (empty if it declares none).

    ``params`` are the builder parameters ``load_benchmark`` was given, if any: the attention
    models' blocks are their layers, so their number follows ``layers``.
    """
    model, base_params = _resolve(name)
    layout = BLOCKS.get(model)
    return layout(_parameters(name, base_params, params)) if layout else ()


def load_benchmark(name: str, *, max_groups: int = DEFAULT_MAX_GROUPS, use_cache: bool = True,
                   **params: Any) -> OpGraph:
    """The OpGraph of benchmark ``name``, grouped into at most ``max_groups`` groups (``group_ops`` checks it)."""
    if not isinstance(use_cache, (bool, np.bool_)):  # a string such as "no" would read as True
        raise ArgumentError(f"use_cache={use_cache!r:.200}; expected True or False")
    model, base_params = _resolve(name)
    resolved = _parameters(name, base_params, params)
    path = cache_dir() / f"{name.replace(':', '-')}-{_cache_key(name, resolved)}.npz"
    graph = _read_cache(path) if use_cache else None
    if graph is None:
        import_tensorflow_quietly()  # the builders import TF; its start-up notices would land on the user's screen
        graph = _build(name, import_module(f"placement_env.benchmarks.{model}"), resolved)
        if use_cache:
            graph.save(path)
    return group_ops(graph, max_groups=max_groups)


def _resolve(name: str) -> tuple[str, dict[str, Any]]:
    """Model module and base parameters for a benchmark name."""
    if not isinstance(name, str):
        raise UnknownBenchmarkError(f"benchmark must be a name (str), got {type(name).__name__} {name!r}")
    match = _SYNTHETIC.fullmatch(name)
    if match:
        return "synthetic", {**SYNTHETIC_PAPER, "seed": int(match.group(1))}
    match = _RANDOM.fullmatch(name)
    if match and (match.group(3) is None or int(match.group(3)) >= 1):
        family, paper = match.group(1), PARAMS[match.group(1)][0]
        batch = int(match.group(3)) if match.group(3) else paper["batch"]
        return family, {**paper, "seed": int(match.group(2)), "batch": batch}
    model, _, variant = name.partition("-")
    if model in PARAMS and variant in ("", "tiny") and name != "synthetic":
        paper, tiny = PARAMS[model]
        return model, dict(tiny if variant else paper)
    if variant == "deep" and model in DEEP:
        return model, dict(DEEP[model])
    match = _BATCH.fullmatch(name)
    if match and match.group(1) in PARAMS and match.group(1) != "synthetic" and int(match.group(2)) >= 1:
        return match.group(1), {**PARAMS[match.group(1)][0], "batch": int(match.group(2))}
    raise UnknownBenchmarkError(
        f"unknown benchmark {name!r}: {_what_is_wrong(name)}. Names: {', '.join(benchmark_names())}, "
        "<model>-batch<N> (a model above at paper scale with batch N >= 1, e.g. rnnlm-batch32), synthetic:<seed> "
        f"(a seed >= 0), or {', '.join(f'{family}:<seed>' for family in RANDOM_FAMILIES)}, each also with "
        "-batch<N> (e.g. random_cnn:3-batch64)"
    )


def _what_is_wrong(name: str) -> str:
    """Which part of a name that ``_resolve`` refused breaks the grammar of benchmark names."""
    batch = re.fullmatch(r"(.*)-batch(.*)", name)
    if batch:
        base, size = batch.groups()
        if not size.isdecimal() or not size.isascii():
            return f"the batch {size!r} after '-batch' is not a whole number N >= 1"
        if int(size) < 1:
            return f"batch {int(size)} is not >= 1"
        if base.partition(":")[0] not in RANDOM_FAMILIES:
            model = base.partition("-")[0]
            if model not in PARAMS:
                return f"{base!r} is not a model"
            return f"{base!r} has no batch variant; " + _names_of(model)
        name = base
    kind, colon, seed = name.partition(":")
    if colon and kind in ("synthetic", *RANDOM_FAMILIES):
        return f"the seed {seed!r} is not a whole number >= 0"
    model = name.partition("-")[0]
    if model in PARAMS:
        return f"{name!r} is not one of {model}'s names; " + _names_of(model)
    close = difflib.get_close_matches(name, benchmark_names(), n=1)
    return f"{model!r} is not a model" + (f" (did you mean {close[0]!r}?)" if close else "")


def _names_of(model: str) -> str:
    """The benchmark names of ``model``, as a clause of an error message."""
    if model == "synthetic":
        names = ["synthetic-tiny", "synthetic:<seed>"]
    else:
        names = [model, f"{model}-tiny", *([f"{model}-deep"] if model in DEEP else []), f"{model}-batch<N>"]
        names += [f"{model}:<seed>", f"{model}:<seed>-batch<N>"] if model in RANDOM_FAMILIES else []
    return f"{model}'s names are {', '.join(names)}"


def _parameters(name: str, base_params: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over the benchmark's own, or TypeError naming the unknown ones."""
    unknown = sorted(set(params) - set(base_params))
    if unknown:
        raise TypeError(f"benchmark {name!r} has no parameter(s) {unknown}; its parameters are {sorted(base_params)}")
    return {**base_params, **params}


def _cache_key(name: str, params: dict[str, Any]) -> str:
    key = json.dumps({"name": name, "params": params, "tf": tensorflow_version(), "builder": BUILDER_VERSION,
                      "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _read_cache(path: Path) -> OpGraph | None:
    if not path.exists():
        return None
    try:
        return OpGraph.load(path)
    except GraphFormatError as error:
        log.warning("rebuilding %s: the cached graph is unreadable (%s)", path.name, error)
        return None


def _build(name: str, builder, params: dict[str, Any]) -> OpGraph:
    from ..tf_import.graphdef import graph_def_to_opgraph

    with tqdm(total=2, desc=f"building {name}", unit="stage", leave=False) as progress:
        step = builder.build(**params)
        progress.update()
        graph = graph_def_to_opgraph(
            step.graph.as_graph_def(), name=name, fetches=step.fetches, init_op=step.init_op,
            meta={"source": "benchmark", "benchmark": name, "params": step.params},
        )
        progress.update()
    return graph
