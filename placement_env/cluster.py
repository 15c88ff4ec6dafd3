"""Immutable description of the machine or cluster a graph is placed on.

A ``Cluster`` is a tuple of ``Device`` records plus two n x n link matrices (bandwidth in bytes/s
per direction, latency in seconds). Simulators read it through read-only numpy arrays; users
write it as JSON with a default link and per-pair overrides. ``load_cluster`` turns a preset
name, ``"local:N"``, a JSON path or a dict into a ``Cluster``; ``cluster_from_spec`` builds one
from a running TF cluster (a ``tf.train.ClusterSpec``) by listing its servers' devices.
"""
from __future__ import annotations

import difflib
import json
import math
import numbers
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from .errors import ClusterConfigError, ClusterUnreachableError, UnknownClusterError
from .opgraph import DEVICE_KINDS  # index = value in Cluster.kinds

MAX_LOCAL_WORKERS = 64  # one TF server process per worker; more than this is surely a typo

_DEVICE_REQUIRED = ("name", "kind", "peak_flops", "memory_bandwidth", "memory_bytes", "concurrency")
_DEVICE_OPTIONAL = ("tf_device", "op_overhead_s")
_CLUSTER_REQUIRED = ("name", "devices")
_CLUSTER_OPTIONAL = ("default_link", "links", "local_workers", "remote_target", "remote_jobs")
_LINK_REQUIRED = ("src", "dst")
_LINK_OPTIONAL = ("bandwidth", "latency", "bidirectional")
_BANDWIDTH_RULE = "a positive number of bytes/s"
_LATENCY_RULE = "a finite number of seconds >= 0"


# ---------------------------------------------------------------------------------------------
# Validation helpers: each raises ClusterConfigError naming the path, the value and the rule.


def _show(value: object) -> str:
    """A value as it would look in JSON where possible, else its repr."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _bad(path: str, value: object, rule: str, where: str = "") -> ClusterConfigError:
    loc = f" ({where})" if where else ""
    return ClusterConfigError(f"{path} = {_show(value)}{loc}: must be {rule}")


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _positive(value: object, path: str, rule: str, where: str = "") -> float:
    if not _is_real(value) or not math.isfinite(value) or value <= 0:
        raise _bad(path, value, rule, where)
    return float(value)


def _latency(value: object, path: str, where: str = "") -> float:
    if not _is_real(value) or not math.isfinite(value) or value < 0:
        raise _bad(path, value, _LATENCY_RULE, where)
    return float(value)


def _text(value: object, path: str, rule: str = "a non-empty string", where: str = "") -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(path, value, rule, where)
    return value


def _check_keys(obj: object, path: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    """Return ``obj`` if it is a dict with all ``required`` keys and no keys outside both lists."""
    accepted = ", ".join(required + optional)
    if not isinstance(obj, dict):
        raise _bad(path, obj, f"a JSON object with keys {accepted}")
    for key in obj:
        if key not in required and key not in optional:
            close = difflib.get_close_matches(str(key), required + optional, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise ClusterConfigError(f'{path}: unknown key {_show(key)}{hint}; accepted keys: {accepted}')
    for key in required:
        if key not in obj:
            raise ClusterConfigError(
                f'{path}: missing required key "{key}"; required keys: {", ".join(required)}'
                + (f'; optional keys: {", ".join(optional)}' if optional else "")
            )
    return obj


_ADDRESS_RULE = 'a "host:port" string with a port from 1 to 65535'


def _split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a "host:port" address ("[v6]:port" too), or None if it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdecimal() or not 1 <= int(port) <= 65535 or any(c.isspace() for c in address):
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host, int(port)) if host else None


def _remote_jobs(value: object, path: str) -> dict[str, tuple[str, ...]]:
    """A TF cluster spec as ``{job: ("host:port", ...)}``: task i is the i-th address.

    Accepts a mapping of job name to a list of addresses or to ``{task index: address}`` with
    indices 0..n-1 (the sparse form of ``ClusterSpec.as_dict``).
    """
    if not isinstance(value, Mapping):
        raise _bad(path, value, 'a mapping {job name: ["host:port", ...]}')
    jobs: dict[str, tuple[str, ...]] = {}
    for job, tasks in value.items():
        if not isinstance(job, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", job):
            raise _bad(f"{path} job name", job, "a non-empty string of letters, digits, _ . -")
        where = f'job "{job}"'
        if isinstance(tasks, Mapping):
            if sorted(tasks) != list(range(len(tasks))):
                raise _bad(f"{path}.{job}", {str(k): v for k, v in tasks.items()}, "tasks numbered 0..n-1", where)
            tasks = [tasks[i] for i in range(len(tasks))]
        if isinstance(tasks, str) or not isinstance(tasks, (list, tuple)) or not tasks:
            raise _bad(f"{path}.{job}", tasks, 'a non-empty list of "host:port" addresses', where)
        for i, address in enumerate(tasks):
            if not isinstance(address, str) or _split_address(address) is None:
                raise _bad(f"{path}.{job}[{i}]", address, _ADDRESS_RULE, f"{where} task {i}")
        jobs[job] = tuple(tasks)
    return jobs


def _device_fields(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Validate and normalise the fields of one device (floats, ints) under ``path``."""
    name = _text(values["name"], f"{path}.name")
    where = f'device "{name}"'
    kind = values["kind"]
    if kind not in DEVICE_KINDS:
        raise _bad(f"{path}.kind", kind, " or ".join(f'"{k}"' for k in DEVICE_KINDS), where)
    memory = values["memory_bytes"]
    if not _is_real(memory) or not math.isfinite(memory) or memory <= 0 or memory != int(memory):
        raise _bad(f"{path}.memory_bytes", memory, "a positive whole number of bytes", where)
    concurrency = values["concurrency"]
    if not _is_int(concurrency) or concurrency < 1:
        raise _bad(f"{path}.concurrency", concurrency, "a positive integer (ops that run at once)", where)
    tf_device = values["tf_device"]
    if not isinstance(tf_device, str) or not tf_device.startswith("/"):
        raise _bad(f"{path}.tf_device", tf_device,
                   'a TF device string such as "/job:localhost/replica:0/task:0/device:GPU:0"', where)
    return {
        "name": name,
        "kind": kind,
        "peak_flops": _positive(values["peak_flops"], f"{path}.peak_flops",
                                "a positive number of FLOP/s", where),
        "memory_bandwidth": _positive(values["memory_bandwidth"], f"{path}.memory_bandwidth",
                                      _BANDWIDTH_RULE, where),
        "memory_bytes": int(memory),
        "concurrency": int(concurrency),
        "tf_device": tf_device,
        "op_overhead_s": _latency(values.get("op_overhead_s", 0.0), f"{path}.op_overhead_s", where),
    }


