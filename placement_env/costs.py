"""Per-op compute time on every device of a cluster, from TensorFlow's own analytical cost model.

``analytical_costs`` asks grappler (TF's graph optimiser) for the cost of each op: for every
distinct device *type* of the cluster (same kind, peak FLOP/s and memory bandwidth) it builds a
virtual grappler device with the same peak and bandwidth, pins the whole graph to it and runs
``VirtualCluster.MeasureCosts``. Grappler's ``OpLevelCostEstimator`` derives each op's cost from
its type and input/output shapes (FLOPs / device GFLOP/s + bytes touched / device GB/s); no
kernel runs, so GPU costs come out of a CPU-only TF build just as well. Ops grappler does not
report (outside the train op's fan-in) cost 0 s and are counted in ``OpCosts.n_unreported``.

How the virtual device's peak is set (``tensorflow/core/grappler/costs/op_level_cost_estimator.cc``,
``GetDeviceInfo``, checked by experiment on TF 2.21):
  - CPU: GFLOP/s = ``num_cores * frequency[MHz] * 1e-3``;
  - GPU with ``environment["architecture"] = "6"``: GFLOP/s = ``num_cores * frequency[MHz] * 1e-3 * 64 * 2``;
  - both: memory GB/s = ``bandwidth[KB/s] / 1e6``.
Grappler's per-op ``compute_cost`` (int64, nanoseconds, but truncated to whole microseconds) =
``compute_time + memory_time`` (no compute/memory overlap). ``OpCosts.seconds`` holds that sum,
measured on a device ``SLOWDOWN`` times slower and scaled back (sub-microsecond resolution).

Results are cached per (graph, device type) under ``cache_dir() / "costs-<key>.npz"``.

What grappler leaves out: a resource variable reaches the ops that use it as a handle of 0 bytes, so a
variable update (``ResourceApply*``) is costed by its arithmetic and its gradient alone, and a dense
embedding gradient (``UnsortedSegmentSum``) and a sparse update (``ResourceScatterAdd``) by their arithmetic.
:func:`update_traffic_bytes` counts the bytes each of them moves, from what its kernel reads and writes on the
device's kind; on a cluster with ``update_traffic`` an op is charged at least those bytes at its device's achieved
bandwidth (plus its overhead), the roofline's memory side.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cache import cache_dir
from .cluster import Cluster, Device
from .opgraph import DEVICE_KINDS, OpGraph
from .quiet_tf import import_tensorflow_quietly, tensorflow_version

COST_MODEL_VERSION = 1  # bump when the way costs are derived changes (invalidates the cache)
GPU_ARCHITECTURE = "6"  # grappler: 64 cores per multiprocessor for compute capability >= 6
_GPU_FLOPS_PER_CORE_CYCLE = 64 * 2  # cores per multiprocessor x FLOPs per multiply-add
ANALYTICAL_SOURCE = "grappler-analytical"  # how OpCosts.source of analytical_costs begins
UNLIMITED_MEMORY = 2**62  # memory_size for cost probing, so a big graph on one device never "OOMs"

UPDATE_PREFIX = "ResourceApply"  # dense variable updates: ResourceApplyGradientDescent, ...Momentum, ...Adam, ...
SEGMENT_SUM = "UnsortedSegmentSum"  # a dense embedding gradient
SCATTER = "ResourceScatterAdd"  # a sparse update of a variable's rows (plain SGD on an embedding table)
# Passes of a variable's size that a dense update's kernel makes beyond the one read of each data input and the one
# read and one write of each variable and slot (update_traffic_bytes), per (op type, device kind), from the kernels
# (TF 2.x, tensorflow/core/kernels/training_ops.cc for CPU, training_ops_gpu.cu.cc for GPU). Other updates
# (Adagrad, RMSProp, ...) are charged the generic count, a floor of what their kernels move.
UPDATE_EXTRA_PASSES = {
    # ApplyMomentum<CPUDevice> and <GPUDevice>: `accum = accum * momentum + grad`, then `var -= accum * lr`, two
    # expressions, so the accumulator is read again: 6 passes, not 5. (With use_nesterov the second expression reads
    # the gradient too, a 7th, not counted: the benchmarks' MomentumOptimizer does not use it.)
    ("ResourceApplyMomentum", "CPU"): 1, ("ResourceApplyMomentum", "GPU"): 1,
    # ApplyKerasMomentum<CPUDevice> and <GPUDevice>: the same two expressions (`accum = accum * momentum - grad * lr`,
    # then `var += accum`).
    ("ResourceApplyKerasMomentum", "CPU"): 1, ("ResourceApplyKerasMomentum", "GPU"): 1,
    # ApplyAdamNonCuda (CPU): a parallelFor whose every shard runs three expressions over its range, m from the
    # gradient and m, v from the gradient and v, then var from var, m and v: the gradient, m and v are read twice,
    # 10 passes, not 7, once a shard outgrows the caches (Eigen's shards are at least 1/(4 x threads) of the
    # variable; with one thread the whole variable is one shard). The GPU's ApplyAdamKernel reads var, m, v and the
    # gradient once per element and writes var, m and v once: no extra pass.
    ("ResourceApplyAdam", "CPU"): 3,
}

# Counters tests and users can read: how many grappler runs and cache hits this process made.
STATS = {"grappler_runs": 0, "cache_hits": 0, "cache_corrupt": 0}


@dataclass(frozen=True, eq=False)
class OpCosts:
    """``seconds[i, d]``: compute time of op ``i`` on device ``d`` of the cluster (read-only).

    ``n_unreported``: ops the cost model gave no cost for (set to 0 s), per device type at most.
    ``source`` says where the numbers come from.
    """

    seconds: np.ndarray
    source: str
    n_unreported: int = 0

    def __post_init__(self) -> None:
        array = np.array(self.seconds, dtype=np.float64)
        if array.ndim != 2:
            raise ValueError(f"OpCosts.seconds must be 2-D [n_ops, n_devices], got shape {array.shape}")
        array.setflags(write=False)
        object.__setattr__(self, "seconds", array)

    @property
    def n_ops(self) -> int:
        return self.seconds.shape[0]

    @property
    def n_devices(self) -> int:
        return self.seconds.shape[1]

    @property
    def analytical(self) -> bool:
        """Whether these are grappler's analytical costs (which include each device's ``op_overhead_s``)."""
        return self.source.startswith(ANALYTICAL_SOURCE)


# ---------------------------------------------------------------------------------------------
# Grappler device properties


SLOWDOWN = 10_000  # grappler reports op times in whole microseconds: probe a device this much slower


def achieved_rates(device: Device) -> tuple[float, float]:
    """(FLOP/s, memory bytes/s) the device's kernels reach: its peak times its efficiencies."""
    return device.peak_flops * device.compute_efficiency, device.memory_bandwidth * device.memory_efficiency


