"""Graph-partitioning baselines: Scotch static mapping, MinCut (Scotch on the GPUs only) and METIS.

All three see the grouped graph the same way (:func:`source_graph`, from the core's group graph,
:func:`placement_env.group_graph`): one vertex per group, weighted by its compute (the group's analytical
seconds on the fastest device that can run it), and one undirected edge per pair of groups joined by a data
or control edge, weighted by the bytes sent either way (each tensor once per receiving group, as TF sends it)
plus one per direction, so control dependencies count a little. Devices are weighted by
their compute capacity (``peak_flops``). So these methods balance load and cut little traffic,
but ignore the schedule (what runs in parallel), which is why the paper finds them 2-8x slower
than the expert placement.

``scotch``: the real Scotch mapper (``scotch_gmap`` from Debian's ``scotch`` package, ``gmap``
elsewhere), run in a temporary directory. Files (Scotch user's manual):

  - source graph ``.grf``: ``0`` / ``<vertices> <arcs>`` / ``0 011`` (base 0; flags: no labels,
    edge loads, vertex loads) / one line per vertex ``<load> <degree> (<edge load> <neighbour>)*``;
    arcs = 2 x edges, loads integers >= 1, scaled so each total stays below 10^6 (no overflow
    even with a 32-bit ``SCOTCH_Num``);
  - target: ``cmpltw <n> <w0> ... <wn-1>``, a weighted complete graph, when all links between
    the target devices cost the same; otherwise a decomposition-defined target built by
    ``amk_grf`` from a complete target graph whose vertex loads are the device weights and whose
    edge loads are the per-byte cost of each link (``10 x fastest bandwidth / bandwidth``), so
    Scotch also keeps heavy traffic on fast links. (The paper machines use ``amk_grf`` for the
    CPU + GPU targets, host links being 12 GB/s and GPU peer links 10 GB/s, and ``cmpltw`` for
    the GPUs alone.) ``amk_grf`` honours the vertex loads as terminal weights (checked: a
    uniform chain of 230 vertices maps 30/100/100 onto loads 3/10/10, as with ``cmpltw``);
  - mapping (its output): ``<n>`` then ``<vertex> <target index>`` lines.

  Scotch 7 maps with threads, one per core by default, and its answer then depends on the number of cores
  and on thread timing: on 2 cores about 1 run in 100 differs, on 8 or 16 nearly every run does (measured on
  BERT / 4 GPUs with Debian's 7.0.3, ``docs/findings.md``). ``-Cd`` ("deterministic behavior, even across
  multiple threads", ``gmap -h``) removes the timing but not the thread count: with it, one thread and two or
  more still map differently (measured with 7.0.3: MinCut on NMT / paper-4gpu moves 125 of 179 groups, Scotch on
  BERT / k80-4gpu maps differently on 1, 2 and 8 threads). The mapper therefore runs on one thread
  (``SCOTCH_PTHREAD_NUMBER=1``, whatever the caller's environment says) and with ``-Cd``, which gives one mapping
  on every machine and every run (graphs of a few hundred groups map in well under a second on one thread), so
  MinCut and Scotch are the same baselines everywhere. Scotch 6 has no ``-C`` option and runs without one.

``mincut``: the same mapping with the CPUs removed from the targets (GPUs only).

``metis``: ``pymetis.part_graph`` on the same weighted graph with ``tpwgts`` = the devices'
shares of compute capacity. METIS may leave some parts empty (fewer parts than devices): that is
a valid placement and is returned as is. With no edges between groups, METIS has nothing to cut,
so groups are split greedily (largest first, onto the device whose share is least filled).

Kernel fix-up (all three): a group placed on a device that cannot run one of its ops (e.g. a
CPU-only op on a GPU) moves to the first device that can run it, in practice the CPU. For MinCut
this is the only way anything lands on a CPU: groups with no GPU kernel must run on the CPU.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from placement_env import Problem, group_graph
from placement_env.errors import MapperError, MapperNotFoundError, PlacementEnvError

SCOTCH_TIMEOUT_S = 120.0  # a mapper run on a 10^3-vertex graph takes well under a second
MAPPER_THREADS = "1"  # Scotch's threads: its mapping depends on their number, even with -Cd (module docstring)
SCOTCH_INSTALL = "apt-get install scotch"  # Debian/Ubuntu; the mapper is then /usr/bin/scotch_gmap
_MAX_TOTAL_LOAD = 10**6  # integer vertex / edge load totals stay below this (no 32-bit overflow)
_LINK_COST_SCALE = 10  # per-byte cost of the fastest link in an amk_grf target graph


@dataclass(frozen=True)
class SourceGraph:
    """The grouped graph as partitioners see it: integer vertex loads and a symmetric CSR of edge loads."""

    vertex_load: np.ndarray  # int64 [n_groups], >= 1
    xadj: np.ndarray  # int64 [n_groups + 1]
    adjncy: np.ndarray  # int64 [2 * n_edges], no self loops, neighbours sorted
    edge_load: np.ndarray  # int64 [2 * n_edges], >= 1, symmetric

    @property
    def n_vertices(self) -> int:
        return len(self.vertex_load)

    @property
    def n_arcs(self) -> int:
        return len(self.adjncy)


# ---------------------------------------------------------------- shared helpers

def _integer_loads(values: np.ndarray, total: int = _MAX_TOTAL_LOAD) -> np.ndarray:
    """Non-negative ``values`` as integers >= 1 proportional to them, summing to about ``total`` at most."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    values = np.where(np.isfinite(values) & (values > 0), values, 0.0)
    s = values.sum()
    if s <= 0:
        return np.ones(values.shape, dtype=np.int64)
    scale = (total - values.size) / s if total > values.size else 1.0 / values.max()
    return np.maximum(1, np.floor(values * scale)).astype(np.int64)


