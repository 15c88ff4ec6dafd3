"""Fast simulated runtime: an event-driven model of TF's executor on a cluster, compiled with numba.

Semantics (one training step):

* An op starts when every input (data and control edge) has arrived on its device and one of its
  device's ``concurrency`` lanes is free (GPU 1, CPU its inter-op threads). Ready ops start in
  topological (op index) order, or on a cluster with ``ready_fifo`` in the order they became ready (TF's
  executor runs its ready queue first in, first out); all events of one instant are processed before ops are started.
* ``op_seconds[i, d]`` is op i's time with the whole of device d. The ops running on a device share
  its throughput equally (processor sharing): with k of them active each progresses at rate
  min(1/k, ``op_share[d]``), so an op finishes once it has had ``op_seconds`` of whole-device
  service. ``op_share`` < 1 is a CPU whose one op keeps only some of its cores busy: a lone op then
  runs at that share of full speed. With ``concurrency`` 1 (GPUs) this is plain FIFO execution at
  full speed. Ops whose service ends in the same instant (to a relative 1e-12) finish together, in
  op index order. ``busy_s[d]`` is the time device d had at least one op active (the union of its
  ops' intervals).
* A data tensor crossing devices is sent once per (source output, destination device) along the
  route src -> dst of the cluster's interconnect (``Cluster.routes``: every directed link on the
  way; without a topology, a private link per ordered pair). After the cluster's fixed
  ``transfer_overhead_s`` it streams through every link of the route at once; each directed link
  serves the transfers that cross it FIFO, in the order they become ready (ties: source op index,
  then edge order), each for the link's latency + bytes / its bandwidth; the transfer ends when
  the last link has served it. So transfers that share a port or a switch uplink in the same
  direction queue, a fast link shared by slower transfers delays them only by its own short
  service, and opposite directions never interfere. Transfers overlap compute. A cross-device control edge costs the
  fixed overhead and the latency and occupies no link. Same-device edges are free.
* On a cluster with ``copy_streams`` a GPU performs the copies into and out of it on its copy streams, as TF's
  GPU device does (:func:`copy_stream_per_pair` says which stream and where TF's source says so): CPU -> GPU on
  the receiver's host-to-device stream, GPU -> CPU on the sender's device-to-host stream, GPU -> GPU on the
  sender's device-to-device stream; CPU -> CPU takes none. A stream performs one copy at a time, in the order
  they are put on it (when their producers end, as above): a copy begins at max(now, its stream free), spends
  the fixed overhead as work on the stream (the rendezvous and the copy's launch), then goes through its route
  as above, and the stream takes up its next copy when this one ends. So two copies into one GPU take their
  turns even over separate links, while a copy out of it overlaps them. Not modelled: in TF a copy also waits
  for the kernels enqueued so far on the compute stream of each GPU it involves (gpu_util.cc, ``ThenWaitFor``);
  the simulated GPU has no such queue (it runs its ops one at a time as the executor issues them).
* On a cluster with a ``host_transfer`` (CPU worker processes over loopback gRPC, see
  :mod:`placement_env.cluster.host_transfer`) a data transfer is also CPU work at both ends: a send
  task of ``per_tensor_s + bytes / bandwidth`` on a lane of its source device when its producer
  ends, then the route as above, then a receive task of the same length on a lane of its
  destination, after which its consumers have it. Tasks start before waiting ops (oldest transfer
  first); on a shared device a task takes the service that lasts that long alone. So a worker's
  sends queue behind each other and delay its next op, and a busy receiver decodes late. The
  schedule's transfer end is then the end of the receive task. Control edges pay no such task (TF sends
  an empty tensor for each, but modelled as a data tensor's cost it fitted the measured workers worse:
  docs/findings.md).
  A step with an op off device 0 (the session's master) takes the host transfer's ``remote_step_s`` longer.
* Memory per device: persistent bytes of the ops placed there for the whole step; each output is
  allocated on its producer's device from the producer's start until the end of its last consumer
  on that device and the end of its last outbound transfer (an output nobody consumes: until its
  producer ends); a received copy lives on the destination from the transfer's start until the
  end of its last consumer there. On a cluster with ``buffer_forwarding`` the output of a view or
  variable read (``BUFFER_FORWARDING_OPS``) allocates nothing: it shares its input's buffer, which
  then lives until the view's own consumers are done too. On a cluster with ``accumulate_sums``, a
  device whose peak passes 80% of its memory has its sums rewritten as grappler's memory optimizer
  does (an AddN or AccumulateNV2 of more than two data inputs becomes an accumulator): the step is
  simulated again with each such sum on that device allocating its output when its first input
  arrives and freeing every input as it arrives. A peak above ``memory_bytes`` gives failure "oom".

``SimulationPlan(graph, cluster, op_seconds)`` prepares the placement-independent arrays once;
``.run(placement)`` and ``.run_batch(placements)`` then cost only the compiled loop of
:mod:`placement_env.runtime.simulator_core`. ``simulate`` and ``simulate_batch`` are the
functional forms; ``plan_for`` keeps their plans in the derived-data cache, one per graph,
cluster and op_seconds value. ``schedule=True`` adds the step's :class:`~placement_env.schedule.Schedule`
(ops, transfers, memory over time) to the Measurement.
"""
from __future__ import annotations

