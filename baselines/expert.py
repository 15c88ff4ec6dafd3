"""The expert (hand) placement of the paper's time, and DLRM's table-wise sharding, for the benchmarks whose
structure it knows.

"Expert: the hand placement of the time. RNNLM/NMT: one LSTM layer per GPU, attention and softmax
on the last GPU (GNMT style). Inception: the network's blocks split across GPUs."

How an op is attributed to a forward scope: a leading ``gradients/`` (or ``gradients_<n>/``) is
stripped (with ``colocate_gradients_with_ops=True`` the gradient of ``foo/bar`` is named
``gradients/foo/bar_grad/...`` and co-located with ``foo/bar``; the first ``_grad`` suffix is
dropped too, so ``gradients/MaxPool_3a_3x3_grad/MaxPoolGrad`` counts for ``MaxPool_3a_3x3``), and so is the optimizer's
``train_step/update_`` (the update of variable ``foo/kernel`` is
``train_step/update_foo/kernel/ResourceApplyMomentum``). Momentum slots (``foo/kernel/Momentum``)
already live under their variable's scope. What remains is matched against the rules below.

GPU ``i`` means the i-th GPU of the cluster (in device order); ``n`` is the number of GPUs and
"last" is GPU ``n - 1``. Layer-wise, as the paper's expert: with ``L`` LSTM layers in a stack, layer
``k`` goes to GPU ``layer_gpu(k) = k`` when ``L <= n`` (one layer per GPU), else to GPU ``floor(k n /
L)``, consecutive layers on consecutive GPUs in contiguous blocks (8 layers on 4 GPUs: two per
GPU). The paper's 2-layer models get GPUs 0 and 1 on any cluster of two GPUs or more.

RNNLM (``rnnlm``, ``rnnlm-tiny``, ``rnnlm-deep``):

    =========================  ==========================================
    scope (after stripping)     device
    =========================  ==========================================
    ``lstm_<k>/...``            GPU ``layer_gpu(k)``
    ``embedding/...``           GPU of ``lstm_0`` (GPU 0)
    ``inputs/...``              GPU of ``lstm_0`` (GPU 0)
    ``softmax/...``             last GPU
    ``loss/...``                last GPU
    anything else               no vote (see "groups" below)
    =========================  ==========================================

NMT (``nmt``, ``nmt-tiny``, ``nmt-deep``), GNMT style (layer k of the encoder and of the decoder
share a GPU):

    ===============================  ==========================================
    scope (after stripping)           device
    ===============================  ==========================================
    ``encoder/lstm_<k>/...``          GPU ``layer_gpu(k)``
    ``decoder/lstm_<k>/...``          GPU ``layer_gpu(k)``
    ``encoder/embedding/...``         GPU of ``encoder/lstm_0`` (GPU 0)
    ``decoder/embedding/...``         GPU of ``decoder/lstm_0`` (GPU 0)
    ``inputs/...``                    GPU 0
    ``attention/...``                 last GPU
    ``softmax/...``                   last GPU
    ``loss/...``                      last GPU
    anything else                     no vote
    ===============================  ==========================================

Inception-V3 (``inception_v3``, ``inception_v3-tiny``): the top-level scopes of
``placement_env.benchmark_blocks("inception_v3")`` in forward order, with the stem (``inputs`` up to
``MaxPool_5a_3x3``) merged into the first Mixed block and ``Logits`` and ``loss`` merged into the
last one, are split into ``n`` contiguous chunks (one per GPU, in order) that minimise the largest
chunk's compute (each block weighing the estimated FLOPs of its forward, gradient and update
ops). So blocks go to non-decreasing GPU indices along that order, the stem is with the first
Mixed block on GPU 0 and the logits and loss are on the last GPU. Other ops have no vote.

DLRM (``dlrm``, ``dlrm-tiny``), the practice of its own paper and of recommendation training since (Naumov et al.
2019: the embedding tables model-parallel, each table whole on one device): the tables, largest first, each to the
GPU whose tables so far hold the fewest bytes (a greedy table-wise sharding); the dense part on GPU 0.

    ===============================  ==========================================
    scope (after stripping)           device
    ===============================  ==========================================
    ``table_<k>/...``                 the GPU table k is sharded to
    ``inputs/``, ``bottom_mlp/``,      GPU 0
    ``interaction/``, ``top_mlp/``,
    ``loss/...``
    anything else                     no vote
    ===============================  ==========================================

(No memory check, as for the other models: on ``k80-2gpu`` the largest table and the dense part share GPU 0, 7.8
and 8.4 GiB on the two dies.)

Groups (the units placed): each group goes to the device its ops vote for, weighted by their
estimated FLOPs (by op count when none of its voting ops has FLOPs). A group with no voting op
takes the device its already-placed neighbour groups exchange the most bytes with (repeated until
nothing changes), else GPU 0. A group that cannot run on its device (``problem.allowed`` false,
e.g. an op with no GPU kernel) goes to the first CPU that can run it (else the first device that
can). Since a group can mix scopes, a minority scope follows its group: in the paper-scale NMT
the decoder embedding shares a group with ``decoder/lstm_1`` and part of the attention, so it
lands on ``decoder/lstm_1``'s GPU, not GPU 0.

Gradients (``gradients=``): the rules above place each gradient with its forward op, as TF does with
``colocate_gradients_with_ops=True`` (the benchmarks build their gradients that way). The expert as TF 1.x made it
is ``gradients="first_gpu"`` (preset ``expert_tf1``): TF1's ``optimizer.minimize`` and ``tf.gradients`` defaulted
to ``colocate_gradients_with_ops=False``, so a hand placement written as ``with tf.device(...)`` around the forward
pass left the gradient ops, created outside those scopes, unplaced, and TF's placer put each on the first GPU
(on the CPU when it has no GPU kernel); ``apply_gradients`` colocates each update with its variable, so the updates
stay. Per group: a group goes to the first GPU when most of its ops (by count, ties kept) are gradient ops (under
``gradients[_n]/``) and it holds no variable and no update; otherwise it stays where the rules above put it. A group
with a gradient op and no GPU kernel goes to the first CPU, as with the rules above. Exact per op only where no
group mixes the two: the benchmarks' gradients carry ``_class`` co-location with their forward ops, so even TF's
own co-location groups (``load_benchmark(name, max_groups=10**6)``) mix them, and the ops of the minority follow
their group (compare with :func:`tf1_op_devices`, the per-op placement, to count them). Per op, on ``k80-2gpu`` at
TF's granularity, the tensors crossing devices grow from 75 to 364 on RNNLM and from 5 to 571 on Inception-V3.

Other benchmarks (synthetic graphs, user graphs) have no expert placement:
:class:`NoExpertPlacementError`.
"""
from __future__ import annotations