def group_compute_seconds(problem: Problem) -> np.ndarray:
    """Float [n_groups]: each group's analytical seconds on the fastest device that can run it."""
    per_device = group_graph(problem.graph, problem.cluster, problem.costs).seconds
    allowed = problem.allowed
    usable = np.where(allowed.any(axis=1, keepdims=True), allowed, True)
    return np.where(usable, per_device, np.inf).min(axis=1)


def source_graph(problem: Problem) -> SourceGraph:
    """Groups weighted by compute, edges by the bytes between them either way (+1 per direction)."""
    undirected = group_graph(problem.graph, problem.cluster, problem.costs).undirected
    weight = undirected.bytes.astype(np.float64) + undirected.edges
    return SourceGraph(vertex_load=_integer_loads(group_compute_seconds(problem)),
                       xadj=np.array(undirected.indptr), adjncy=np.array(undirected.indices),
                       edge_load=_integer_loads(weight))


def device_weights(problem: Problem, devices: np.ndarray) -> np.ndarray:
    """Int [len(devices)]: compute capacity (peak FLOP/s), scaled so the fastest device weighs 1000."""
    peak = np.asarray(problem.cluster.peak_flops, dtype=np.float64)[devices]
    return np.maximum(1, np.round(1000 * peak / peak.max())).astype(np.int64)


def fix_kernels(problem: Problem, placement: np.ndarray) -> np.ndarray:
    """``placement`` with every group on a device that can run it: a group placed where one of its ops has
    no kernel moves to the first device that can run all of them (in practice the CPU)."""
    allowed = problem.allowed
    placement = np.asarray(placement, dtype=np.int64)
    ok = allowed[np.arange(len(placement)), placement]
    return np.where(ok, placement, allowed.argmax(axis=1)).astype(np.int64)


def _devices_of_kind(problem: Problem, kinds: tuple[str, ...]) -> np.ndarray:
    found = np.array([d for d, dev in enumerate(problem.cluster.devices) if dev.kind in kinds], dtype=np.int64)
    if found.size == 0:
        raise ValueError(f"cluster {problem.cluster.name!r} has no {'/'.join(kinds)} device")
    return found


# ---------------------------------------------------------------- Scotch

def find_mapper() -> str:
    """Path of the Scotch static mapper: ``scotch_gmap`` (Debian) or ``gmap`` (upstream name)."""
    path = shutil.which("scotch_gmap")
    if path:
        return path
    path = shutil.which("gmap")
    if path and _is_scotch(path):  # Debian's GMAP genome aligner is also called gmap
        return path
    raise MapperNotFoundError(
        f"the Scotch static mapper (scotch_gmap or gmap) is not on PATH; install it with "
        f"'{SCOTCH_INSTALL}' (Debian/Ubuntu, as root) or build Scotch from https://gitlab.inria.fr/scotch/scotch")


@functools.cache
def _version_banner(path: str) -> str:
    """What ``path -V`` prints (stdout and stderr), or "" when it does not run."""
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout + out.stderr


def _is_scotch(path: str) -> bool:
    banner = _version_banner(path)
    return "gpart" in banner or "Scotch" in banner