from typing import Any, Hashable

import numba
import numpy as np

from ..cluster import Cluster
from ..derived import DERIVED
from ..errors import InvalidPlacementError
from ..opgraph import BUFFER_FORWARDING_OPS, OpGraph
from ..placement import Measurement, allowed_devices, check_placement
from ..schedule import Schedule
from .simulator_batch import DEVICE_INDEX, simulate_many, simulate_many_parallel, simulate_step_recorded

__all__ = ["SIMULATOR_VERSION", "VERSION_CHANGES", "SimulationPlan", "check_threads", "copy_stream_per_pair",
           "model_changed_since", "simulate", "simulate_batch", "simulate_compiled", "plan_for"]

# The simulated runtime's model version, recorded in every results row. Bump it whenever a
# change can alter a simulated runtime, peak or failure, so ``validate`` can tell a row made by
# another model from a row that does not reproduce, and say in VERSION_CHANGES which clusters the
# change concerns: the Cluster option it applies to, or None for every cluster.
SIMULATOR_VERSION = 4
VERSION_CHANGES = {
    2: None,  # sums accumulate on `accumulate_sums` clusters (and the model before it had no version)
    3: "copy_streams",  # GPUs copy on their copy streams, the per-tensor cost is work on the stream
    4: "ready_fifo",  # devices start their waiting ops in the order they became ready
}


def model_changed_since(version: str, cluster: Cluster) -> bool:
    """Whether a simulated row made by simulator ``version`` on ``cluster`` may differ from this version's (a
    later change concerns every cluster or an option ``cluster`` uses, or the version is unknown)."""
    try:
        made = int(version)
    except ValueError:
        return True
    if made > SIMULATOR_VERSION or made < min(VERSION_CHANGES) - 1:
        return True
    return any(option is None or bool(getattr(cluster, option)) for v, option in VERSION_CHANGES.items() if v > made)

SUM_OPS = ("AddN", "AccumulateNV2")

# A GPU's copy streams (TF's GPU device makes one stream group per GPU: a compute stream, then one stream
# each for host-to-device and device-to-host copies and, by default, one for device-to-device copies:
# gpu_device.cc, BaseGPUDevice::StreamGroupFactory::GetOrCreate; GPUOptions.experimental.
# num_dev_to_dev_copy_streams, 0 meaning 1). Copy stream s of device d is 3 * d + s.
_HOST_TO_DEVICE, _DEVICE_TO_HOST, _DEVICE_TO_DEVICE = 0, 1, 2


