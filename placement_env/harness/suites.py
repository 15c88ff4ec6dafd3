"""Benchmark suites: named lists of tasks (a benchmark on a cluster with a runtime).

:func:`load_suite` takes a name of :data:`SUITES`, a track of a versioned benchmark (``placebench-v1/paper``, see
:mod:`placebench`) or, for a suite of one's own, a name given to :func:`register_suite`, the path of a suite file
(``.toml`` or ``.json``, see :mod:`.suite_file`) or ``"package.module:attribute"``,
an attribute that holds a tuple of :class:`Task` or a function that returns one (as a method is named by its
import path).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..cluster.checks import bad_argument
from ..errors import ArgumentError, UnknownSuiteError
from .task_graph import check_graph_options


@dataclass(frozen=True)
class Task:
    """One row of a suite: place ``benchmark`` on ``cluster``, scored by ``runtime``.

    ``benchmark`` is a benchmark name, or the path of a graph file (``task_graph.GRAPH_FILES``: a saved OpGraph, a
    TF GraphDef or MetaGraphDef, a Keras model file) that ``graph_options`` tells how to import (e.g.
    ``{"input_shape": [32, 784]}`` for a Keras model; ``task_graph.load_task_graph`` loads it)."""

    name: str
    benchmark: str
    cluster: str
    runtime: str = "sim"
    model: str = ""  # row label in reports, e.g. "RNNLM"
    gpus: int = 0
    graph_options: Mapping[str, Any] = field(default_factory=dict, hash=False)


PAPER_MODELS = (("RNNLM", "rnnlm"), ("NMT", "nmt"), ("Inception-V3", "inception_v3"))


def _paper() -> tuple[Task, ...]:
    return tuple(Task(f"{benchmark}-{gpus}gpu", benchmark, f"paper-{gpus}gpu", model=label, gpus=gpus)
                 for label, benchmark in PAPER_MODELS for gpus in (2, 4))


def _tiny() -> tuple[Task, ...]:
    return (Task("rnnlm-tiny-2gpu", "rnnlm-tiny", "paper-2gpu", model="RNNLM-tiny", gpus=2),
            Task("inception_v3-tiny-2gpu", "inception_v3-tiny", "paper-2gpu", model="Inception-V3-tiny", gpus=2),
            Task("synthetic-tiny-2gpu", "synthetic-tiny", "paper-2gpu", model="synthetic-tiny", gpus=2))


def _generalisation() -> tuple[Task, ...]:
    return tuple(Task(f"synthetic:{seed}-{gpus}gpu", f"synthetic:{seed}", f"paper-{gpus}gpu",
                      model=f"synthetic:{seed}", gpus=gpus) for seed in range(10) for gpus in (2, 4))


# The train / test split of real TF training graphs, on the physically modelled K80 machines: the
# families differ between the two (LSTMs, Inception and a decoder-only Transformer to learn from;
# a CNN of another family, an encoder-decoder Transformer and an encoder-only one held out).
# Two train graphs come again at other batches so that the train tasks' memory pressure (the
# single-GPU peak over the GPUs' memory) covers the range between the paper's models (0.15-0.64 of
# two K80 dies) and GPT-2 (1.70): Inception-V3 at batch 192 and 240 (0.82, 1.02), GPT-2 at batch
# 4 and 6 (0.88, 1.29).
GENERALISATION_TRAIN = (("RNNLM", "rnnlm"), ("NMT", "nmt"), ("Inception-V3", "inception_v3"), ("GPT-2", "gpt2"),
                        ("Inception-V3, batch 192", "inception_v3-batch192"),
                        ("Inception-V3, batch 240", "inception_v3-batch240"),
                        ("GPT-2, batch 4", "gpt2-batch4"), ("GPT-2, batch 6", "gpt2-batch6"))
GENERALISATION_TEST = (("ResNet-50", "resnet50"), ("Transformer", "transformer"), ("BERT", "bert"))
# A validation split for choices about the zero-shot method (its memory repairs, its refinement): families in neither
# split nor among the cost model's train graphs, each at a single-GPU peak of about 0.75 and 1.0 of two dies: three
# CNNs (VGG-16 at batch 256 and 352, VGG-16-BN at 128 and 176, MobileNetV2 at 320 and 416) and MLP-Mixer (layers of
# a Transformer encoder's shape without attention; batch 48 and 60: 0.79 and 0.99). The train tasks are a biased
# judge of such choices, since the placer learned their placements, and the test tasks must not be one.
GENERALISATION_VALIDATION = (("VGG-16", "vgg16"), ("VGG-16, batch 352", "vgg16-batch352"),
                             ("VGG-16-BN, batch 128", "vgg16_bn-batch128"),
                             ("VGG-16-BN, batch 176", "vgg16_bn-batch176"),
                             ("MobileNetV2, batch 320", "mobilenet_v2-batch320"),
                             ("MobileNetV2, batch 416", "mobilenet_v2-batch416"),
                             ("MLP-Mixer, batch 48", "mlp_mixer-batch48"), ("MLP-Mixer, batch 60", "mlp_mixer-batch60"))


# A recommendation model whose embedding tables (16.1 GiB) pass one K80 die's memory (10.5 GiB) but fit on two:
# which tables go where, and where the MLPs run beside them.
RECOMMENDATION = (("DLRM", "dlrm"),)


def k80_tasks(models: tuple[tuple[str, str], ...]) -> tuple[Task, ...]:
    """A task per (label, benchmark) of ``models`` on each of the K80 machines, ``k80-2gpu`` and ``k80-4gpu``."""
    return tuple(Task(f"{benchmark}-k80-{gpus}gpu", benchmark, f"k80-{gpus}gpu", model=label, gpus=gpus)
                 for label, benchmark in models for gpus in (2, 4))


SUITES = {
    "paper": _paper,  # the paper's table: 3 models x {2, 4} GPUs on the paper's machine (ideal links)
    "paper-k80": lambda: k80_tasks(PAPER_MODELS),  # the same tasks on the K80 machines as built (k80.py)
    "tiny": _tiny,  # small graphs, for tests and quick tries
    "generalisation": _generalisation,  # 10 seeded random layered graphs x {2, 4} GPUs
    "generalisation-train": lambda: k80_tasks(GENERALISATION_TRAIN),  # what a generalising placer learns from
    "generalisation-test": lambda: k80_tasks(GENERALISATION_TEST),  # held-out families, placed after training
    "generalisation-validation": lambda: k80_tasks(GENERALISATION_VALIDATION),  # other families, to choose methods by
    "dlrm": lambda: k80_tasks(RECOMMENDATION),  # DLRM's tables spread over the K80 machines' devices
}


# The suites given to register_suite in this process, by name.
_REGISTERED: dict[str, tuple[Task, ...]] = {}


def load_suite(name: str) -> tuple[Task, ...]:
    """The tasks of suite ``name``: a name of :data:`SUITES`, a benchmark track (``placebench-v1/paper``), a name
    given to :func:`register_suite`, the path of a suite file (``.toml`` or ``.json``, read by
    :func:`~placement_env.harness.suite_file.read_suite_file`), or ``"package.module:attribute"`` for a tuple of
    :class:`Task` (or a function that returns one) defined elsewhere. UnknownSuiteError names what is wrong (a
    malformed suite file is a SuiteFileError naming its line and field)."""
    if isinstance(name, str) and name in SUITES:
        return SUITES[name]()
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    from . import placebench  # the versioned benchmark's tracks: "placebench-v1/paper"
    from .suite_file import is_suite_file, read_suite_file  # it imports this module (Task)

    if placebench.is_benchmark_suite(name):
        return placebench.suite_tasks(name)
    if is_suite_file(name):
        return read_suite_file(name).tasks
    if not (isinstance(name, str) and name.count(":") == 1 and all(name.split(":"))):
        registered = "".join(f", {n!r}" for n in _REGISTERED)
        raise UnknownSuiteError(f"unknown suite {name!r}; expected one of {', '.join(map(repr, SUITES))}"
                                f"{registered}, a benchmark track such as 'placebench-v1/paper', a suite file "
                                "(.toml or .json), or 'package.module:attribute' naming a tuple of Task")
    module, attribute = name.split(":")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise UnknownSuiteError(f"suite {name!r}: cannot import {module}:{attribute} ({error})") from None
    return check_tasks(name, found() if callable(found) else found)


def register_suite(name: str, tasks: Sequence[Task]) -> None:
    """Make ``tasks`` (a list or tuple of :class:`Task`) the suite ``name`` for :func:`load_suite` and ``run_suite``
    in this process; registering a name again replaces its tasks. ArgumentError for a name that is a built-in
    suite's or a benchmark track's, or that reads as a suite file or an import path; UnknownSuiteError for tasks
    that are not a non-empty list of Task with names of their own."""
    from . import placebench
    from .suite_file import is_suite_file

    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise bad_argument("name", name, "a non-empty suite name without surrounding spaces")
    if name in SUITES or placebench.is_benchmark_suite(name):
        raise bad_argument("name", name, f"a name other than the built-in suites' ({', '.join(SUITES)}) and the "
                                         "benchmark tracks' (placebench-v1/paper, ...): rows carry the suite's name, "
                                         "so the same name for other tasks would mix their results")
    if is_suite_file(name) or ":" in name:
        raise bad_argument("name", name, "a name without ':' that does not end in .toml or .json (load_suite reads "
                                         "those as an import path and a suite file)")
    _REGISTERED[name] = check_tasks(name, tasks)


def resolve_suite(suite: str, tasks: Sequence[Task] | None = None) -> tuple[str, tuple[Task, ...]]:
    """The name that rows carry and the tasks of ``suite``: ``tasks`` when given (checked), else the suite's
    (:func:`load_suite`); the rows of a suite file carry the name the file gives (default: the file's stem)."""
    if tasks is not None:
        return suite, check_tasks(suite, tasks)
    from .suite_file import is_suite_file, read_suite_file

    if is_suite_file(suite):
        found = read_suite_file(suite)
        return found.name, found.tasks
    return suite, load_suite(suite)


def check_tasks(name: str, tasks: object) -> tuple[Task, ...]:
    """``tasks`` as a tuple of :class:`Task` with names of their own (UnknownSuiteError naming suite ``name``) and
    import options their graphs take (ArgumentError naming the task)."""
    if isinstance(tasks, list):
        tasks = tuple(tasks)
    if not (isinstance(tasks, tuple) and tasks and all(isinstance(task, Task) for task in tasks)):
        raise UnknownSuiteError(f"suite {name!r} is not a tuple of Task (or a function that returns one): got "
                                f"{type(tasks).__name__}{' (empty)' if not tasks else ''}")
    names = [task.name for task in tasks]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UnknownSuiteError(f"suite {name!r}: the task names {', '.join(map(repr, repeated))} repeat; each task "
                                "needs a name of its own (results rows are keyed by it)")
    for task in tasks:
        try:
            check_graph_options(task.benchmark, task.graph_options)
        except ArgumentError as error:
            raise ArgumentError(f"suite {name!r}, task {task.name!r}: {error}") from None
    return tasks