def device_property_fields(device: Device, memory_bytes: int | None = None, slowdown: float = 1.0) -> dict[str, Any]:
    """The fields of :func:`device_properties` as plain values, read without importing TensorFlow (the cost cache's
    key is made of them)."""
    memory = int(device.memory_bytes if memory_bytes is None else memory_bytes)
    flops, bandwidth = achieved_rates(device)
    bandwidth_kb_s = max(1, int(round(bandwidth / 1e3 / slowdown)))
    if device.kind == "CPU":
        cores = max(1, int(device.concurrency))
        frequency_mhz = max(1, int(round(flops / slowdown / (cores * 1e6))))
        return {"type": "CPU", "num_cores": cores, "frequency": frequency_mhz, "bandwidth": bandwidth_kb_s,
                "memory_size": memory}
    # One "multiprocessor" at a frequency that gives the peak: grappler only uses the product.
    frequency_mhz = max(1, int(round(flops / slowdown / (_GPU_FLOPS_PER_CORE_CYCLE * 1e6))))
    return {"type": "GPU", "num_cores": 1, "frequency": frequency_mhz, "bandwidth": bandwidth_kb_s,
            "memory_size": memory, "environment": {"architecture": GPU_ARCHITECTURE}}


def device_properties(device: Device, memory_bytes: int | None = None, slowdown: float = 1.0) -> Any:
    """A grappler ``DeviceProperties`` whose analytical peak and bandwidth are ``device``'s achieved
    rates (:func:`achieved_rates`) / ``slowdown``.

    Grappler truncates each op's time to whole microseconds; a device ``slowdown`` times slower
    stretches every op by that factor (times are FLOPs / GFLOP/s + bytes / GB/s, both linear), so
    dividing back gives sub-microsecond resolution. Integer rounding of the fields is undone by
    :func:`grappler_rates`.
    """
    from tensorflow.core.protobuf import device_properties_pb2

    return device_properties_pb2.DeviceProperties(**device_property_fields(device, memory_bytes, slowdown))