def _determinism_options(mapper: str) -> tuple[str, ...]:
    """``("-Cd",)`` for Scotch 7 and later (a mapping that does not depend on threads), nothing before."""
    version = re.search(r"version (\d+)\.", _version_banner(mapper))
    return ("-Cd",) if version and int(version.group(1)) >= 7 else ()


def _find_amk_grf(mapper: str) -> str | None:
    sibling = Path(mapper).with_name("amk_grf")
    if sibling.is_file():
        return str(sibling)
    return shutil.which("amk_grf") or shutil.which("scotch_amk_grf")


def grf_text(vertex_load: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray, edge_load: np.ndarray) -> str:
    """A Scotch source graph (``.grf``, base 0, vertex and edge loads)."""
    lines = ["0", f"{len(vertex_load)} {len(adjncy)}", "0 011"]
    for v in range(len(vertex_load)):
        lo, hi = int(xadj[v]), int(xadj[v + 1])
        pairs = " ".join(f"{int(edge_load[k])} {int(adjncy[k])}" for k in range(lo, hi))
        lines.append(f"{int(vertex_load[v])} {hi - lo}" + (f" {pairs}" if pairs else ""))
    return "\n".join(lines) + "\n"


def link_costs(problem: Problem, devices: np.ndarray) -> np.ndarray:
    """Int [k, k]: per-byte cost of each link between ``devices`` (10 x fastest bandwidth / bandwidth)."""
    bw = np.asarray(problem.cluster.bandwidth, dtype=np.float64)[np.ix_(devices, devices)]
    bw = np.minimum(bw, bw.T)  # an undirected target graph: the slower direction
    off = ~np.eye(len(devices), dtype=bool)
    finite = off & np.isfinite(bw) & (bw > 0)
    fastest = bw[finite].max() if finite.any() else 1.0
    cost = np.ones_like(bw)
    cost[finite] = np.round(_LINK_COST_SCALE * fastest / bw[finite])
    cost[off & ~finite & (bw <= 0)] = _LINK_COST_SCALE * 1000  # no link: very far
    cost[~off] = 0
    return np.maximum(cost, 0).astype(np.int64)


def _run(cmd: list[str], cwd: str, what: str, stdin: str | None = None) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, input=stdin, timeout=SCOTCH_TIMEOUT_S,
                              env={**os.environ, "SCOTCH_PTHREAD_NUMBER": MAPPER_THREADS})
    except subprocess.TimeoutExpired:
        raise MapperError(f"{what} ({' '.join(cmd)}) took over {SCOTCH_TIMEOUT_S:g} s") from None
    except OSError as error:
        raise MapperError(f"{what} ({' '.join(cmd)}) could not run: {error}") from None
    if done.returncode != 0:
        status = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
        raise MapperError(f"{what} ({' '.join(cmd)}) failed with {status}: "
                          f"{(done.stderr or done.stdout).strip() or 'no message'}")


def target_text(problem: Problem, devices: np.ndarray, workdir: str, mapper: str) -> tuple[str, str]:
    """(kind, file name) of the Scotch target for ``devices``, written into ``workdir``:
    ``cmpltw`` when all links cost the same, else an ``amk_grf`` decomposition of the link graph."""
    weights = device_weights(problem, devices)
    costs = link_costs(problem, devices)
    k = len(devices)
    off = costs[~np.eye(k, dtype=bool)]
    amk_grf = _find_amk_grf(mapper) if off.size and off.min() != off.max() else None
    if off.size and off.min() != off.max() and amk_grf is None:
        warnings.warn("amk_grf not found next to the Scotch mapper: links of different bandwidths are "
                      "treated as equal (cmpltw target)", RuntimeWarning, stacklevel=3)
    if amk_grf is None:
        Path(workdir, "target.tgt").write_text(f"cmpltw {k} {' '.join(str(int(w)) for w in weights)}\n")
        return "cmpltw", "target.tgt"
    m = sp.csr_matrix(np.where(np.eye(k, dtype=bool), 0, costs))
    m.sort_indices()
    Path(workdir, "links.grf").write_text(grf_text(weights, m.indptr, m.indices, m.data))
    _run([amk_grf, "links.grf", "target.tgt"], workdir, "amk_grf")
    return "amk_grf", "target.tgt"