def copy_stream_per_pair(cluster: Cluster) -> np.ndarray:
    """Per ordered device pair ``src * n_devices + dst``: the copy stream that performs a transfer from src to
    dst, or -1 for none (between two CPUs); empty when the cluster has no ``copy_streams``.

    As TF chooses it (copy_tensor.cc, CopyTensor::ViaDMA, with the sender's and the receiver's device context;
    gpu_util.cc): GPU -> CPU on the sending GPU's device-to-host stream (CopyDeviceToHost -> the sender's
    context -> GPUUtil::CopyGPUTensorToCPU), CPU -> GPU on the receiving GPU's host-to-device stream
    (CopyHostToDevice -> the receiver's context -> GPUUtil::CopyCPUTensorToGPU), GPU -> GPU on the sending
    GPU's device-to-device stream (GPUUtil::DeviceToDeviceCopy, send_dev_context->device_to_device_stream(0):
    the intra-process rendezvous passes stream index 0, base_rendezvous_mgr.cc / rendezvous_mgr.cc,
    SameWorkerRecvDone). A GPU -> GPU copy is one copy whatever the GPUs' peer access: without it the CUDA
    driver stages the bytes through host memory within that one copy, over the route the topology gives.
    """
    if not cluster.copy_streams:
        return np.empty(0, np.int64)
    n = cluster.n_devices
    gpu = cluster.is_gpu
    stream = np.full(n * n, -1, np.int64)
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            if gpu[a]:
                stream[a * n + b] = 3 * a + (_DEVICE_TO_DEVICE if gpu[b] else _DEVICE_TO_HOST)
            elif gpu[b]:
                stream[a * n + b] = 3 * b + _HOST_TO_DEVICE
    return stream