import re
from typing import Literal, get_args

import numpy as np

from placement_env import DEVICE_KINDS, Problem, benchmark_blocks
from placement_env.errors import NoExpertPlacementError

EXPERT_BENCHMARKS: tuple[str, ...] = ("rnnlm", "nmt", "inception_v3", "rnnlm-tiny", "nmt-tiny", "inception_v3-tiny",
                                      "rnnlm-deep", "nmt-deep", "dlrm", "dlrm-tiny")

Gradients = Literal["colocated", "first_gpu"]  # the annotation of ``gradients=``: a method spec is checked against it
GRADIENTS: tuple[str, ...] = get_args(Gradients)

_GRADIENTS = re.compile(r"^gradients(?:_\d+)?/")
_UPDATE = re.compile(r"^train_step/update_")
_GRAD_SUFFIX = re.compile(r"_grad(?=/|$)")
_LSTM = re.compile(r"^(?:(encoder|decoder)/)?lstm_(\d+)(?:/|$)")
_TABLE = re.compile(r"^table_(\d+)(?:/|$)")
_DLRM_DENSE = ("inputs", "bottom_mlp", "interaction", "top_mlp", "loss")
_STEM_END = "MaxPool_5a_3x3"
_HEAD = ("Logits", "loss")


def forward_scope(op_name: str) -> str:
    """``op_name`` without a leading ``gradients[_n]/`` or ``train_step/update_``."""
    name = str(op_name)
    stripped = _GRADIENTS.sub("", name, count=1)
    if stripped != name:  # gradients/foo/bar_grad/... -> foo/bar/...
        return _GRAD_SUFFIX.sub("", stripped, count=1)
    return _UPDATE.sub("", name, count=1)


