"""Runtime of a placement from TensorFlow's grappler VirtualCluster (analytical costs + virtual scheduler).

Every op of the GraphDef is pinned to the TF device of its group's cluster device; a grappler
virtual cluster with one ``NamedDevice`` per cluster device (named by ``Device.tf_device``) then
runs ``MeasureCosts``: grappler's OpLevelCostEstimator prices each op from its shapes and the
device's peak FLOP/s and memory bandwidth, and its VirtualScheduler plays the step (one op at a
time per device, ``_Send``/``_Recv`` pairs inserted across devices). Its ``run_time`` (seconds)
is the step time. Grappler truncates every op's time to whole microseconds, so the devices are
probed ``costs.SLOWDOWN`` times slower and the run time scaled back (every cost grappler assigns
is linear in 1/FLOP/s and 1/bandwidth), which keeps small graphs from rounding to zero and keeps
the result consistent with :func:`placement_env.costs.analytical_costs`.

Limits: grappler prices cross-device copies from the devices' own memory bandwidth, not from
the cluster's link matrix, and has no per-op launch overhead. Memory: grappler itself refuses a
step whose peak exceeds a device's ``memory_size`` (ResourceExhausted) -> ``failure="oom"``;
``peak_bytes`` comes from ``DeterminePeakMemoryUsage`` (a second scheduler pass).

Caching: both the prepared item of a graph (its parsed MetaGraphDef and the op index of each node,
owned by the graph) and the virtual cluster of a cluster (keyed by the cluster's value, as equal
clusters give identical virtual clusters) live in :data:`placement_env.derived.DERIVED`. A virtual
cluster holds a TF C++ cluster that must be shut down: one that DERIVED drops is shut down by its
own ``__del__`` once unreferenced, and the ones still cached at exit are shut down by an atexit
hook (through ``DERIVED.values``) before TF's bindings are torn down. The cached MetaGraphDef is
mutated by every call (each node's device), so calls take a module lock.
"""
from __future__ import annotations

import atexit
import re
import threading
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..costs import SLOWDOWN, device_properties, metagraph_for
from ..derived import DERIVED
from ..opgraph import OpGraph
from ..placement import Measurement, check_placement, kernel_violations, op_devices

_LOCK = threading.Lock()  # the cached MetaGraphDefs are mutated per call
PREPARED_KIND = "grappler_item"  # DERIVED kind: (MetaGraphDef, op index per node) of a graph
CLUSTER_KIND = "grappler_cluster"  # DERIVED kind: grappler virtual cluster of a cluster


def _prepared(graph: OpGraph) -> tuple[Any, np.ndarray]:
    """The parsed MetaGraphDef of ``graph`` and, per GraphDef node, its op index (-1: not a step op)."""

    def build() -> tuple[Any, np.ndarray]:
        metagraph = metagraph_for(graph)
        index = graph.index_by_name
        node_ops = np.array([index.get(node.name, -1) for node in metagraph.graph_def.node], dtype=np.int64)
        return metagraph, node_ops

    return DERIVED.get(PREPARED_KIND, graph, build=build)


@atexit.register
def _shutdown_clusters() -> None:
    """Shut the cached virtual clusters down before TF's bindings are torn down at exit."""
    for virtual in DERIVED.values(CLUSTER_KIND):
        virtual.Shutdown()
    DERIVED.clear(CLUSTER_KIND)


def _virtual_cluster(cluster: Cluster) -> Any:
    """The grappler virtual cluster with one NamedDevice per device of ``cluster`` (probed SLOWDOWN times slower)."""

    def build() -> Any:
        from tensorflow.core.protobuf import device_properties_pb2
        from tensorflow.python.grappler import cluster as gcluster

        devices = [device_properties_pb2.NamedDevice(name=d.tf_device, properties=device_properties(d, None, SLOWDOWN))
                   for d in cluster.devices]
        return gcluster.Cluster(devices=devices)

    return DERIVED.get(CLUSTER_KIND, key=cluster, build=build)


