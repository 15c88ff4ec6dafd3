"""``Cluster``: the immutable machine or cluster a graph is placed on.

A cluster is a tuple of ``Device`` records plus two n x n link matrices (bandwidth in bytes/s
per direction, latency in seconds) and, optionally, the interconnect ``Topology`` those matrices
come from (then transfers that share a port or a switch link share its bandwidth; see
``topology``), a fixed cost per cross-device tensor (``transfer_overhead_s``) and, for CPU worker
processes, the CPU work each end of a transfer costs (``host_transfer``, see ``host_transfer``). Simulators read it through read-only numpy arrays; it is
validated once, when built, so everything downstream can trust it. Its JSON form lives in
``schema``; the methods here that read or write JSON call it.
"""
from __future__ import annotations

import hashlib

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import ClusterConfigError
from ..opgraph import DEVICE_KINDS  # index = value in Cluster.kinds
from . import schema
from .checks import (BANDWIDTH_RANGE, SECONDS_RANGE, bad, bytes_per_s, check_bool, check_device_count, is_int,
                     nonempty_str, remote_jobs, seconds, show)
from .device import Device, check_unique
from .host_transfer import HostTransfer, check_host_transfer
from .topology import Routes, Topology, pairwise_routes


@dataclass(frozen=True, eq=False)
class Cluster:
    """Devices plus per-direction link bandwidth (bytes/s) and latency (s) between every pair.

    ``bandwidth[i, j]`` and ``latency[i, j]`` describe a transfer from device i to device j; the
    diagonal is ``inf`` and ``0``. Both matrices are read-only float64 copies.
    """

    name: str
    devices: tuple[Device, ...]
    bandwidth: np.ndarray = field(repr=False)
    latency: np.ndarray = field(repr=False)
    local_workers: int = 0  # N for a `local:N` cluster of real local TF worker processes
    # A running TF cluster the devices live on (see cluster_from_spec): the gRPC target of its
    # master ("grpc://host:port") and its ClusterSpec as {job: ("host:port", ...)} (task i = i-th).
    remote_target: str = ""
    remote_jobs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The interconnect the links come from (None: the ideal machine, a private link per ordered pair).
    topology: Topology | None = None
    # Fixed seconds per cross-device tensor on top of its link time: the send/recv rendezvous and
    # the copy's launch (TF's _Send/_Recv pair), paid once per (tensor, destination device).
    transfer_overhead_s: float = 0.0
    # Whether outputs of Identity, Reshape, ReadVariableOp, ... share their input's buffer, as TF's
    # executor does (True on the machines that model TF as it runs; the ideal presets count every
    # output as a new buffer).
    buffer_forwarding: bool = False
    # Whether a device whose peak memory passes 80% of its capacity sums large gradients as they
    # arrive, as grappler's memory optimizer makes TF do (SchedulingPass: an AddN of more than two
    # inputs becomes a temporary variable that each input is added into, so the inputs need not
    # all be alive at once). The ideal presets keep every input of a sum until the sum runs.
    accumulate_sums: bool = False
    # Whether a variable update, a sparse update and a dense embedding gradient take at least the memory
    # traffic they must move at the device's achieved bandwidth (costs.update_traffic_bytes): grappler's
    # analytical model sees a resource variable as a handle of 0 bytes. On for the as-built and modern GPU
    # presets; off on the ideal ones.
    update_traffic: bool = False
    # Whether each GPU performs the copies into and out of it on its copy streams, as TF's GPU device does:
    # a FIFO stream each for host-to-device, device-to-host and device-to-device copies; a tensor's fixed cost
    # (``transfer_overhead_s``) is then work on its copy's stream rather than a free delay (see the simulated
    # runtime's docstring). Off: every transfer waits only for its links, as on the ideal presets.
    copy_streams: bool = False
    # Whether a device starts its waiting ops in the order they became ready, as TF's executor runs its ready
    # queue (executor.cc ScheduleReady: inexpensive kernels, which GPU kernels are, run inline in that order;
    # expensive ones go to the inter-op pool in it). Off: lowest op index first, as on the ideal presets.
    ready_fifo: bool = False
    # CPU work on both ends of every cross-device tensor, as between TF worker processes over
    # loopback gRPC (None: transfers cost the devices nothing, as a GPU's copy engines).
    host_transfer: HostTransfer | None = None

    def __post_init__(self) -> None:
        nonempty_str(self.name, "name")
        devices = tuple(self.devices) if isinstance(self.devices, (list, tuple)) else self.devices
        if not isinstance(devices, tuple) or not devices:
            raise bad("devices", devices, "a non-empty sequence of Device")
        check_device_count(len(devices))
        for i, device in enumerate(devices):
            if not isinstance(device, Device):
                raise bad(f"devices[{i}]", device, "a Device")
        check_unique(devices)
        object.__setattr__(self, "devices", devices)
        for key in ("bandwidth", "latency"):
            object.__setattr__(self, key, _link_matrix(key, getattr(self, key), devices))
        workers = self.local_workers
        n = len(devices)
        if not is_int(workers) or workers < 0:
            raise bad("local_workers", workers, "an integer >= 0")
        if workers not in (0, n):
            raise bad("local_workers", workers, f"0 or the number of devices ({n}): one worker per device")
        object.__setattr__(self, "local_workers", int(workers))
        jobs = remote_jobs(self.remote_jobs, "remote_jobs")
        target = self.remote_target
        if not isinstance(target, str) or (target and not (target.startswith("grpc://") and len(target) > 7)):
            raise bad("remote_target", target, 'a gRPC target "grpc://host:port", or "" for none')
        if bool(target) != bool(jobs):
            raise ClusterConfigError(
                f"remote_target = {show(target)}, remote_jobs = {show(jobs)}: "
                "give both (a remote TF cluster) or neither")
        if target and self.local_workers:
            raise ClusterConfigError("a cluster has either local_workers or a remote_target, not both")
        object.__setattr__(self, "remote_jobs", MappingProxyType(jobs))
        object.__setattr__(self, "transfer_overhead_s", seconds(self.transfer_overhead_s, "transfer_overhead_s"))
        for key in ("buffer_forwarding", "accumulate_sums", "update_traffic", "copy_streams", "ready_fifo"):
            object.__setattr__(self, key, check_bool(getattr(self, key), key))
        check_host_transfer(self.host_transfer, [d.kind for d in devices], [d.name for d in devices])
        if self.topology is not None:
            self._check_topology()

    def _check_topology(self) -> None:
        """The topology must join every device, and the link matrices must be its routes' values."""
        if not isinstance(self.topology, Topology):
            raise bad("topology", self.topology, "a Topology or None")
        self.topology.check([d.name for d in self.devices])
        routes = self.routes
        for key in ("bandwidth", "latency"):
            if not np.array_equal(getattr(self, key), getattr(routes, key)):
                raise ClusterConfigError(f"{key}: a cluster with a topology takes its {key} from the topology's "
                                         "routes; build it with topology_cluster(...) or give consistent matrices")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return (self.name == other.name and self.devices == other.devices
                and self.local_workers == other.local_workers
                and self.remote_target == other.remote_target
                and dict(self.remote_jobs) == dict(other.remote_jobs)
                and np.array_equal(self.bandwidth, other.bandwidth)
                and np.array_equal(self.latency, other.latency)
                and self.topology == other.topology
                and self.transfer_overhead_s == other.transfer_overhead_s
                and self.buffer_forwarding == other.buffer_forwarding
                and self.accumulate_sums == other.accumulate_sums
                and self.update_traffic == other.update_traffic
                and self.copy_streams == other.copy_streams
                and self.ready_fifo == other.ready_fifo
                and self.host_transfer == other.host_transfer)

    def __hash__(self) -> int:
        return hash((self.name, self.devices, self.local_workers, self.remote_target,
                     tuple(sorted(self.remote_jobs.items())), self.bandwidth.tobytes(), self.latency.tobytes(),
                     self.topology, self.transfer_overhead_s, self.buffer_forwarding, self.accumulate_sums,
                     self.update_traffic, self.copy_streams, self.ready_fifo, self.host_transfer))

    def __reduce__(self) -> tuple:
        # Rebuild through __init__ so an unpickled cluster is validated and its arrays read-only.
        return (Cluster, (self.name, self.devices, self.bandwidth, self.latency, self.local_workers,
                          self.remote_target, dict(self.remote_jobs), self.topology, self.transfer_overhead_s,
                          self.buffer_forwarding, self.accumulate_sums, self.update_traffic, self.copy_streams,
                          self.ready_fifo,
                          self.host_transfer))

    # -- array views for simulators ---------------------------------------------------------

    @property
    def n_devices(self) -> int:
        """Number of devices."""
        return len(self.devices)

    @cached_property
    def kinds(self) -> np.ndarray:
        """Kind index per device (0 = CPU, 1 = GPU, see DEVICE_KINDS)."""
        return _frozen([DEVICE_KINDS.index(d.kind) for d in self.devices], np.int64)

    @cached_property
    def is_gpu(self) -> np.ndarray:
        """Whether each device is a GPU (bool)."""
        return _frozen([d.kind == "GPU" for d in self.devices], bool)

    @cached_property
    def peak_flops(self) -> np.ndarray:
        """fp32 FLOP/s per device."""
        return _frozen([d.peak_flops for d in self.devices], np.float64)

    @cached_property
    def memory_bandwidth(self) -> np.ndarray:
        """Device-memory bytes/s per device."""
        return _frozen([d.memory_bandwidth for d in self.devices], np.float64)

    @cached_property
    def memory_bytes(self) -> np.ndarray:
        """Memory capacity in bytes per device."""
        return _frozen([d.memory_bytes for d in self.devices], np.int64)

    @cached_property
    def op_overhead_s(self) -> np.ndarray:
        """Fixed seconds added to every op run on each device."""
        return _frozen([d.op_overhead_s for d in self.devices], np.float64)

    @cached_property
    def op_share(self) -> np.ndarray:
        """The largest share of each device's throughput one op can use."""
        return _frozen([d.op_share for d in self.devices], np.float64)

    @cached_property
    def concurrency(self) -> np.ndarray:
        """Ops that can run at once per device."""
        return _frozen([d.concurrency for d in self.devices], np.int64)

    @cached_property
    def routes(self) -> Routes:
        """Every ordered device pair's route over the interconnect, as arrays for the simulator."""
        names = [d.name for d in self.devices]
        if self.topology is None:
            return pairwise_routes(self.n_devices, self.bandwidth, self.latency, names)
        return self.topology.routes(names)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {d.name: i for i, d in enumerate(self.devices)}

    def device_index(self, name: str) -> int:
        """Index of the device called ``name``."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise ClusterConfigError(
                f'device {show(name)} is not in cluster "{self.name}"; devices: {", ".join(self._index)}'
            ) from None

    # -- JSON (see schema) ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the most common link as ``default_link``, other pairs as ``links``."""
        return schema.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        """Build a cluster from its JSON form; every problem is a ClusterConfigError naming the key."""
        return schema.from_dict(cls, data)

    @property
    def digest(self) -> str:
        """A short fingerprint of the cluster's whole definition (its JSON form): two clusters with the
        same name but different devices, links or options have different digests."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()[:16]

    def to_json(self) -> str:
        """The JSON form as indented text; ``from_json`` reads it back to an equal cluster."""
        return schema.to_json(self)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        """Parse the JSON form (see ``from_dict``)."""
        return schema.from_json(cls, text)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``to_json()`` to ``path``."""
        schema.save(self, path)

    @classmethod
    def load_json(cls, path: str | os.PathLike[str]) -> Cluster:
        """Read a cluster JSON file; errors are prefixed with the file name."""
        return schema.load_json(cls, path)

    # -- CLI ----------------------------------------------------------------------------------

    def describe(self) -> str:
        """A short table: one line per device, then the distinct links with their pair counts."""
        lines = [f"{self.name}: {self.n_devices} devices"
                 + (f", {self.local_workers} local TF worker processes" if self.local_workers else "")
                 + (f", remote TF cluster at {self.remote_target}" if self.remote_target else ""),
                 f"  {'#':>2}  {'name':<8} {'kind':<4} {'TFLOP/s':>8} {'mem GB/s':>9} {'mem GiB':>8} "
                 f"{'conc':>4} {'op us':>6}  tf_device"]
        for i, d in enumerate(self.devices):
            lines.append(f"  {i:>2}  {d.name:<8} {d.kind:<4} {d.peak_flops / 1e12:>8.2f} "
                         f"{d.memory_bandwidth / 1e9:>9.1f} {d.memory_bytes / 2**30:>8.1f} "
                         f"{d.concurrency:>4} {d.op_overhead_s * 1e6:>6.1f}  {d.tf_device}")
        groups: dict[tuple[float, float], list[str]] = {}
        for i in range(self.n_devices):
            for j in range(self.n_devices):
                if i != j:
                    key = (float(self.bandwidth[i, j]), float(self.latency[i, j]))
                    groups.setdefault(key, []).append(f"{self.devices[i].name}->{self.devices[j].name}")
        if self.transfer_overhead_s:
            lines.append(f"  fixed cost per cross-device tensor: {self.transfer_overhead_s * 1e6:.1f} us")
        if self.host_transfer is not None:
            lines.append(f"  each end of a cross-device tensor: {self.host_transfer.per_tensor_s * 1e6:.1f} us + bytes at "
                         f"{self.host_transfer.bandwidth / 1e9:.3g} GB/s of its CPU (host transfer)")
            if self.host_transfer.remote_step_s:
                lines.append(f"  a step with ops off {self.devices[0].name} (the session's master): "
                             f"{self.host_transfer.remote_step_s * 1e6:.1f} us more (its RunGraph RPC)")
        if self.buffer_forwarding:
            lines.append("  views and variable reads share their input's buffer (TF's buffer forwarding)")
        if self.accumulate_sums:
            lines.append("  a device past 80% of its memory adds large sums' inputs as they arrive (grappler)")
        if self.update_traffic:
            lines.append("  variable updates take at least their memory traffic at the device's achieved bandwidth")
        if self.copy_streams:
            lines.append("  each GPU copies on its host-to-device, device-to-host and device-to-device streams (TF)")
        if self.ready_fifo:
            lines.append("  each device starts its waiting ops in the order they became ready (TF's executor)")
        if self.topology is not None:
            return "\n".join(lines + self.topology.describe([d.name for d in self.devices]))
        if groups:
            lines.append("  links (per direction):")
        for (bw, lat), pairs in sorted(groups.items(), reverse=True):
            shown = ", ".join(pairs[:3]) + (", ..." if len(pairs) > 3 else "")
            lines.append(f"    {bw / 1e9:8.1f} GB/s {lat * 1e6:7.1f} us  {len(pairs):>3} pairs: {shown}")
        return "\n".join(lines)