def _model(benchmark: str) -> str:
    name = str(benchmark or "")
    if name in EXPERT_BENCHMARKS:
        return name.partition("-")[0]
    raise NoExpertPlacementError(
        f"no expert placement for benchmark {name!r}; the expert placement exists for: "
        f"{', '.join(EXPERT_BENCHMARKS)} (it needs the model's known layer structure)")


def _layer_gpu(k: int, n_layers: int, n_gpus: int) -> int:
    """GPU ordinal of LSTM layer ``k`` of ``n_layers``: its own GPU while there are enough, else
    contiguous blocks of consecutive layers (layer-wise, as the paper's expert)."""
    return k if n_layers <= n_gpus else k * n_gpus // n_layers


def _lstm_votes(names: list[str], n_gpus: int) -> np.ndarray:
    """GPU ordinal (0..n_gpus-1) each op votes for, or -1 for no vote (RNNLM and NMT rules)."""
    last = n_gpus - 1
    votes = np.full(len(names), -1, dtype=np.int64)
    scopes = [forward_scope(full) for full in names]
    matches = [_LSTM.match(name) for name in scopes]
    # Layers per stack (None for the RNNLM's, else "encoder" / "decoder"), read off the graph.
    n_layers: dict[str | None, int] = {}
    for match in filter(None, matches):
        n_layers[match.group(1)] = max(n_layers.get(match.group(1), 0), int(match.group(2)) + 1)
    for i, (name, match) in enumerate(zip(scopes, matches)):
        if match:
            votes[i] = _layer_gpu(int(match.group(2)), n_layers[match.group(1)], n_gpus)
            continue
        top = name.split("/", 1)[0]
        if top in ("attention", "softmax", "loss"):
            votes[i] = last
        elif top in ("inputs", "embedding") or re.match(r"^(encoder|decoder)/embedding(/|$)", name):
            votes[i] = 0  # with the first LSTM layer (lstm_0 -> GPU 0)
    return votes


def _balanced_chunks(weights: np.ndarray, n_parts: int) -> np.ndarray:
    """Part (0..n_parts-1, non-decreasing) of each item: contiguous chunks minimising the heaviest.

    With fewer items than parts each item gets its own part; the last item always gets the last part.
    """
    n = len(weights)
    if n <= n_parts:
        part = np.arange(n, dtype=np.int64)
        if n:
            part[-1] = n_parts - 1
        return part
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(weights, dtype=np.float64))])
    inf = float("inf")
    # best[p][i]: the smallest max-chunk of splitting items[:i] into p non-empty chunks.
    best = np.full((n_parts + 1, n + 1), inf)
    cut = np.zeros((n_parts + 1, n + 1), dtype=np.int64)
    best[0][0] = 0.0
    for p in range(1, n_parts + 1):
        for i in range(p, n + 1):
            for j in range(p - 1, i):
                cost = max(best[p - 1][j], prefix[i] - prefix[j])
                if cost < best[p][i]:
                    best[p][i], cut[p][i] = cost, j
    part = np.empty(n, dtype=np.int64)
    i = n
    for p in range(n_parts, 0, -1):
        j = cut[p][i]
        part[j:i] = p - 1
        i = j
    return part


def _inception_votes(names: list[str], flops: np.ndarray, n_gpus: int) -> np.ndarray:
    blocks = benchmark_blocks("inception_v3")
    # Placement units: stem + first Mixed block, each later block, last Mixed block + Logits + loss.
    first_mixed = blocks.index(_STEM_END) + 1
    units: list[tuple[str, ...]] = [blocks[:first_mixed + 1]]
    units += [(b,) for b in blocks[first_mixed + 1:] if b not in _HEAD]
    units[-1] = units[-1] + tuple(b for b in blocks if b in _HEAD)
    unit_of = {block: u for u, members in enumerate(units) for block in members}
    op_unit = np.array([unit_of.get(forward_scope(n).split("/", 1)[0], -1) for n in names], dtype=np.int64)
    tops = {forward_scope(n).split("/", 1)[0] for n in names}
    missing = [b for b in blocks if b.startswith(("Mixed_", "Logits")) and b not in tops]
    if missing:
        raise NoExpertPlacementError(f"this graph has no op under the Inception-V3 block scope(s) "
                                     f"{', '.join(missing)}; it is not the inception_v3 benchmark")
    weights = np.bincount(op_unit[op_unit >= 0], weights=np.asarray(flops, dtype=np.float64)[op_unit >= 0],
                          minlength=len(units))
    part = _balanced_chunks(weights, n_gpus)
    return np.where(op_unit >= 0, part[np.maximum(op_unit, 0)], -1)