def run_mapper(source: str, target: str, *, cwd: str, mapper: str | None = None) -> np.ndarray:
    """Run Scotch's static mapper on source/target files in ``cwd``; int [n_vertices] target indices."""
    mapper = mapper or find_mapper()
    _run([mapper, *_determinism_options(mapper), source, target, "mapping.map"], cwd, "Scotch mapper")
    text = Path(cwd, "mapping.map").read_text()
    numbers = text.split()
    try:
        n = int(numbers[0])
        pairs = np.array([int(x) for x in numbers[1:1 + 2 * n]], dtype=np.int64).reshape(n, 2)
    except (IndexError, ValueError):
        raise MapperError(f"unreadable Scotch mapping file:\n{text[:500]}") from None
    n_vertices = int(Path(cwd, source).read_text().split()[1])
    mapping = np.full(n_vertices, -1, dtype=np.int64)
    mapping[pairs[:, 0]] = pairs[:, 1]
    if (mapping < 0).any():
        raise MapperError(f"the Scotch mapping leaves {(mapping < 0).sum()} of {n_vertices} vertices unmapped")
    return mapping


def scotch_mapping(problem: Problem, devices: np.ndarray | None = None) -> np.ndarray:
    """Int [n_groups]: the cluster device Scotch maps each group to (before the kernel fix-up),
    mapping onto ``devices`` (cluster indices; default all)."""
    devices = np.arange(problem.cluster.n_devices) if devices is None else np.asarray(devices, dtype=np.int64)
    mapper = find_mapper()  # before anything else, so a missing mapper is the error reported
    if problem.graph.n_groups == 0:
        return np.zeros(0, dtype=np.int64)
    if len(devices) == 1:
        return np.full(problem.graph.n_groups, devices[0], dtype=np.int64)
    g = source_graph(problem)
    with tempfile.TemporaryDirectory(prefix="scotch_") as workdir:
        Path(workdir, "source.grf").write_text(grf_text(g.vertex_load, g.xadj, g.adjncy, g.edge_load))
        _, target = target_text(problem, devices, workdir, mapper)
        mapping = run_mapper("source.grf", target, cwd=workdir, mapper=mapper)
    if mapping.max() >= len(devices):
        raise MapperError(f"Scotch mapped a vertex to target {mapping.max()}; the target has {len(devices)}")
    return devices[mapping]


def scotch(problem: Problem) -> np.ndarray:
    """Scotch's static mapping onto every device (weighted by compute, links by bandwidth), kernel-fixed."""
    return fix_kernels(problem, scotch_mapping(problem))


def mincut(problem: Problem) -> np.ndarray:
    """Scotch's static mapping onto the GPUs only; groups with no GPU kernel go to the CPU."""
    return fix_kernels(problem, scotch_mapping(problem, _devices_of_kind(problem, ("GPU",))))


# ---------------------------------------------------------------- METIS

def _greedy_split(loads: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Parts for vertices with no edges: largest load first onto the part least filled relative to its share."""
    filled = np.zeros(len(shares))
    parts = np.zeros(len(loads), dtype=np.int64)
    for v in np.argsort(-loads, kind="stable"):
        p = int(np.argmin((filled + loads[v]) / shares))
        parts[v] = p
        filled[p] += loads[v]
    return parts


def metis(problem: Problem) -> np.ndarray:
    """METIS k-way partition into one part per device, part sizes by compute share, kernel-fixed."""
    try:
        import pymetis
    except ImportError:
        raise PlacementEnvError("the metis baseline needs pymetis: pip install pymetis") from None
    n_devices, n = problem.cluster.n_devices, problem.graph.n_groups
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n_devices == 1:
        return fix_kernels(problem, np.zeros(n, dtype=np.int64))
    g = source_graph(problem)
    weights = device_weights(problem, np.arange(n_devices)).astype(np.float64)
    shares = weights / weights.sum()
    if g.n_arcs == 0:
        parts = _greedy_split(g.vertex_load.astype(np.float64), shares)
    else:
        adjacency = pymetis.CSRAdjacency(adj_starts=g.xadj.tolist(), adjacent=g.adjncy.tolist())
        _, parts = pymetis.part_graph(n_devices, adjacency, vweights=g.vertex_load.tolist(),
                                      eweights=g.edge_load.tolist(), tpwgts=(shares / shares.sum()).tolist())
        parts = np.asarray(parts, dtype=np.int64)
        if parts.shape != (n,) or parts.min() < 0 or parts.max() >= n_devices:
            raise PlacementEnvError(f"METIS returned parts {np.unique(parts)} for {n_devices} devices")
    return fix_kernels(problem, parts)