def linked_cluster(name: str, devices: Sequence[Device], link: Callable[[Device, Device], tuple[float, float]],
                   **fields: Any) -> Cluster:
    """A cluster whose (bandwidth, latency) from device a to device b (a != b) is ``link(a, b)``.

    ``fields`` are the other fields of Cluster (``local_workers``, ``remote_target``, ``remote_jobs``).
    """
    n = len(devices)
    bandwidth, latency = np.full((n, n), np.inf), np.zeros((n, n))
    for i, a in enumerate(devices):
        for j, b in enumerate(devices):
            if i != j:
                bandwidth[i, j], latency[i, j] = link(a, b)
    return Cluster(name, tuple(devices), bandwidth, latency, **fields)


def topology_cluster(name: str, devices: Sequence[Device], topology: Topology, **fields: Any) -> Cluster:
    """A cluster whose links are the routes of ``topology`` (bottleneck bandwidth, largest latency)."""
    if not isinstance(topology, Topology):
        raise bad("topology", topology, "a Topology")
    topology.check([d.name for d in devices])
    routes = topology.routes([d.name for d in devices])
    return Cluster(name, tuple(devices), routes.bandwidth, routes.latency, topology=topology, **fields)


def _link_matrix(key: str, value: object, devices: tuple[Device, ...]) -> np.ndarray:
    """``value`` as a read-only float64 n x n matrix of valid ``key`` ("bandwidth" or "latency") links: the
    diagonal ``inf`` (bandwidth) or ``0`` (latency), every other entry in BANDWIDTH_RANGE or SECONDS_RANGE."""
    n = len(devices)
    diagonal = math.inf if key == "bandwidth" else 0.0
    try:
        matrix = np.array(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ClusterConfigError(f"{key}: must be an {n} x {n} matrix of numbers ({exc})") from None
    if matrix.shape != (n, n):
        raise ClusterConfigError(f"{key}: shape {matrix.shape} must be ({n}, {n}), one row and column per device")
    low, high = BANDWIDTH_RANGE if key == "bandwidth" else SECONDS_RANGE
    with np.errstate(invalid="ignore"):
        wrong = np.where(np.eye(n, dtype=bool), matrix != diagonal, ~((matrix >= low) & (matrix <= high)))
    if wrong.any():  # the first wrong entry in row order, with the rule it breaks
        i, j = (int(k) for k in np.argwhere(wrong)[0])
        entry, where = float(matrix[i, j]), f'from "{devices[i].name}" to "{devices[j].name}"'
        if i == j:
            raise bad(f"{key}[{i}, {j}]", entry, f"{diagonal} on the diagonal", where)
        check = bytes_per_s if key == "bandwidth" else seconds
        check(entry, f"{key}[{i}, {j}]", where)  # raises: the entry is outside the range
    matrix.setflags(write=False)
    return matrix


def _frozen(values: list, dtype: type) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array