class SimulationPlan:
    """Placement-independent arrays of (graph, cluster, op_seconds), ready for the compiled loop."""

    def __init__(self, graph: OpGraph, cluster: Cluster, op_seconds: Any) -> None:
        op_seconds = np.array(op_seconds, dtype=np.float64, order="C")  # a private copy
        if op_seconds.shape != (graph.n_ops, cluster.n_devices):
            raise ValueError(f"op_seconds has shape {op_seconds.shape}; expected (n_ops, n_devices) = "
                             f"({graph.n_ops}, {cluster.n_devices})")
        if graph.n_ops and (not np.all(np.isfinite(op_seconds)) or op_seconds.min() < 0):
            raise ValueError("op_seconds must be finite and >= 0")
        if cluster.n_devices > np.iinfo(DEVICE_INDEX).max:
            raise ValueError(f"cluster has {cluster.n_devices} devices; the simulator takes at most "
                             f"{np.iinfo(DEVICE_INDEX).max}")
        self.graph, self.cluster = graph, cluster
        self.op_seconds = op_seconds
        n = graph.n_ops
        # Indices of ops, edges and outputs as int32 where they fit: at 50,000 ops the compiled loop
        # waits on memory, and half-size index arrays make it ~20% faster (bytes stay int64).
        index = np.int32 if max(n, len(graph.edge_dst), len(graph.output_bytes)) < 2**31 - 1 else np.int64
        src = graph.edge_src.astype(np.int64)
        dst = graph.edge_dst.astype(index)
        self.group = graph.group.astype(index)
        self.out_ptr = np.searchsorted(src, np.arange(n + 1)).astype(index)
        if not np.all(np.diff(src) >= 0):  # edges are documented as sorted by source; be safe
            raise ValueError("OpGraph edges must be sorted by source op")
        self.edge_dst = dst
        slot = graph.edge_src_output.astype(np.int64)
        self.edge_gout = np.where(slot >= 0, graph.output_ptr[src] + slot, -1).astype(index)
        self.edge_bytes = graph.edge_bytes.astype(np.int64)
        # The in-edges in consumer order ("slots"): the loop keeps a data edge's per-placement state at its
        # slot, so an op's end reads its inputs' state in sequence. edge_slot: each edge's slot.
        in_edges = np.argsort(dst, kind="stable")
        self.in_ptr = np.searchsorted(dst[in_edges], np.arange(n + 1)).astype(index)
        self.edge_slot = np.empty(len(dst), index)
        self.edge_slot[in_edges] = np.arange(len(dst))
        self.slot_gout = self.edge_gout[in_edges]
        self.slot_dst = dst[in_edges]
        self.output_ptr = graph.output_ptr.astype(index)
        self.output_bytes = graph.output_bytes.astype(np.int64)
        self.forward_slot, self.out_forward_slot = (
            a.astype(index) for a in self._forwarding(graph, cluster.buffer_forwarding))
        self.output_bytes[self.out_forward_slot >= 0] = 0  # an alias allocates nothing of its own
        cumulative = np.concatenate([[0], np.cumsum(self.output_bytes)])
        self.op_output_bytes = cumulative[self.output_ptr[1:]] - cumulative[self.output_ptr[:-1]]  # per op
        self.persistent = graph.persistent_bytes.astype(np.int64)
        self.concurrency = cluster.concurrency.astype(np.int64)
        self.op_share = np.ascontiguousarray(cluster.op_share, dtype=np.float64)
        self.latency = np.ascontiguousarray(cluster.latency, dtype=np.float64)  # control edges
        routes = cluster.routes
        self.route_ptr = np.ascontiguousarray(routes.pointer, dtype=np.int64)
        self.route_res = np.ascontiguousarray(routes.resources, dtype=np.int64)
        self.res_bandwidth = np.ascontiguousarray(routes.resource_bandwidth, dtype=np.float64)
        self.res_latency = np.ascontiguousarray(routes.resource_latency, dtype=np.float64)
        self.transfer_overhead = float(cluster.transfer_overhead_s)
        self.copy_stream = copy_stream_per_pair(cluster)
        host = cluster.host_transfer
        # [seconds per tensor, seconds per byte] of a host transfer's send and receive tasks, then the step's cost
        # for involving a worker besides device 0; empty: none
        self.host_cost = np.array([host.per_tensor_s, 1.0 / host.bandwidth, host.remote_step_s]
                                  if host is not None else [], np.float64)
        self.capacity = cluster.memory_bytes.astype(np.int64)
        self.is_sum = self._sums(graph) if cluster.accumulate_sums else np.zeros(n, np.bool_)
        self.ready_fifo = cluster.ready_fifo
        # allowed_devices flattened, read at group * n_devices + device: a placement's kernel check without
        # rebuilding the [groups, devices] mask on every call
        self._allowed = allowed_devices(graph, cluster).ravel()
        self._allowed_row = np.arange(graph.n_groups, dtype=np.int64) * cluster.n_devices

    def _sums(self, graph: OpGraph) -> np.ndarray:
        """Per op: a sum grappler may turn into an accumulation (AddN or AccumulateNV2 of more than
        two data inputs, memory_optimizer.cc)."""
        data_inputs = np.bincount(self.edge_dst[self.edge_gout >= 0], minlength=graph.n_ops)
        return np.isin(graph.op_types, SUM_OPS) & (data_inputs > 2)

    def _forwarding(self, graph: OpGraph, enabled: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per op, the slot of the in-edge whose buffer its output shares (-1: none), and the same per output.

        The forwarded input of a view is its data input of the output's size (Reshape's shape
        input is not it); with ``enabled`` False nothing forwards.
        """
        forward_slot = np.full(graph.n_ops, -1, np.int64)
        out_forward_slot = np.full(len(self.output_bytes), -1, np.int64)
        if not enabled:
            return forward_slot, out_forward_slot
        views = np.flatnonzero(np.isin(graph.op_types, list(BUFFER_FORWARDING_OPS))
                               & (np.diff(self.output_ptr) == 1))
        slot_bytes = np.empty(len(self.edge_slot), np.int64)
        slot_bytes[self.edge_slot] = self.edge_bytes
        for i in views.tolist():
            inputs = [k for k in range(self.in_ptr[i], self.in_ptr[i + 1]) if self.slot_gout[k] >= 0]
            if not inputs:
                continue
            size = self.output_bytes[self.output_ptr[i]]
            same = [k for k in inputs if slot_bytes[k] == size]
            forward_slot[i] = (same or inputs)[0]
            out_forward_slot[self.output_ptr[i]] = forward_slot[i]
        return forward_slot, out_forward_slot

    def core_arguments(self) -> tuple:
        """The compiled loop's placement-independent arguments, in its order after the device and capacity:
        ``simulate_step_recorded(dev, capacity, *these)``, ``simulate_many(placements, group, capacity, *these)``."""
        return (self.op_seconds, self.out_ptr, self.edge_dst, self.edge_gout, self.edge_bytes, self.in_ptr,
                self.edge_slot, self.slot_gout, self.slot_dst, self.output_ptr, self.output_bytes, self.op_output_bytes,
                self.forward_slot, self.out_forward_slot, self.persistent, self.concurrency, self.op_share,
                self.latency, self.route_ptr, self.route_res, self.res_bandwidth, self.res_latency,
                self.transfer_overhead, self.copy_stream, self.host_cost, self.is_sum, self.ready_fifo)

    # ---- results ----
    def _no_kernel(self, placement: np.ndarray, bad: np.ndarray) -> Measurement:
        g = int(bad[0])
        graph, cluster = self.graph, self.cluster
        kind = cluster.devices[int(placement[g])].kind
        ops = graph.ops_of_group(g)
        kinds = np.uint8(cluster.kinds[int(placement[g])])
        offending = ops[((graph.device_mask[ops] >> kinds) & 1) == 0]
        op = int(offending[0]) if offending.size else int(ops[0])
        n_dev = cluster.n_devices
        return Measurement(
            runtime_s=float("nan"), ok=False, failure="no_kernel",
            message=(f"group {g} is placed on {cluster.devices[int(placement[g])].name} ({kind}), but its op "
                     f"{graph.op_names[op]!r} (type {graph.op_types[op]}) has no {kind} kernel"
                     + (f"; {bad.size} groups in all" if bad.size > 1 else "")),
            peak_bytes=np.zeros(n_dev, np.int64), busy_s=np.zeros(n_dev), bytes_moved=0,
            placement=placement, runtime="sim")

    def _measurement(self, placement, runtime_s, peak, busy, moved, schedule=None) -> Measurement:
        over = np.flatnonzero(peak > self.capacity)
        ok, failure, message = True, "", ""
        if over.size:
            d = int(over[0])
            ok, failure = False, "oom"
            message = (f"device {self.cluster.devices[d].name} needs {int(peak[d])} bytes at its peak "
                       f"({peak[d] / 2**30:.2f} GiB) but has {int(self.capacity[d])} bytes "
                       f"({self.capacity[d] / 2**30:.2f} GiB)")
        return Measurement(runtime_s=float(runtime_s), ok=ok, failure=failure, message=message,
                           peak_bytes=np.asarray(peak, np.int64).copy(), busy_s=np.asarray(busy, np.float64).copy(),
                           bytes_moved=int(moved), placement=placement, runtime="sim", schedule=schedule)

    def _kernel_violations(self, placement: np.ndarray) -> np.ndarray:
        """:func:`~placement_env.placement.kernel_violations` of a checked placement, from the plan's mask."""
        return np.flatnonzero(~self._allowed[self._allowed_row + placement])

    def run(self, placement: Any, *, schedule: bool = False) -> Measurement:
        """Simulate one step of ``placement`` (one device per group); ``schedule=True`` records its Schedule."""
        placement = check_placement(self.graph, self.cluster, placement)
        bad = self._kernel_violations(placement)
        if bad.size:
            return self._no_kernel(placement, bad)
        if not schedule:  # a batch of one: it returns four arrays, where the recorded step returns sixteen
            runtimes, peaks, busys, moved = simulate_many(placement[None, :], self.group, self.capacity,
                                                          *self.core_arguments())
            return self._measurement(placement, runtimes[0], peaks[0], busys[0], moved[0])
        dev = placement.astype(DEVICE_INDEX).take(self.group)  # the device of each op
        (makespan, peak, busy, moved, started, op_start, op_end, t_src, t_out, t_sdev, t_ddev, t_start, t_end,
         t_bytes, mem_time, mem_trace) = simulate_step_recorded(dev, self.capacity, *self.core_arguments())
        if started != self.graph.n_ops:  # cannot happen for a DAG; guard against corrupt graphs
            raise RuntimeError(f"simulation started {started} of {self.graph.n_ops} ops")
        timeline = Schedule(
            op_device=dev.astype(np.int64), op_start=op_start, op_end=op_end, transfer_src_op=t_src,
            transfer_output=t_out, transfer_src_device=t_sdev, transfer_dst_device=t_ddev, transfer_start=t_start,
            transfer_end=t_end, transfer_bytes=t_bytes, memory_time=mem_time, memory_in_use=mem_trace.T)
        return self._measurement(placement, makespan, peak, busy, moved, timeline)

    def run_batch(self, placements: Any, *, threads: int = 1) -> list[Measurement]:
        """Simulate many placements (int array [k, n_groups]) in one compiled call, shared out over ``threads``
        of numba's threads (the same results for any number)."""
        threads = check_threads(threads)
        array = np.asarray(placements)
        if array.ndim != 2:
            raise InvalidPlacementError(
                f"placements has shape {array.shape}; expected (k, {self.graph.n_groups}): one placement per row")
        checked = [check_placement(self.graph, self.cluster, row) for row in array]
        results: list[Measurement | None] = [None] * len(checked)
        todo = []
        for r, placement in enumerate(checked):
            bad = self._kernel_violations(placement)
            if bad.size:
                results[r] = self._no_kernel(placement, bad)
            else:
                todo.append(r)
        if todo:
            batch = np.ascontiguousarray(np.stack([checked[r] for r in todo]), dtype=np.int64)
            runtimes, peaks, busys, moved = simulate_compiled(
                batch, (self.group, self.capacity, *self.core_arguments()), threads)
            for k, r in enumerate(todo):
                results[r] = self._measurement(checked[r], runtimes[k], peaks[k], busys[k], moved[k])
        return results  # type: ignore[return-value]


