"""PlaceBench: the versioned benchmark, frozen in a data file per version.

A version (``placebench-v1``) is a JSON file in ``placement_env/harness/benchmarks/``, written once by
:func:`freeze` and never edited: any change to its tasks, budgets or seeds, or to what the graphs, clusters or
simulator compute, makes a new version, and every old version stays loadable. The file holds

- ``tracks``: for each track its description, budgets (runtime evaluations), seeds and tasks (graph, cluster,
  runtime, label), each task with its graph's size and fingerprint (``OpGraph.digest``), its cluster's
  (``Cluster.digest``), its single-device peak memory and, for simulated tasks, the reference: the best built-in
  zero-budget heuristic's step time (what a track's score divides by). A track may have ``validation`` tasks
  (to choose methods by) and ``train`` graphs (what a generalising placer may learn from), which are not scored;
- ``versions``: the simulator version, the graph builders' version and the TensorFlow version the file was
  frozen with;
- ``digest``: a fingerprint over all of the above, which every results row of the benchmark carries.

Tracks run as suites named ``<version>/<track>`` (``placebench-v1/paper``), ``<version>/<track>-validation``
and ``<version>/<track>-train`` (each train graph on each of the track's train clusters: what a generalising
placer trains on, ``python -m agents.gnn_placer --suite placebench-v1/generalisation-train``); ``load_suite``
takes all three. :func:`verify` rebuilds every graph and cluster and checks them against the
fingerprints (``placement-env placebench --verify``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..errors import UnknownSuiteError
from .suites import Task

BENCHMARK_DIR = Path(__file__).parent / "benchmarks"
_SUITE = re.compile(r"(placebench-v[0-9]+)/([a-z_-]+)")
_VALIDATION = "-validation"
_TRAIN = "-train"


@dataclass(frozen=True)
class TrainGraph:
    """A graph a generalising placer may learn from: a benchmark name, its family and size."""

    benchmark: str
    family: str
    ops: int
    groups: int
    digest: str


@dataclass(frozen=True)
class Track:
    """One track of a benchmark version: scored tasks, budgets and seeds (and unscored validation and train)."""

    name: str
    description: str
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    tasks: tuple[Task, ...]
    validation: tuple[Task, ...] = ()
    train: tuple[TrainGraph, ...] = ()
    train_clusters: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """A frozen benchmark version as its data file holds it (``data``), with its tracks read out."""

    name: str
    digest: str
    tracks: dict[str, Track]
    data: dict[str, Any]

    def task_facts(self, track: str, task: str) -> dict[str, Any]:
        """The frozen entry of ``task`` (a scored or validation task of ``track``): sizes, digests, reference."""
        entry = self.data["tracks"][track]
        for fact in (*entry["tasks"], *entry.get("validation", ())):
            if fact["name"] == task:
                return fact
        raise KeyError(f"{self.name}/{track} has no task {task!r}")


def versions() -> tuple[str, ...]:
    """The benchmark versions shipped with the package, oldest first."""
    return tuple(sorted((path.stem for path in BENCHMARK_DIR.glob("placebench-v*.json")),
                        key=lambda name: int(name.rsplit("v", 1)[1])))


def content_digest(data: dict[str, Any]) -> str:
    """The fingerprint of a benchmark file's content: everything but its ``digest`` field, as canonical JSON."""
    body = {key: value for key, value in data.items() if key != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


def _task(entry: dict[str, Any]) -> Task:
    return Task(entry["name"], entry["benchmark"], entry["cluster"], entry.get("runtime", "sim"),
                model=entry.get("model", ""), gpus=int(entry.get("gpus", 0)))


@lru_cache(maxsize=None)
def load_placebench(name: str = "placebench-v1") -> Benchmark:
    """The benchmark version ``name`` (one of :func:`versions`). UnknownSuiteError for another name, and for a
    file whose content no longer matches its digest (a frozen version is never edited)."""
    if name not in versions():
        raise UnknownSuiteError(f"unknown benchmark version {name!r}; expected one of {', '.join(map(repr, versions()))}")
    path = BENCHMARK_DIR / f"{name}.json"
    data = json.loads(path.read_text())
    if data.get("digest") != content_digest(data):
        raise UnknownSuiteError(f"{path}: the content does not match its digest {data.get('digest')!r} (now "
                                f"{content_digest(data)!r}); a frozen benchmark is never edited: freeze a new version")
    tracks = {}
    for track, entry in data["tracks"].items():
        tracks[track] = Track(track, entry["description"], tuple(entry["budgets"]), tuple(entry["seeds"]),
                              tuple(map(_task, entry["tasks"])), tuple(map(_task, entry.get("validation", ()))),
                              tuple(TrainGraph(g["benchmark"], g["family"], g["ops"], g["groups"], g["digest"])
                                    for g in entry.get("train", ())),
                              tuple(entry.get("train_clusters", ())))
    return Benchmark(name, data["digest"], tracks, data)


def is_benchmark_suite(name: object) -> bool:
    """Whether ``name`` has the form of a benchmark track's suite, ``placebench-v<N>/<track>[-validation|-train]``."""
    return isinstance(name, str) and _SUITE.fullmatch(name) is not None


def train_tasks(track: Track) -> tuple[Task, ...]:
    """Each of ``track``'s train graphs on each of its train clusters, simulated (not scored)."""
    return tuple(Task(f"{graph.benchmark}@{cluster}", graph.benchmark, cluster, "sim")
                 for graph in track.train for cluster in track.train_clusters)


# A track's suites by the suffix of their name: its scored tasks, its validation tasks, its train graphs as tasks.
_SPLITS: dict[str, Callable[[Track], tuple[Task, ...]]] = {
    "": lambda track: track.tasks, _VALIDATION: lambda track: track.validation, _TRAIN: train_tasks}


def suite_tasks(name: str) -> tuple[Task, ...]:
    """The tasks of suite ``<version>/<track>`` (scored), ``<version>/<track>-validation`` or
    ``<version>/<track>-train`` (:func:`train_tasks`)."""
    match = _SUITE.fullmatch(name)
    if match is None:
        raise UnknownSuiteError(f"suite {name!r}: expected '<version>/<track>', e.g. 'placebench-v1/paper'")
    benchmark = load_placebench(match.group(1))
    track_name = match.group(2)
    split = next((suffix for suffix in _SPLITS if suffix and track_name.endswith(suffix)), "")
    track = benchmark.tracks.get(track_name.removesuffix(split))
    if track is None or not _SPLITS[split](track):
        known = [f"{t}{suffix}" for t, tr in benchmark.tracks.items() for suffix, tasks in _SPLITS.items()
                 if tasks(tr)]
        raise UnknownSuiteError(f"suite {name!r}: {benchmark.name} has no track {track_name!r}; expected one of "
                                f"{', '.join(map(repr, known))}")
    return _SPLITS[split](track)


def benchmark_of_suite(suite: str) -> Benchmark | None:
    """The benchmark version a suite name belongs to, or None for a suite that is not a benchmark's track."""
    match = _SUITE.fullmatch(suite) if isinstance(suite, str) else None
    return load_placebench(match.group(1)) if match and match.group(1) in versions() else None


def describe(benchmark: Benchmark, track: str | None = None) -> str:
    """Markdown: the version's digest and versions, then per track its budgets, seeds and tasks with their sizes,
    single-device memory and reference (and the train graphs, for a track that has them)."""
    data = benchmark.data
    lines = [f"# {benchmark.name} (digest {benchmark.digest}, frozen {data['frozen']})", "", data["description"], "",
             "Versions: " + ", ".join(f"{key} {value}" for key, value in data["versions"].items()), ""]
    for name, entry in data["tracks"].items():
        if track is not None and name != track:
            continue
        lines += [f"## Track `{name}` (suite `{benchmark.name}/{name}`)", "", entry["description"], "",
                  f"Budgets: {', '.join(map(str, entry['budgets']))} runtime evaluations; seeds: "
                  f"{', '.join(map(str, entry['seeds']))}.", ""]
        lines += _task_table(entry["tasks"], "Scored tasks")
        if entry.get("validation"):
            lines += _task_table(entry["validation"], f"Validation tasks (suite `{benchmark.name}/{name}{_VALIDATION}`,"
                                 " not scored)")
        if entry.get("train"):
            lines += [f"Train graphs ({len(entry['train'])}, on {', '.join(entry['train_clusters'])}; not scored):", "",
                      "| graph | family | ops | groups | one-GPU peak (GiB) |", "|---|---|---|---|---|"]
            lines += [f"| `{g['benchmark']}` | {g['family']} | {g['ops']:,} | {g['groups']} | "
                      f"{g['single_gpu_peak_gib']:.2f} |" for g in entry["train"]]
            lines.append("")
    return "\n".join(lines)


def _task_table(tasks: Sequence[dict[str, Any]], title: str) -> list[str]:
    lines = [f"{title} ({len(tasks)}):", "",
             "| task | graph | cluster | runtime | ops | groups | one-GPU peak / GPU memory | reference (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for t in tasks:
        reference = (f"{t['reference_s']:.4f} ({t['reference_method']})" if t.get("reference_s") is not None
                     else "measured" if t.get("runtime") == "measured" else "none fits")
        lines.append(f"| `{t['name']}` | `{t['benchmark']}` | `{t['cluster']}` | {t.get('runtime', 'sim')} | "
                     f"{t['ops']:,} | {t['groups']} | {t['single_gpu_peak_fraction']:.2f} | {reference} |")
    return [*lines, ""]


# ---- freezing a version (once, by the script that defines it) and verifying it ----------------------------------
GraphFacts = Callable[[str, str], dict[str, Any]]


def graph_facts(benchmark: str, cluster: str, *, runtime: str = "sim",
                heuristics: Iterable[str] = ()) -> dict[str, Any]:
    """What a frozen file records about ``benchmark`` on ``cluster``: its size and fingerprint, the cluster's
    fingerprint, the single-GPU placement's peak memory (GiB and as a fraction of that GPU's memory) and, given
    ``heuristics`` and a simulated runtime, the best of them at zero budget (``reference_s``, ``reference_method``;
    None if every one fails)."""
    import numpy as np

    from ..benchmarks import load_benchmark
    from ..cluster import load_cluster
    from ..evaluation import Evaluator
    from ..problem import Problem, method, solve

    graph, machine = load_benchmark(benchmark), load_cluster(cluster)
    gpu = next((d for d, device in enumerate(machine.devices) if device.kind == "GPU"), 0)
    simulator = Evaluator(graph, machine, "sim")
    try:
        peak = float(simulator(np.full(graph.n_groups, gpu)).peak_bytes[gpu])
        facts = {"ops": int(graph.n_ops), "groups": int(graph.n_groups), "graph_digest": graph.digest,
                 "cluster_digest": machine.digest, "single_gpu_peak_gib": round(peak / 2**30, 6),
                 "single_gpu_peak_fraction": round(peak / machine.devices[gpu].memory_bytes, 6)}
        best: tuple[float, str] | None = None
        for name in heuristics if runtime == "sim" else ():
            problem = Problem.make(graph, machine, budget=0, seed=0, evaluator=simulator)
            try:
                m = simulator(solve(method(name), problem).placement)
            except Exception:  # noqa: BLE001 - a heuristic with no placement here (the expert off its models)
                continue
            if m.ok and (best is None or m.runtime_s < best[0]):
                best = (float(m.runtime_s), name)
        if runtime == "sim":
            facts["reference_s"] = None if best is None else round(best[0], 9)
            facts["reference_method"] = None if best is None else best[1]
    finally:
        simulator.close()
    return facts


def freeze(name: str, definition: dict[str, Any], *, heuristics: Sequence[str], frozen: str,
           progress: bool = True) -> dict[str, Any]:
    """The data file of version ``name`` from ``definition`` (``description`` and ``tracks``, each track with
    ``description``, ``budgets``, ``seeds``, ``tasks`` and optionally ``validation``, ``train`` and
    ``train_clusters``; each task with ``name``, ``benchmark``, ``cluster``, and optionally ``runtime``,
    ``model``, ``gpus``; each train graph with ``benchmark`` and ``family``): every task and train graph
    completed with :func:`graph_facts`, the versions, and the digest."""
    from importlib import metadata

    from tqdm import tqdm

    from ..benchmarks import BUILDER_VERSION
    from ..runtime.simulated import SIMULATOR_VERSION

    jobs = [(entry, track.get("train_clusters", ["k80-2gpu"])[0] if kind == "train" else entry["cluster"], kind)
            for track in definition["tracks"].values()
            for kind in ("tasks", "validation", "train") for entry in track.get(kind, ())]
    cached: dict[tuple, dict[str, Any]] = {}
    for entry, cluster, kind in tqdm(jobs, desc=f"freezing {name}", unit="graph", disable=not progress):
        runtime = entry.get("runtime", "sim")
        key = (entry["benchmark"], cluster, runtime, kind == "train")
        if key not in cached:
            cached[key] = graph_facts(entry["benchmark"], cluster, runtime=runtime,
                                      heuristics=() if kind == "train" else heuristics)
        entry.update(cached[key])
        if kind == "train":
            for key in ("cluster_digest", "reference_s", "reference_method"):
                entry.pop(key, None)
            entry["digest"] = entry.pop("graph_digest")
    try:
        tensorflow = metadata.version("tensorflow-cpu")
    except metadata.PackageNotFoundError:
        tensorflow = metadata.version("tensorflow")
    data = {"name": name, "frozen": frozen, "description": definition["description"],
            "versions": {"simulator": str(SIMULATOR_VERSION), "builders": str(BUILDER_VERSION),
                         "tensorflow": tensorflow},
            "heuristics": list(heuristics), "tracks": definition["tracks"]}
    data["digest"] = content_digest(data)
    return data


def verify(benchmark: Benchmark, *, progress: bool = True) -> list[str]:
    """Rebuild every graph and cluster of ``benchmark`` and list each fingerprint or version that differs from
    the frozen file's (empty: the benchmark reproduces here)."""
    from tqdm import tqdm

    from ..benchmarks import BUILDER_VERSION, load_benchmark
    from ..cluster import digest_is_portable, load_cluster
    from ..runtime.simulated import SIMULATOR_VERSION

    found = []
    frozen = benchmark.data["versions"]
    for key, now in (("simulator", str(SIMULATOR_VERSION)), ("builders", str(BUILDER_VERSION))):
        if frozen[key] != now:
            found.append(f"{key} version {now}, frozen with {frozen[key]}")
    entries = [(t, e) for t, track in benchmark.data["tracks"].items()
               for kind in ("tasks", "validation", "train") for e in track.get(kind, ())]
    for track, entry in tqdm(entries, desc=f"verifying {benchmark.name}", unit="graph", disable=not progress):
        digest = load_benchmark(entry["benchmark"]).digest
        if digest != entry.get("graph_digest", entry.get("digest")):
            found.append(f"{track}: graph {entry['benchmark']} has digest {digest}, frozen "
                         f"{entry.get('graph_digest', entry.get('digest'))}")
        if "cluster_digest" not in entry:
            continue
        cluster = load_cluster(entry["cluster"])
        if cluster.digest != entry["cluster_digest"] and digest_is_portable(cluster):
            found.append(f"{track}: cluster {entry['cluster']} has digest {cluster.digest}, "
                         f"frozen {entry['cluster_digest']}")
    return found