# ---------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class Device:
    """One device: its speed, memory and how many ops it runs at once."""

    name: str  # unique in its cluster, e.g. "cpu:0", "gpu:1"
    kind: str  # one of DEVICE_KINDS
    peak_flops: float  # fp32 FLOP/s
    memory_bandwidth: float  # bytes/s between the device and its own memory
    memory_bytes: int  # capacity
    concurrency: int  # ops at once: 1 compute stream for a GPU, inter-op threads for a CPU
    tf_device: str  # the TF device string ops are pinned to
    op_overhead_s: float = 0.0  # fixed cost of running any op (executor dispatch, kernel launch), seconds

    def __post_init__(self) -> None:
        for key, value in _device_fields(vars(self), "Device").items():
            object.__setattr__(self, key, value)


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

    def __post_init__(self) -> None:
        _text(self.name, "name")
        devices = tuple(self.devices) if isinstance(self.devices, (list, tuple)) else self.devices
        if not isinstance(devices, tuple) or not devices:
            raise _bad("devices", devices, "a non-empty sequence of Device")
        for i, device in enumerate(devices):
            if not isinstance(device, Device):
                raise _bad(f"devices[{i}]", device, "a Device")
        _check_unique(devices)
        object.__setattr__(self, "devices", devices)
        n = len(devices)
        for key, diagonal in (("bandwidth", math.inf), ("latency", 0.0)):
            try:
                matrix = np.array(getattr(self, key), dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ClusterConfigError(f"{key}: must be an {n} x {n} matrix of numbers ({exc})") from None
            if matrix.shape != (n, n):
                raise ClusterConfigError(
                    f"{key}: shape {matrix.shape} must be ({n}, {n}), one row and column per device")
            for i in range(n):
                for j in range(n):
                    value, where = float(matrix[i, j]), f'from "{devices[i].name}" to "{devices[j].name}"'
                    if i == j:
                        if value != diagonal:
                            raise _bad(f"{key}[{i}, {j}]", value, f"{diagonal} on the diagonal", where)
                    elif key == "bandwidth":
                        _positive(value, f"{key}[{i}, {j}]", _BANDWIDTH_RULE, where)
                    else:
                        _latency(value, f"{key}[{i}, {j}]", where)
            matrix.setflags(write=False)
            object.__setattr__(self, key, matrix)
        workers = self.local_workers
        if not _is_int(workers) or workers < 0:
            raise _bad("local_workers", workers, "an integer >= 0")
        if workers not in (0, n):
            raise _bad("local_workers", workers, f"0 or the number of devices ({n}): one worker per device")
        object.__setattr__(self, "local_workers", int(workers))
        jobs = _remote_jobs(self.remote_jobs, "remote_jobs")
        target = self.remote_target
        if not isinstance(target, str) or (target and not (target.startswith("grpc://") and len(target) > 7)):
            raise _bad("remote_target", target, 'a gRPC target "grpc://host:port", or "" for none')
        if bool(target) != bool(jobs):
            raise ClusterConfigError(
                f"remote_target = {_show(target)}, remote_jobs = {_show(jobs)}: "
                "give both (a remote TF cluster) or neither")
        if target and self.local_workers:
            raise ClusterConfigError("a cluster has either local_workers or a remote_target, not both")
        object.__setattr__(self, "remote_jobs", MappingProxyType(jobs))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return (self.name == other.name and self.devices == other.devices
                and self.local_workers == other.local_workers
                and self.remote_target == other.remote_target
                and dict(self.remote_jobs) == dict(other.remote_jobs)
                and np.array_equal(self.bandwidth, other.bandwidth)
                and np.array_equal(self.latency, other.latency))

    def __hash__(self) -> int:
        return hash((self.name, self.devices, self.local_workers, self.remote_target,
                     tuple(sorted(self.remote_jobs.items())), self.bandwidth.tobytes(), self.latency.tobytes()))

    def __reduce__(self) -> tuple:
        # Rebuild through __init__ so an unpickled cluster is validated and its arrays read-only.
        return (Cluster, (self.name, self.devices, self.bandwidth, self.latency, self.local_workers,
                          self.remote_target, dict(self.remote_jobs)))

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
    def concurrency(self) -> np.ndarray:
        """Ops that can run at once per device."""
        return _frozen([d.concurrency for d in self.devices], np.int64)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {d.name: i for i, d in enumerate(self.devices)}

    def device_index(self, name: str) -> int:
        """Index of the device called ``name``."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise ClusterConfigError(
                f'device {_show(name)} is not in cluster "{self.name}"; devices: {", ".join(self._index)}'
            ) from None

    # -- JSON ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the most common link as ``default_link``, other pairs as ``links``."""
        n = self.n_devices
        pair = {(i, j): (float(self.bandwidth[i, j]), float(self.latency[i, j]))
                for i in range(n) for j in range(n) if i != j}
        out: dict[str, Any] = {
            "name": self.name,
            "local_workers": self.local_workers,
            "devices": [
                {"name": d.name, "kind": d.kind, "peak_flops": d.peak_flops,
                 "memory_bandwidth": d.memory_bandwidth, "memory_bytes": d.memory_bytes,
                 "concurrency": d.concurrency, "tf_device": d.tf_device, "op_overhead_s": d.op_overhead_s}
                for d in self.devices
            ],
        }
        if self.remote_target:
            out["remote_target"] = self.remote_target
            out["remote_jobs"] = {job: list(tasks) for job, tasks in self.remote_jobs.items()}
        if not pair:
            return out
        default = Counter(pair.values()).most_common(1)[0][0]
        out["default_link"] = {"bandwidth": default[0], "latency": default[1]}
        links = []
        for i in range(n):
            for j in range(i + 1, n):
                forward, backward = pair[i, j], pair[j, i]
                if forward == backward != default:
                    links.append(_link_dict(self.devices[i].name, self.devices[j].name, forward, True))
                    continue
                if forward != default:
                    links.append(_link_dict(self.devices[i].name, self.devices[j].name, forward, False))
                if backward != default:
                    links.append(_link_dict(self.devices[j].name, self.devices[i].name, backward, False))
        out["links"] = links
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        """Build a cluster from its JSON form; every problem is a ClusterConfigError naming the key."""
        data = _check_keys(dict(data) if isinstance(data, Mapping) else data, "cluster",
                           _CLUSTER_REQUIRED, _CLUSTER_OPTIONAL)
        name = _text(data["name"], "name")
        raw_devices = data["devices"]
        if not isinstance(raw_devices, list) or not raw_devices:
            raise _bad("devices", raw_devices, "a non-empty list of device objects")
        devices: list[Device] = []
        per_kind: Counter[str] = Counter()
        for i, raw in enumerate(raw_devices):
            path = f"devices[{i}]"
            raw = dict(_check_keys(raw, path, _DEVICE_REQUIRED, _DEVICE_OPTIONAL))
            kind = raw["kind"]
            if kind in DEVICE_KINDS:  # default tf_device: the next device of this kind on this host
                raw.setdefault("tf_device", f"/job:localhost/replica:0/task:0/device:{kind}:{per_kind[kind]}")
                per_kind[kind] += 1
            devices.append(Device(**_device_fields(raw, path)))
        _check_unique(devices)
        bandwidth, latency = _link_matrices(data, devices)
        return cls(name=name, devices=tuple(devices), bandwidth=bandwidth, latency=latency,
                   local_workers=data.get("local_workers", 0), remote_target=data.get("remote_target", ""),
                   remote_jobs=data.get("remote_jobs", {}))

    def to_json(self) -> str:
        """The JSON form as indented text; ``from_json`` reads it back to an equal cluster."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        """Parse the JSON form (see ``from_dict``)."""
        return cls.from_dict(_parse_json(text, "cluster JSON"))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``to_json()`` to ``path``."""
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load_json(cls, path: str | os.PathLike[str]) -> Cluster:
        """Read a cluster JSON file; errors are prefixed with the file name."""
        data = _parse_json(Path(path).read_text(encoding="utf-8"), str(path))
        try:
            return cls.from_dict(data)
        except ClusterConfigError as exc:
            raise ClusterConfigError(f"{path}: {exc}") from None

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
        if groups:
            lines.append("  links (per direction):")
        for (bw, lat), pairs in sorted(groups.items(), reverse=True):
            shown = ", ".join(pairs[:3]) + (", ..." if len(pairs) > 3 else "")
            lines.append(f"    {bw / 1e9:8.1f} GB/s {lat * 1e6:7.1f} us  {len(pairs):>3} pairs: {shown}")
        return "\n".join(lines)


def _frozen(values: list, dtype: type) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


def _check_unique(devices: tuple[Device, ...] | list[Device]) -> None:
    for key in ("name", "tf_device"):
        seen: dict[str, int] = {}
        for i, device in enumerate(devices):
            value = getattr(device, key)
            if value in seen:
                raise _bad(f"devices[{i}].{key}", value, f"unique; devices[{seen[value]}] already uses it")
            seen[value] = i


def _link_dict(src: str, dst: str, link: tuple[float, float], bidirectional: bool) -> dict[str, Any]:
    return {"src": src, "dst": dst, "bandwidth": link[0], "latency": link[1], "bidirectional": bidirectional}


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterConfigError(f"{source}: not valid JSON: {exc}") from None


def _link_matrices(data: dict, devices: list[Device]) -> tuple[np.ndarray, np.ndarray]:
    """Bandwidth and latency matrices from ``default_link`` and the ``links`` overrides."""
    n = len(devices)
    bandwidth = np.full((n, n), np.nan)
    latency = np.full((n, n), np.nan)
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    default = None
    if "default_link" in data:
        raw = _check_keys(data["default_link"], "default_link", ("bandwidth", "latency"), ())
        default = (_positive(raw["bandwidth"], "default_link.bandwidth", _BANDWIDTH_RULE),
                   _latency(raw["latency"], "default_link.latency"))
        off = ~np.eye(n, dtype=bool)
        bandwidth[off], latency[off] = default
    index = {d.name: i for i, d in enumerate(devices)}
    known = ", ".join(index)
    links = data.get("links", [])
    if not isinstance(links, list):
        raise _bad("links", links, "a list of link objects")
    set_by: dict[tuple[int, int], int] = {}
    for k, raw in enumerate(links):
        path = f"links[{k}]"
        raw = _check_keys(raw, path, _LINK_REQUIRED, _LINK_OPTIONAL)
        ends = []
        for key in ("src", "dst"):
            if raw[key] not in index:
                raise _bad(f"{path}.{key}", raw[key], f"the name of a device of this cluster: {known}")
            ends.append(index[raw[key]])
        src, dst = ends
        if src == dst:
            raise _bad(f"{path}.dst", raw["dst"], "a device other than src (a device's own link is free)")
        where = f'between "{raw["src"]}" and "{raw["dst"]}"'
        values = []
        for pos, key in enumerate(("bandwidth", "latency")):
            if key in raw:
                values.append(_positive(raw[key], f"{path}.{key}", _BANDWIDTH_RULE, where) if pos == 0
                              else _latency(raw[key], f"{path}.{key}", where))
            elif default is not None:
                values.append(default[pos])
            else:
                raise ClusterConfigError(
                    f'{path}: missing key "{key}" and there is no default_link to fall back on')
        bidirectional = raw.get("bidirectional", True)
        if not isinstance(bidirectional, bool):
            raise _bad(f"{path}.bidirectional", bidirectional, "true or false", where)
        for i, j in ((src, dst), (dst, src)) if bidirectional else ((src, dst),):
            if (i, j) in set_by:
                raise ClusterConfigError(
                    f'{path}: sets "{devices[i].name}" -> "{devices[j].name}" again '
                    f"(already set by links[{set_by[i, j]}]); give each direction once")
            set_by[i, j] = k
            bandwidth[i, j], latency[i, j] = values
    missing = np.argwhere(np.isnan(bandwidth))
    if len(missing):
        i, j = missing[0]
        raise ClusterConfigError(
            f'default_link: missing, and no link sets "{devices[i].name}" -> "{devices[j].name}"; '
            'add "default_link": {"bandwidth": ..., "latency": ...} or a link for every pair')
    return bandwidth, latency


# ---------------------------------------------------------------------------------------------
# Presets. Numbers are public spec-sheet facts; each says where it comes from.

_GB = 1e9  # decimal, as spec sheets quote bandwidths
_GIB = 2**30  # binary, as memory capacities are built


def _machine(name: str, devices: list[Device], link: Callable[[Device, Device], tuple[float, float]],
             local_workers: int = 0) -> Cluster:
    """A cluster whose link between devices a and b (a != b) is ``link(a, b)``."""
    n = len(devices)
    bandwidth, latency = np.full((n, n), np.inf), np.zeros((n, n))
    for i, a in enumerate(devices):
        for j, b in enumerate(devices):
            if i != j:
                bandwidth[i, j], latency[i, j] = link(a, b)
    return Cluster(name, tuple(devices), bandwidth, latency, local_workers)


def _gpu_tf(i: int) -> str:
    return f"/job:localhost/replica:0/task:0/device:GPU:{i}"


_CPU0_TF = "/job:localhost/replica:0/task:0/device:CPU:0"

# Fixed cost per op, whatever its size (orders of magnitude; calibration fits them for a real
# cluster): TF's executor takes a few us to dispatch an op on the CPU; a GPU op adds the CUDA
# kernel launch (~5 us).
_CPU_OP_OVERHEAD_S = 2e-6
_GPU_OP_OVERHEAD_S = 5e-6

# PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130 = 15.75 GB/s raw per direction; cudaMemcpy from
# pinned memory reaches about 12 GB/s. Latency ~10 us: a copy's launch + DMA setup dominates.
_PCIE3 = (12.0 * _GB, 10e-6)


def _paper(n_gpus: int) -> Cluster:
    """The paper's machine: one Haswell 18-core Xeon and ``n_gpus`` K80 dies (GK210), over PCIe 3."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # Xeon E5-2699 v3: 18 cores x 2.3 GHz base x 32 fp32 FLOP/cycle (2 AVX2 FMA units x 8 lanes x 2)
        peak_flops=18 * 2.3e9 * 32,
        memory_bandwidth=68.0 * _GB,  # Intel ARK: 4 channels DDR4-2133 = 68 GB/s
        memory_bytes=256 * _GIB,  # a large host memory; the paper does not say, 256 GiB is typical
        concurrency=18,  # one inter-op thread per physical core
        tf_device=_CPU0_TF,
        op_overhead_s=_CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        # Tesla K80 board: 8.74 TFLOP/s fp32 at 875 MHz boost over two GK210 dies
        # (2 x 2496 cores x 2 FLOP x 875 MHz); TF sees each die as one GPU: 4.37 TFLOP/s.
        peak_flops=2496 * 2 * 875e6,
        memory_bandwidth=240.0 * _GB,  # K80 board: 480 GB/s GDDR5 over two dies
        memory_bytes=12 * _GIB,  # 24 GiB GDDR5 per board, 12 GiB per die (nominal; ECC on leaves ~11.2 GiB)
        concurrency=1,  # one compute stream per GPU in TF
        tf_device=_gpu_tf(i),
        op_overhead_s=_GPU_OP_OVERHEAD_S,
    ) for i in range(n_gpus)]

    def link(a: Device, b: Device) -> tuple[float, float]:
        # Host <-> GPU: PCIe 3.0 x16. GPU <-> GPU: peer-to-peer through the K80's on-board PLX
        # switch or the CPU root complex, measured a little below host copies: ~10 GB/s.
        return _PCIE3 if "CPU" in (a.kind, b.kind) else (10.0 * _GB, 10e-6)

    return _machine(f"paper-{n_gpus}gpu", [cpu, *gpus], link)


def _dgx1_v100_4gpu() -> Cluster:
    """GPUs 0-3 of a DGX-1 (V100): a fully NVLink-connected quad of its hybrid cube-mesh."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # DGX-1 datasheet: 2x Xeon E5-2698 v4 (Broadwell, 20 cores, 2.2 GHz); 32 fp32 FLOP/cycle (AVX2 FMA)
        peak_flops=2 * 20 * 2.2e9 * 32,
        memory_bandwidth=2 * 4 * 8 * 2133e6,  # 2 sockets x 4 channels x 8 B x DDR4-2133 = 136.5 GB/s
        memory_bytes=512 * _GIB,  # DGX-1 datasheet: 512 GB DDR4
        concurrency=40,  # physical cores
        tf_device=_CPU0_TF,
        op_overhead_s=_CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        peak_flops=15.7e12,  # V100 SXM2 datasheet: 15.7 TFLOP/s fp32 (5120 cores x 2 x 1530 MHz)
        memory_bandwidth=900.0 * _GB,  # HBM2
        memory_bytes=16 * _GIB,  # V100 SXM2 16 GB: 16 GiB HBM2 stacks (nvidia-smi shows 16160 MiB)
        concurrency=1,
        tf_device=_gpu_tf(i),
        op_overhead_s=_GPU_OP_OVERHEAD_S,
    ) for i in range(4)]
    # NVLink 2: 25 GB/s per direction per link; in the cube-mesh the pairs (0,3), (1,2), (2,3)
    # have two links and (0,1), (0,2), (1,3) one (nvidia-smi topo -m: NV2 / NV1).
    counts = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (1, 2): 2, (1, 3): 1, (2, 3): 2}
    nvlinks = {frozenset((f"gpu:{a}", f"gpu:{b}")): count for (a, b), count in counts.items()}

    def link(a: Device, b: Device) -> tuple[float, float]:
        if "CPU" in (a.kind, b.kind):
            return _PCIE3  # GPUs hang off PLX PCIe 3.0 x16 switches to the host
        # NVLink copy latency ~2 us (order of magnitude; calibration refines it)
        return nvlinks[frozenset((a.name, b.name))] * 25.0 * _GB, 2e-6

    return _machine("dgx1-v100-4gpu", [cpu, *gpus], link)