def _dlrm_votes(names: list[str], held: np.ndarray, n_gpus: int) -> np.ndarray:
    """GPU ordinal each op votes for (DLRM rules): table k's ops for the GPU the greedy sharding gives it (its
    variable's bytes, ``held``, decide), the dense part's for GPU 0."""
    scopes = [forward_scope(full) for full in names]
    table_of = np.array([int(m.group(1)) if (m := _TABLE.match(name)) else -1 for name in scopes], dtype=np.int64)
    if not (table_of >= 0).any():
        raise NoExpertPlacementError("no op of this graph is under a table scope (table_<k>); it is not the dlrm "
                                     "benchmark")
    table_bytes = np.bincount(table_of[table_of >= 0], weights=np.asarray(held, dtype=np.float64)[table_of >= 0])
    table_gpu = np.zeros(len(table_bytes), dtype=np.int64)
    sharded = np.zeros(n_gpus)
    for k in np.argsort(-table_bytes, kind="stable"):
        table_gpu[k] = int(np.argmin(sharded))
        sharded[table_gpu[k]] += table_bytes[k]
    dense = np.array([name.split("/", 1)[0] in _DLRM_DENSE for name in scopes])
    return np.where(table_of >= 0, table_gpu[np.maximum(table_of, 0)], np.where(dense, 0, -1))


def block_gpus(problem: Problem) -> dict[str, int]:
    """Inception-V3 only: the GPU ordinal each block of ``benchmark_blocks("inception_v3")`` goes to
    (before group voting)."""
    blocks = benchmark_blocks("inception_v3")
    graph, n_gpus = problem.graph, len(_gpus(problem))
    votes = _inception_votes(list(graph.op_names), graph.flops, n_gpus)
    tops = np.array([forward_scope(n).split("/", 1)[0] for n in graph.op_names])
    return {b: int(votes[tops == b][0]) for b in blocks if (tops == b).any()}


def _gpus(problem: Problem) -> list[int]:
    gpus = [d for d, device in enumerate(problem.cluster.devices) if device.kind == "GPU"]
    if not gpus:
        raise NoExpertPlacementError(f"cluster {problem.cluster.name!r} has no GPU; the expert placement "
                                     "spreads the model over GPUs")
    return gpus


def gradient_ops(names) -> np.ndarray:
    """Bool per op: under ``gradients/`` or ``gradients_<n>/`` (made by ``tf.gradients``; not the optimizer's
    updates)."""
    return np.array([bool(_GRADIENTS.match(str(n))) for n in names], dtype=bool)


def _gradient_groups(graph) -> np.ndarray:
    """Bool per group: TF1's placer would put it on the first GPU (``gradients="first_gpu"``): most of its ops are
    gradient ops, and it holds no variable and no update (those stay with their variable)."""
    names = list(graph.op_names)
    group = np.asarray(graph.group, dtype=np.int64)
    gradient = gradient_ops(names)
    kept = np.array([bool(_UPDATE.match(n)) for n in names]) | (np.asarray(graph.persistent_bytes) > 0)
    n_gradient = np.bincount(group, weights=gradient, minlength=graph.n_groups)
    n_ops = np.bincount(group, minlength=graph.n_groups)
    holds_kept = np.bincount(group, weights=kept, minlength=graph.n_groups) > 0
    return (2 * n_gradient > n_ops) & ~holds_kept