def grappler_rates(properties: Any) -> tuple[float, float]:
    """(FLOP/s, bytes/s) grappler's OpLevelCostEstimator derives from ``properties``."""
    flops = properties.num_cores * properties.frequency * 1e6
    if properties.type == "GPU":
        flops *= _GPU_FLOPS_PER_CORE_CYCLE
    return float(flops), float(properties.bandwidth) * 1e3


def op_type_key(device: Device) -> tuple[str, float, float, int]:
    """What decides a device's op costs: (kind, achieved FLOP/s, achieved memory bandwidth, concurrency).

    Devices with equal keys run every op in the same time, so op costs are computed (or measured)
    once per key and shared by all its devices.
    """
    flops, bandwidth = achieved_rates(device)
    return (device.kind, float(flops), float(bandwidth), int(device.concurrency))


def _cache_key(graph: OpGraph, properties: dict[str, Any]) -> str:
    """The cost cache's key of ``graph`` on a device of ``properties`` (:func:`device_property_fields`)."""
    digest = hashlib.sha256()
    digest.update(graph.graph_def)
    digest.update(graph.train_op.encode())
    digest.update("\0".join(graph.op_names.tolist()).encode())
    digest.update(json.dumps({"properties": properties, "tf": tensorflow_version(), "v": COST_MODEL_VERSION},
                             sort_keys=True).encode())
    return digest.hexdigest()[:20]


def metagraph_for(graph: OpGraph) -> Any:
    """A MetaGraphDef of ``graph`` with its train op in the ``train_op`` collection (grappler's fetch)."""
    from tensorflow.core.protobuf import meta_graph_pb2

    if not graph.graph_def:
        raise ValueError(f"graph {graph.name!r} carries no GraphDef; grappler needs one")
    metagraph = meta_graph_pb2.MetaGraphDef()
    metagraph.graph_def.ParseFromString(graph.graph_def)
    train_op = graph.train_op.split(":")[0]
    metagraph.collection_def["train_op"].node_list.value.append(train_op)
    return metagraph


def _measure_one_type(graph: OpGraph, device: Device) -> tuple[np.ndarray, int]:
    """Seconds per op with the whole graph on one virtual device like ``device``; unreported count."""
    import_tensorflow_quietly()  # a graph loaded from a file may reach here before anything imported TF
    from tensorflow.core.protobuf import device_properties_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    name = f"/job:localhost/replica:0/task:0/device:{device.kind}:0"
    metagraph = metagraph_for(graph)
    for node in metagraph.graph_def.node:
        node.device = name
    properties = device_properties(device, UNLIMITED_MEMORY, SLOWDOWN)
    probe_flops, probe_bandwidth = grappler_rates(properties)
    flops, bandwidth = achieved_rates(device)
    compute_scale = probe_flops / flops  # probe time x this = time on the real device
    memory_scale = probe_bandwidth / bandwidth
    virtual = gcluster.Cluster(devices=[device_properties_pb2.NamedDevice(name=name, properties=properties)])
    try:
        item = gitem.Item(metagraph, ignore_colocation=True, ignore_user_placement=False)
        op_perfs, _, _ = virtual.MeasureCosts(item)
    finally:
        virtual.Shutdown()
    STATS["grappler_runs"] += 1
    seconds = np.zeros(graph.n_ops)
    reported = np.zeros(graph.n_ops, dtype=bool)
    index = graph.index_by_name
    for perf in op_perfs:
        i = index.get(perf.node)
        if i is None:
            continue  # a node grappler added, or one outside the step (initialisers)
        # compute_time / memory_time are in ns (whole us); compute_cost = their sum (no overlap).
        # An op listed twice adds up.
        seconds[i] += (perf.compute_time * compute_scale + perf.memory_time * memory_scale) * 1e-9
        reported[i] = True
    return seconds, int(graph.n_ops - reported.sum())