def _dgx_h100_8gpu() -> Cluster:
    """A DGX H100: 8 H100 SXM behind NVSwitch, PCIe 5 to two Sapphire Rapids sockets."""
    cpu = Device(
        name="cpu:0", kind="CPU",
        # DGX H100 datasheet: 2x Xeon Platinum 8480C, 56 cores each, 2.0 GHz base;
        # 64 fp32 FLOP/cycle (2 AVX-512 FMA units x 16 lanes x 2)
        peak_flops=2 * 56 * 2.0e9 * 64,
        memory_bandwidth=2 * 8 * 8 * 4800e6,  # 2 sockets x 8 channels x 8 B x DDR5-4800 = 614 GB/s
        memory_bytes=2048 * _GIB,  # DGX H100 datasheet: 2 TB system memory
        concurrency=112,  # physical cores
        tf_device=_CPU0_TF,
        op_overhead_s=_CPU_OP_OVERHEAD_S,
    )
    gpus = [Device(
        name=f"gpu:{i}", kind="GPU",
        peak_flops=67e12,  # H100 SXM datasheet: 67 TFLOP/s fp32 (non-tensor)
        memory_bandwidth=3.35e12,  # HBM3, 3.35 TB/s
        memory_bytes=80 * _GIB,  # H100 SXM "80 GB": 80 GiB HBM3 (nvidia-smi shows 81559 MiB)
        concurrency=1,
        tf_device=_gpu_tf(i),
        op_overhead_s=_GPU_OP_OVERHEAD_S,
    ) for i in range(8)]

    def link(a: Device, b: Device) -> tuple[float, float]:
        if "CPU" in (a.kind, b.kind):
            return 55.0 * _GB, 10e-6  # PCIe 5.0 x16: 64 GB/s raw per direction, ~55 GB/s achieved
        return 450.0 * _GB, 2e-6  # NVLink 4 via NVSwitch: 18 links x 25 GB/s = 450 GB/s per direction

    return _machine("dgx-h100-8gpu", [cpu, *gpus], link)