def tf1_op_devices(problem: Problem) -> np.ndarray:
    """The device of every op as TF1's placer would put it (not per group): each gradient op on the first GPU, or
    on the first CPU when it has no GPU kernel; every other op where ``expert(problem)`` puts its group. Compare
    ``expert(problem, gradients="first_gpu")[graph.group]`` with it to count the ops that follow a group of the
    other kind."""
    graph, cluster = problem.graph, problem.cluster
    devices = expert(problem)[np.asarray(graph.group, dtype=np.int64)]
    first_cpu = next((d for d, device in enumerate(cluster.devices) if device.kind == "CPU"), _gpus(problem)[0])
    gpu_kernel = (np.asarray(graph.device_mask) >> DEVICE_KINDS.index("GPU")) & 1 > 0
    gradient = gradient_ops(graph.op_names)
    return np.where(gradient, np.where(gpu_kernel, _gpus(problem)[0], first_cpu), devices)


def expert(problem: Problem, *, gradients: Gradients = "colocated") -> np.ndarray:
    """The expert placement of ``problem`` (see the module docstring for the rules); ``gradients="first_gpu"``: the
    gradient groups on the first GPU, as TF 1.x placed them by default."""
    if gradients not in GRADIENTS:
        raise ValueError(f"gradients={gradients!r}; expected one of {', '.join(map(repr, GRADIENTS))}")
    model = _model(problem.benchmark)
    gpus = _gpus(problem)
    graph, cluster = problem.graph, problem.cluster
    names = list(graph.op_names)
    if model == "inception_v3":
        votes = _inception_votes(names, graph.flops, len(gpus))
    elif model == "dlrm":
        votes = _dlrm_votes(names, graph.persistent_bytes, len(gpus))
    else:
        votes = _lstm_votes(names, len(gpus))
        if not any(_LSTM.match(forward_scope(n)) for n in names):
            raise NoExpertPlacementError(f"no op of this graph is under an LSTM layer scope (lstm_<k>); "
                                         f"it is not the {model} benchmark")

    n_groups, n_gpus = graph.n_groups, len(gpus)
    group = np.asarray(graph.group, dtype=np.int64)
    voting = votes >= 0
    flops = np.asarray(graph.flops, dtype=np.float64)
    by_flops = np.zeros((n_groups, n_gpus))
    np.add.at(by_flops, (group[voting], votes[voting]), flops[voting])
    by_count = np.zeros((n_groups, n_gpus))
    np.add.at(by_count, (group[voting], votes[voting]), 1.0)
    score = np.where(by_flops.sum(axis=1, keepdims=True) > 0, by_flops, by_count)
    ordinal = np.where(score.sum(axis=1) > 0, score.argmax(axis=1), -1)

    # Groups without a vote: the GPU their placed neighbours exchange the most bytes with.
    if (ordinal < 0).any() and graph.n_edges:
        gs, gd = group[graph.edge_src], group[graph.edge_dst]
        weight = np.asarray(graph.edge_bytes, dtype=np.float64) + 1.0  # control edges count a little
        cross = gs != gd
        gs, gd, weight = gs[cross], gd[cross], weight[cross]
        while (ordinal < 0).any():
            pull = np.zeros((n_groups, n_gpus))
            for a, b in ((gs, gd), (gd, gs)):
                known = (ordinal[b] >= 0) & (ordinal[a] < 0)
                np.add.at(pull, (a[known], ordinal[b][known]), weight[known])
            newly = (ordinal < 0) & (pull.sum(axis=1) > 0)
            if not newly.any():
                break
            ordinal[newly] = pull[newly].argmax(axis=1)
    ordinal[ordinal < 0] = 0
    if gradients == "first_gpu":
        ordinal[_gradient_groups(graph)] = 0

    placement = np.asarray(gpus, dtype=np.int64)[ordinal]
    allowed = problem.allowed
    bad = ~allowed[np.arange(n_groups), placement]
    if bad.any():
        cpus = np.array([device.kind == "CPU" for device in cluster.devices])
        for g in np.flatnonzero(bad):
            options = np.flatnonzero(allowed[g] & cpus)
            if not len(options):
                options = np.flatnonzero(allowed[g])
            placement[g] = options[0] if len(options) else placement[g]
    return placement