def _load_cached(path: os.PathLike, n_ops: int) -> tuple[np.ndarray, int] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            seconds = np.asarray(data["seconds"], dtype=np.float64)
            unreported = int(data["n_unreported"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError):
        STATS["cache_corrupt"] += 1
        return None
    if seconds.shape != (n_ops,) or not np.all(np.isfinite(seconds)) or np.any(seconds < 0):
        STATS["cache_corrupt"] += 1
        return None
    return seconds, unreported


def _save_cached(path, seconds: np.ndarray, unreported: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        np.savez(handle, seconds=seconds, n_unreported=np.int64(unreported))
    os.replace(tmp, path)


def update_traffic_bytes(graph: OpGraph, kind: str) -> np.ndarray:
    """Per op, the bytes of memory traffic a variable update, sparse update or dense embedding gradient moves on a
    device of ``kind`` (one of ``DEVICE_KINDS``; 0 for every other op): a dense update reads its data inputs (the
    gradient and scalars), reads and writes each variable whose handle it takes (the variable and its optimiser
    slots) and makes its kernel's extra passes (:data:`UPDATE_EXTRA_PASSES`): 3x the variable's bytes for plain
    SGD, 6x with momentum, 7x for Adam on a GPU and 10x on a CPU; a sparse update reads its inputs and reads and
    writes the rows it updates (as many bytes as its largest input); a segment sum reads its inputs and writes its
    output. A variable is a data input of 0 bytes from an op that holds persistent bytes (a ``VarHandleOp``)."""
    if kind not in DEVICE_KINDS:
        raise ValueError(f"kind = {kind!r}: must be one of {', '.join(DEVICE_KINDS)}")
    n = graph.n_ops
    src, dst = np.asarray(graph.edge_src), np.asarray(graph.edge_dst)
    edge_bytes = np.asarray(graph.edge_bytes, np.int64)
    persistent = np.asarray(graph.persistent_bytes, np.int64)
    data = np.asarray(graph.edge_src_output) >= 0
    variable = data & (edge_bytes == 0) & (persistent[src] > 0)
    read_edges = data & ~variable
    read = np.bincount(dst[read_edges], weights=edge_bytes[read_edges], minlength=n).astype(np.int64)
    variables = np.bincount(dst[variable], weights=persistent[src[variable]], minlength=n).astype(np.int64)
    n_variables = np.bincount(dst[variable], minlength=n)
    largest = np.zeros(n, np.int64)
    np.maximum.at(largest, dst[read_edges], edge_bytes[read_edges])
    cumulative = np.concatenate([[0], np.cumsum(np.asarray(graph.output_bytes, np.int64))])
    output_ptr = np.asarray(graph.output_ptr)
    written = cumulative[output_ptr[1:]] - cumulative[output_ptr[:-1]]
    types = np.asarray(graph.op_types, dtype=str)
    out = np.zeros(n, np.int64)
    update = np.char.startswith(types, UPDATE_PREFIX)
    out[update] = read[update] + 2 * variables[update]
    for (op_type, op_kind), passes in UPDATE_EXTRA_PASSES.items():
        if op_kind == kind:
            extra = (types == op_type) & (n_variables > 0)
            out[extra] += passes * (variables[extra] // n_variables[extra])  # the variable and its slots: one size
    scatter = types == SCATTER
    out[scatter] = read[scatter] + 2 * largest[scatter]
    segment_sum = types == SEGMENT_SUM
    out[segment_sum] = read[segment_sum] + written[segment_sum]
    return out


def analytical_costs(graph: OpGraph, cluster: Cluster, *, use_cache: bool = True) -> OpCosts:
    """Compute time of every op on every device of ``cluster``, from grappler's analytical model.

    One grappler run per distinct device type, cached on disk (``costs-<key>.npz`` in
    ``cache_dir()``, keyed by the GraphDef, op order, the grappler device properties, the TF
    version and ``COST_MODEL_VERSION``); a corrupt cache file is recomputed and overwritten.

    Each device's ``op_overhead_s`` is added to every op (grappler models no per-op overhead).
    Ops without a kernel for a device kind still get the analytical cost (grappler works from
    shapes and types, not kernels); such placements fail at run time, not here. On a cluster with
    ``update_traffic``, an op takes at least its :func:`update_traffic_bytes` for the device's kind at the
    device's achieved bandwidth plus its overhead.
    """

    columns: dict[tuple, tuple[np.ndarray, int]] = {}
    for device in cluster.devices:
        key = op_type_key(device)
        if key in columns:
            continue
        path = cache_dir() / f"costs-{_cache_key(graph, device_property_fields(device, UNLIMITED_MEMORY, SLOWDOWN))}.npz"
        cached = _load_cached(path, graph.n_ops) if use_cache and path.exists() else None
        if cached is not None:
            STATS["cache_hits"] += 1
            columns[key] = cached
            continue
        columns[key] = _measure_one_type(graph, device)
        if use_cache:
            _save_cached(path, *columns[key])
    seconds = np.stack([columns[op_type_key(d)][0] for d in cluster.devices], axis=1) + cluster.op_overhead_s
    if cluster.update_traffic:
        traffic_by_kind = {kind: update_traffic_bytes(graph, kind) for kind in {d.kind for d in cluster.devices}}
        traffic = np.stack([traffic_by_kind[d.kind] / achieved_rates(d)[1] for d in cluster.devices], axis=1)
        traffic += cluster.op_overhead_s
        seconds = np.maximum(seconds, traffic)
    unreported = max((u for _, u in columns.values()), default=0)
    return OpCosts(seconds=seconds, source=f"{ANALYTICAL_SOURCE} (TF {tensorflow_version()})", n_unreported=unreported)


# ---------------------------------------------------------------------------------------------
# Lower bound on the step time


def critical_path(graph: OpGraph, op_seconds: np.ndarray) -> float:
    """Longest path through the graph (data and control edges) with op ``i`` taking ``op_seconds[i]``."""
    n = graph.n_ops
    if n == 0:
        return 0.0
    finish = np.zeros(n)
    order = np.argsort(graph.edge_dst, kind="stable")
    src, dst = graph.edge_src[order], graph.edge_dst[order]
    ptr = np.searchsorted(dst, np.arange(n + 1))
    cost = np.asarray(op_seconds, dtype=np.float64)
    src_list = src.tolist()
    for v in range(n):  # ops are in topological order
        lo, hi = ptr[v], ptr[v + 1]
        start = max(finish[src_list[lo:hi]]) if hi > lo else 0.0
        finish[v] = start + cost[v]
    return float(finish.max())


def work_bound(costs: OpCosts, iterations: int = 200) -> float:
    """A lower bound on the busiest device's load, whatever the assignment.

    For any weights ``a`` on the simplex, ``T >= sum_d a_d load_d >= sum_i min_d a_d c[i, d]``
    (each device runs one op at a time, as in grappler's scheduler). ``a = 1/D`` gives the
    classic ``sum_i min_d c[i, d] / D``; ``a_d`` proportional to device speed gives "total work
    over summed speeds". We start from both and improve ``a`` by exponentiated-gradient ascent
    (the bound is concave in ``a``; its maximum is the LP relaxation of the load balance); every
    iterate is a valid bound, the best is returned.
    """
    c = costs.seconds
    n, d = c.shape
    if n == 0 or d == 0:
        return 0.0

    def bound(a: np.ndarray) -> tuple[float, np.ndarray]:
        weighted = c * a
        arg = weighted.argmin(axis=1)
        grad = np.bincount(arg, weights=c[np.arange(n), arg], minlength=d)
        return float(weighted[np.arange(n), arg].sum()), grad

    total = c.sum(axis=0)
    speed = np.where(total > 0, 1.0 / np.maximum(total, 1e-300), 0.0)
    starts = [np.full(d, 1.0 / d)]
    if speed.sum() > 0:
        starts.append(speed / speed.sum())
    best = 0.0
    for a in starts:
        value, grad = bound(a)
        best = max(best, value)
        step = 1.0
        for _ in range(iterations // len(starts)):
            scale = grad / max(value, 1e-300)
            log_a = np.log(np.maximum(a, 1e-300)) + step * (scale - scale.max())
            a = np.exp(log_a - log_a.max())
            a /= a.sum()
            value, grad = bound(a)
            best = max(best, value)
            step *= 0.97
    return best


def lower_bound(graph: OpGraph, cluster: Cluster, costs: OpCosts | None = None) -> float:
    """A lower bound on the step time of any placement: ``max(critical path, work bound)``.

    Critical path: every op at its fastest device, no communication. Work bound: see
    :func:`work_bound` (at least total min-work / number of devices, and at least total work
    over summed device speeds when op costs scale with device speed). Memory is ignored.
    """
    if costs is None:
        costs = analytical_costs(graph, cluster)
    if costs.seconds.shape != (graph.n_ops, cluster.n_devices):
        raise ValueError(f"costs have shape {costs.seconds.shape}, expected ({graph.n_ops}, {cluster.n_devices})")
    if graph.n_ops == 0:
        return 0.0
    fastest = costs.seconds.min(axis=1)
    return max(critical_path(graph, fastest), work_bound(costs))