def _host_memory_bytes() -> int:
    """Physical RAM of this machine, or 16 GiB where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 16 * _GIB


def local_cluster(n: int) -> Cluster:
    """``n`` real local TF worker processes, one CPU device each, one intra- and inter-op thread.

    Speeds and the loopback link are conservative constants that calibration replaces later.
    """
    if not _is_int(n) or not 1 <= n <= MAX_LOCAL_WORKERS:
        raise _bad("n", n, f"an integer from 1 to {MAX_LOCAL_WORKERS} (one TF server process each)")
    memory = _host_memory_bytes() // n  # the workers share the host's RAM
    workers = [Device(
        name=f"cpu:{i}", kind="CPU",
        peak_flops=2.5e9 * 32,  # one core: 2.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA); calibrated later
        memory_bandwidth=10.0 * _GB,  # what one core streams from DRAM, roughly; calibrated later
        memory_bytes=memory,
        concurrency=1,  # inter_op_parallelism_threads=1
        tf_device=f"/job:worker/replica:0/task:{i}/device:CPU:0",
        op_overhead_s=_CPU_OP_OVERHEAD_S,  # calibrated later
    ) for i in range(n)]
    # Tensors between workers go over loopback gRPC: ~1 GB/s and ~100 us per transfer; calibrated later.
    return _machine(f"local:{n}", workers, lambda a, b: (1.0 * _GB, 100e-6), local_workers=n)


# Defaults for the devices of a TF cluster found by cluster_from_spec. Its hardware is unknown,
# so these are deliberately modest; calibration (pe.calibrate) replaces them with measured values.
_REMOTE_CPU = dict(
    peak_flops=2.5e9 * 32,  # one core: 2.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA), as for local:N
    memory_bandwidth=10.0 * _GB,  # what one core streams from DRAM, roughly
    concurrency=1,
    op_overhead_s=_CPU_OP_OVERHEAD_S,
)
_REMOTE_GPU = dict(
    peak_flops=8.0e12,  # a mid-range datacenter GPU of the last decade (T4: 8.1, V100: 15.7 TFLOP/s fp32)
    memory_bandwidth=300.0 * _GB,  # T4: 320 GB/s GDDR6
    concurrency=1,  # one compute stream per GPU in TF
    op_overhead_s=_GPU_OP_OVERHEAD_S,
)
# TF reports a nominal 256 MiB memory_limit for CPU devices, not the host's RAM; a remote host's
# RAM is unknown, so a CPU device gets this much unless cpu_memory_bytes says otherwise.
_TF_NOMINAL_CPU_LIMIT = 256 * 2**20
_REMOTE_CPU_MEMORY = 16 * _GIB
_SAME_TASK_LINK = _PCIE3  # devices of one server: host <-> GPU copies over PCIe 3.0 x16
# Different tasks: tensors go over gRPC on the network. 10 GbE carries 1.25 GB/s raw, gRPC gets
# about 1 GB/s; ~100 us per transfer (RPC + serialisation). Calibration measures the real link.
_NETWORK_LINK = (1.0 * _GB, 100e-6)
_TF_DEVICE = re.compile(r"/job:(?P<job>[^/]+)/replica:\d+/task:(?P<task>\d+)/device:(?P<type>[^:]+):(?P<index>\d+)")


def _spec_jobs(spec: object) -> dict[str, tuple[str, ...]]:
    """``{job: addresses}`` of a ``tf.train.ClusterSpec``, a ClusterDef or a ``{job: [...]}`` mapping."""
    if _is_tf_cluster_spec(spec):
        spec = spec.as_dict()
    elif type(spec).__name__ == "ClusterDef" and hasattr(spec, "job"):
        spec = {job.name: dict(job.tasks) for job in spec.job}
    if isinstance(spec, Mapping) and not spec:
        raise ClusterConfigError("cluster spec is empty: give at least one job with one \"host:port\" task")
    return _remote_jobs(spec, "cluster spec")


def _is_tf_cluster_spec(spec: object) -> bool:
    return type(spec).__name__ == "ClusterSpec" and hasattr(spec, "as_cluster_def") and hasattr(spec, "as_dict")


def _looks_like_spec_dict(spec: Mapping) -> bool:
    """A ``{job: ["host:port", ...]}`` dict rather than the cluster JSON form (which has "name"/"devices")."""
    if not spec or any(key in spec for key in _CLUSTER_REQUIRED + _CLUSTER_OPTIONAL):
        return False
    return all(isinstance(tasks, (list, tuple, Mapping)) for tasks in spec.values())


def _check_reachable(jobs: Mapping[str, tuple[str, ...]], deadline: float) -> None:
    """Open (and close) a TCP connection to every task, so an unreachable one is named quickly."""
    for job, tasks in jobs.items():
        for task, address in enumerate(tasks):
            host, port = _split_address(address)
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError("no time left")
                socket.create_connection((host, port), timeout=left).close()
            except OSError as exc:
                raise ClusterUnreachableError(
                    f'TF server {address} (job "{job}", task {task}) is unreachable: '
                    f"{exc.strerror or exc or type(exc).__name__}") from None


def _list_devices(target: str, timeout_s: float) -> list[tuple[str, str, int]]:
    """``(name, device_type, memory_limit_bytes)`` of every device the server at ``target`` knows."""
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=max(1, int(timeout_s * 1000)))
    try:
        with tf.Graph().as_default(), tf.compat.v1.Session(target, config=config) as session:
            return [(d.name, d.device_type, int(d.memory_limit_bytes)) for d in session.list_devices()]
    except tf.errors.DeadlineExceededError:
        raise ClusterUnreachableError(f"TF server {target} did not list its devices within {timeout_s:g} s") from None
    except tf.errors.OpError as exc:
        raise ClusterUnreachableError(f"TF server {target} could not list its devices: "
                                      f"{type(exc).__name__}: {exc.message}") from None


def cluster_from_spec(spec: Any, *, job: str | None = None, probe: bool = True, name: str | None = None,
                      timeout_s: float = 30.0, cpu_memory_bytes: int | None = None) -> Cluster:
    """A Cluster of the devices of a running TF cluster, measurable with ``MeasuredRuntime``.

    ``spec`` is a ``tf.train.ClusterSpec`` (or its ClusterDef, or a ``{job: ["host:port", ...]}``
    dict) whose servers are already running, each started with this same spec. With ``job``
    only that job's devices are used (e.g. "worker", leaving out "ps"); its task 0 is the master
    the measured runtime talks to (default: task 0 of "worker" if there is such a job, else of
    the first job). ``probe=True`` connects to every task within ``timeout_s`` seconds and lists
    the devices (one Device per TF CPU/GPU device, memory from its ``memory_limit_bytes``);
    ``probe=False`` connects to nothing and assumes one CPU device per task.

    Speeds are modest defaults per kind (``_REMOTE_CPU``/``_REMOTE_GPU``) and links are PCIe-like
    within a task and 10 GbE-like between tasks, until calibration measures them.
    """
    jobs = _spec_jobs(spec)
    if job is not None and job not in jobs:
        raise _bad("job", job, f"a job of the cluster spec: {', '.join(jobs)}")
    master_job = job if job is not None else ("worker" if "worker" in jobs else next(iter(jobs)))
    target = f"grpc://{jobs[master_job][0]}"
    wanted = {job: jobs[job]} if job is not None else jobs
    if not _is_real(timeout_s) or not timeout_s > 0:
        raise _bad("timeout_s", timeout_s, "a positive number of seconds")
    if cpu_memory_bytes is not None and (not _is_int(cpu_memory_bytes) or cpu_memory_bytes <= 0):
        raise _bad("cpu_memory_bytes", cpu_memory_bytes, "a positive whole number of bytes")
    if probe:
        deadline = time.monotonic() + float(timeout_s)
        _check_reachable(jobs, deadline)
        listed = _list_devices(target, max(deadline - time.monotonic(), 0.5))
    else:
        listed = [(f"/job:{j}/replica:0/task:{t}/device:CPU:0", "CPU", _TF_NOMINAL_CPU_LIMIT)
                  for j, tasks in wanted.items() for t in range(len(tasks))]
    found: list[tuple[tuple[int, int, int, int], str, str, int, str]] = []
    job_order = list(jobs)
    for tf_name, device_type, memory in listed:
        match = _TF_DEVICE.fullmatch(tf_name)
        if match is None or match["job"] not in wanted or device_type not in DEVICE_KINDS:
            continue  # another job, or a device kind we do not place on (XLA_*, TPU_SYSTEM, ...)
        key = (job_order.index(match["job"]), int(match["task"]), DEVICE_KINDS.index(device_type), int(match["index"]))
        label = f'{match["job"]}:{match["task"]}/{device_type.lower()}:{match["index"]}'
        found.append((key, label, device_type, memory, tf_name))
    found.sort()
    missing = [f"/job:{j}/task:{t}" for j, tasks in wanted.items() for t in range(len(tasks))
               if not any(key[:2] == (job_order.index(j), t) for key, *_ in found)]
    if missing:
        raise ClusterConfigError(
            f"TF server {target} lists no CPU/GPU device for {', '.join(missing)}; were all servers started "
            f"with this same cluster spec {_show(jobs)}? devices listed: {', '.join(n for n, _, _ in listed) or 'none'}")
    devices = []
    for _, label, kind, memory, tf_name in found:
        defaults = _REMOTE_CPU if kind == "CPU" else _REMOTE_GPU
        if kind == "CPU" and (memory == _TF_NOMINAL_CPU_LIMIT or memory <= 0):
            memory = cpu_memory_bytes or _REMOTE_CPU_MEMORY
        elif kind == "CPU" and cpu_memory_bytes:
            memory = cpu_memory_bytes
        devices.append(Device(name=label, kind=kind, memory_bytes=int(memory), tf_device=tf_name, **defaults))
    task_of = [d.tf_device.split("/device:")[0] for d in devices]
    n = len(devices)
    bandwidth, latency = np.full((n, n), np.inf), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                bandwidth[i, j], latency[i, j] = _SAME_TASK_LINK if task_of[i] == task_of[j] else _NETWORK_LINK
    cluster_name = name if name is not None else f"tf:{jobs[master_job][0]}"
    return Cluster(cluster_name, tuple(devices), bandwidth, latency, remote_target=target, remote_jobs=jobs)


PRESETS: Mapping[str, Callable[[], Cluster]] = MappingProxyType({
    "paper-2gpu": lambda: _paper(2),
    "paper-4gpu": lambda: _paper(4),
    "dgx1-v100-4gpu": _dgx1_v100_4gpu,
    "dgx-h100-8gpu": _dgx_h100_8gpu,
})


def preset_names() -> tuple[str, ...]:
    """Names of the built-in clusters, in PRESETS order."""
    return tuple(PRESETS)


def load_cluster(spec: Cluster | str | os.PathLike[str] | Mapping[str, Any]) -> Cluster:
    """A Cluster from a Cluster, a preset name, ``"local:N"``, a JSON file path, a dict or a TF cluster.

    A dict is the cluster JSON form, unless it has none of its keys and maps job names to lists of
    "host:port" addresses (``{"worker": ["host:0", ...]}``): then, like a ``tf.train.ClusterSpec``,
    it names a running TF cluster, read by ``cluster_from_spec`` with its defaults.
    """
    if isinstance(spec, Cluster):
        return spec
    if _is_tf_cluster_spec(spec):
        return cluster_from_spec(spec)
    if isinstance(spec, Mapping):
        return cluster_from_spec(spec) if _looks_like_spec_dict(spec) else Cluster.from_dict(spec)
    if not isinstance(spec, (str, os.PathLike)):
        raise _bad("cluster", spec, "a Cluster, a preset name, \"local:N\", a JSON file path, a dict "
                   "or a tf.train.ClusterSpec")
    text = os.fspath(spec)
    if text in PRESETS:
        return PRESETS[text]()
    if text.startswith("local:"):
        n = text[len("local:"):]
        if not n.isdecimal() or not 1 <= int(n) <= MAX_LOCAL_WORKERS:
            raise _bad("cluster", text, f'"local:N" with N an integer from 1 to {MAX_LOCAL_WORKERS}')
        return local_cluster(int(n))
    if os.path.isfile(text):
        return Cluster.load_json(text)
    close = difflib.get_close_matches(text, list(PRESETS), n=1)
    raise UnknownClusterError(
        f"unknown cluster {_show(text)}"
        + (f' (did you mean "{close[0]}"?)' if close else "")
        + (" (no such file)" if text.endswith(".json") else "")
        + f'; presets: {", ".join(PRESETS)}; also "local:N" (N = 1..{MAX_LOCAL_WORKERS} local TF workers), '
        "a path to a cluster .json file, a dict or a Cluster"
    )