def simulate_compiled(placements: np.ndarray, arguments: tuple, threads: int = 1) -> tuple:
    """The compiled batch of ``placements`` (int64 [k, n_groups], every kernel available) on ``threads`` of numba's
    threads; ``arguments``: the group per op, the capacities, then :meth:`SimulationPlan.core_arguments`. Returns
    (runtimes, peaks [k, device], busy seconds [k, device], bytes moved)."""
    if threads == 1:
        return simulate_many(placements, *arguments)
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        return simulate_many_parallel(placements, *arguments)
    finally:
        numba.set_num_threads(previous)


def check_threads(threads: Any) -> int:
    """``threads`` for a simulated batch, or a ValueError naming the accepted range (1 to numba's thread count,
    ``NUMBA_NUM_THREADS``: this machine's cores unless set)."""
    most = numba.config.NUMBA_NUM_THREADS
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= most:
        raise ValueError(f"threads={threads!r}; expected an integer from 1 to {most} (numba's threads on this machine)")
    return int(threads)


def _sample_key(seconds: np.ndarray) -> Hashable:
    """A cheap key: the shape and about 64 evenly spaced values."""
    flat = seconds.reshape(-1)
    return ("sample", seconds.shape, flat[:: max(1, flat.size // 64)].tobytes())


def _bytes_key(seconds: np.ndarray) -> Hashable:
    """A key from every value, for arrays that share their sample with another cached one."""
    return ("bytes", seconds.shape, hash(np.ascontiguousarray(seconds).tobytes()))


def plan_for(graph: OpGraph, cluster: Cluster, op_seconds: Any) -> SimulationPlan:
    """The SimulationPlan for (graph, cluster, op_seconds), from the derived-data cache.

    Calls with equal op_seconds values share one plan. The plan is found by a cheap key (a sample
    of the values) and confirmed by comparing every value, which costs far less than hashing them
    all on each call; arrays that match a cached plan's sample but not its values use a key that
    hashes every value.
    """
    seconds = np.asarray(op_seconds, dtype=np.float64)

    def build() -> SimulationPlan:
        return SimulationPlan(graph, cluster, seconds)

    for make_key in (_sample_key, _bytes_key):  # the second only when the first finds a plan of other values
        plan = DERIVED.get("simulation plan", graph, cluster, key=make_key(seconds), build=build)
        if np.array_equal(plan.op_seconds, seconds):
            return plan
    return build()  # both keys taken by other values (a hash collision): correct, just not cached


def simulate(graph: OpGraph, cluster: Cluster, op_seconds: Any, placement: Any, *,
             schedule: bool = False) -> Measurement:
    """Simulated step time of ``placement`` (one device index per group) as a Measurement."""
    return plan_for(graph, cluster, op_seconds).run(placement, schedule=schedule)


def simulate_batch(graph: OpGraph, cluster: Cluster, op_seconds: Any, placements: Any) -> list[Measurement]:
    """``simulate`` for every row of ``placements`` ([k, n_groups]), in one compiled call."""
    return plan_for(graph, cluster, op_seconds).run_batch(placements)