def _peaks(virtual: Any, tf_item: Any, cluster: Cluster) -> np.ndarray:
    from tensorflow.python.grappler import _pywrap_tf_cluster as tf_cluster

    usage = tf_cluster.TF_DeterminePeakMemoryUsage(tf_item, virtual.tf_cluster)
    return np.array([max(0, int(usage.get(d.tf_device, (0,))[0])) for d in cluster.devices], dtype=np.int64)


def grappler_runtime(graph: OpGraph, cluster: Cluster, placement: Any, *, peak_memory: bool = True) -> Measurement:
    """Step time of ``placement`` (one device index per group) by grappler's VirtualCluster.

    Failures come back as a failed Measurement: "no_kernel" (a group on a device kind one of its
    ops has no kernel for), "oom" (grappler's peak exceeds a device's memory), "error" (grappler
    could not build or schedule the graph). ``peak_memory=False`` skips the peak-memory pass
    (about a third of the time) and leaves ``peak_bytes`` empty on success.
    """
    from tensorflow.python.framework import errors
    from tensorflow.python.grappler import _pywrap_tf_cluster as tf_cluster
    from tensorflow.python.grappler import _pywrap_tf_item as tf_item_lib

    placement = check_placement(graph, cluster, placement)
    common = dict(placement=placement, runtime="grappler")
    bad = kernel_violations(graph, cluster, placement)
    if bad.size:
        group = int(bad[0])
        ops = graph.ops_of_group(group)
        kind = cluster.devices[int(placement[group])].kind
        culprit = next((graph.op_names[i] for i in ops if not (graph.device_mask[i] >> cluster.kinds[placement[group]]) & 1),
                       graph.op_names[ops[0]])
        return Measurement(runtime_s=float("nan"), ok=False, failure="no_kernel",
                           message=f"{bad.size} group(s) on a device kind without kernels, e.g. group {group} "
                                   f"(op {culprit!r}) on {kind}", **common)
    devices = op_devices(graph, placement)
    names = [d.tf_device for d in cluster.devices]
    # Nodes outside the step (initialisers) go with device 0; they are not in the train op's fan-in.
    with _LOCK:
        metagraph, node_ops = _prepared(graph)
        node_devices = np.where(node_ops >= 0, devices[np.maximum(node_ops, 0)], 0).tolist()
        for node, device in zip(metagraph.graph_def.node, node_devices):
            node.device = names[device]
        serialized = metagraph.SerializeToString()
        virtual = _virtual_cluster(cluster)
        try:
            item = tf_item_lib.TF_NewItem(serialized, True, False)
        except (errors.OpError, ValueError) as error:
            return Measurement(runtime_s=float("nan"), ok=False, failure="error",
                               message=f"grappler could not build the item: {error}", **common)
        try:
            _, run_time, _ = tf_cluster.TF_MeasureCosts(item, virtual.tf_cluster, False)
        except errors.ResourceExhaustedError as error:
            message = str(error).strip()
            match = re.search(r"requires (\d+) bytes of memory on device (\S+) to run", message)
            peaks = np.zeros(cluster.n_devices, dtype=np.int64)  # grappler stops at the first device over
            if match and match.group(2) in names:
                peaks[names.index(match.group(2))] = int(match.group(1))
            return Measurement(runtime_s=float("nan"), ok=False, failure="oom",
                               message=f"out of memory ({match.group(2) if match else 'a device'}): {message}",
                               peak_bytes=peaks, **common)
        except errors.OpError as error:
            return Measurement(runtime_s=float("nan"), ok=False, failure="error",
                               message=f"grappler could not schedule the graph: {error}", **common)
        peaks = _peaks(virtual, item, cluster) if peak_memory else np.zeros(0, dtype=np.int64)
    over = np.flatnonzero(peaks > cluster.memory_bytes) if peaks.size else np.zeros(0, dtype=np.int64)
    if over.size:
        d = int(over[0])
        return Measurement(runtime_s=float("nan"), ok=False, failure="oom",
                           message=f"{cluster.devices[d].name} needs {peaks[d]} bytes, has {cluster.memory_bytes[d]}",
                           peak_bytes=peaks, **common)
    return Measurement(runtime_s=float(run_time) / SLOWDOWN, ok=True, peak_bytes=peaks,
                       extra={"grappler_slowdown": SLOWDOWN}, **common)
