"""``cluster_from_spec``: a Cluster of the devices of a running TF cluster (a ``tf.train.ClusterSpec``).

This is the only part of the package that opens network connections: it connects to every
task of the spec and asks the master for its device list. It is therefore called explicitly;
``load_cluster`` never reaches it. TensorFlow is imported only when devices are listed.
"""
from __future__ import annotations

import re
import socket
import time
from collections.abc import Mapping
from typing import Any

from ..errors import ClusterConfigError, ClusterUnreachableError
from ..opgraph import DEVICE_KINDS
from .checks import MEMORY_RANGE, bad, check_bool, check_number, remote_jobs, show, split_address
from .device import Device
from .hardware import CPU_OP_OVERHEAD_S, GB, GIB, GPU_OP_OVERHEAD_S, PCIE3
from .model import Cluster, linked_cluster

# Defaults for the devices of a TF cluster found by cluster_from_spec. Its hardware is unknown,
# so these are deliberately modest; calibration (pe.calibrate) replaces them with measured values.
_REMOTE_CPU = dict(
    peak_flops=2.5e9 * 32,  # one core: 2.5 GHz x 32 fp32 FLOP/cycle (AVX2 FMA), as for local:N
    memory_bandwidth=10.0 * GB,  # what one core streams from DRAM, roughly
    concurrency=1,
    op_overhead_s=CPU_OP_OVERHEAD_S,
)
_REMOTE_GPU = dict(
    peak_flops=8.0e12,  # a mid-range datacenter GPU of the last decade (T4: 8.1, V100: 15.7 TFLOP/s fp32)
    memory_bandwidth=300.0 * GB,  # T4: 320 GB/s GDDR6
    concurrency=1,  # one compute stream per GPU in TF
    op_overhead_s=GPU_OP_OVERHEAD_S,
)
# TF reports a nominal 256 MiB memory_limit for CPU devices, not the host's RAM; a remote host's
# RAM is unknown, so a CPU device gets this much unless cpu_memory_bytes says otherwise.
_TF_NOMINAL_CPU_LIMIT = 256 * 2**20
_REMOTE_CPU_MEMORY = 16 * GIB
_SAME_TASK_LINK = PCIE3  # devices of one server: host <-> GPU copies over PCIe 3.0 x16
# Different tasks: tensors go over gRPC on the network. 10 GbE carries 1.25 GB/s raw, gRPC gets
# about 1 GB/s; ~100 us per transfer (RPC + serialisation). Calibration measures the real link.
_NETWORK_LINK = (1.0 * GB, 100e-6)
_TF_DEVICE = re.compile(r"/job:(?P<job>[^/]+)/replica:\d+/task:(?P<task>\d+)/device:(?P<type>[^:]+):(?P<index>\d+)")

Listed = tuple[str, str, int]  # (TF device name, device type, memory_limit_bytes) of one listed device


def is_tf_cluster_spec(spec: object) -> bool:
    """Whether ``spec`` is a ``tf.train.ClusterSpec`` (checked without importing TensorFlow)."""
    return type(spec).__name__ == "ClusterSpec" and hasattr(spec, "as_cluster_def") and hasattr(spec, "as_dict")


def spec_jobs(spec: object) -> dict[str, tuple[str, ...]]:
    """``{job: addresses}`` of a ``tf.train.ClusterSpec``, a ClusterDef or a ``{job: [...]}`` mapping."""
    if is_tf_cluster_spec(spec):
        spec = spec.as_dict()
    elif type(spec).__name__ == "ClusterDef" and hasattr(spec, "job"):
        spec = {job.name: dict(job.tasks) for job in spec.job}
    if isinstance(spec, Mapping) and not spec:
        raise ClusterConfigError("cluster spec is empty: give at least one job with one \"host:port\" task")
    return remote_jobs(spec, "cluster spec")


def _check_reachable(jobs: Mapping[str, tuple[str, ...]], deadline: float) -> None:
    """Open (and close) a TCP connection to every task, so an unreachable one is named quickly."""
    for job, tasks in jobs.items():
        for task, address in enumerate(tasks):
            host, port = split_address(address)
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError("no time left")
                socket.create_connection((host, port), timeout=left).close()
            except OSError as exc:
                raise ClusterUnreachableError(
                    f'TF server {address} (job "{job}", task {task}) is unreachable: '
                    f"{exc.strerror or exc or type(exc).__name__}") from None


def _list_devices(target: str, timeout_s: float) -> list[Listed]:
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


def _wanted_devices(listed: list[Listed], jobs: dict[str, tuple[str, ...]], wanted: dict[str, tuple[str, ...]],
                    target: str) -> list[tuple[str, str, int, str]]:
    """``(label, kind, memory, tf_name)`` of the listed CPU/GPU devices of the ``wanted`` jobs, in
    job, task, kind, index order; fails if a wanted task has none (its server runs another spec)."""
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
            f"with this same cluster spec {show(jobs)}? devices listed: {', '.join(n for n, _, _ in listed) or 'none'}")
    return [(label, kind, memory, tf_name) for _, label, kind, memory, tf_name in found]


def _remote_device(label: str, kind: str, memory: int, tf_name: str, cpu_memory_bytes: int | None) -> Device:
    """A listed device with the default speeds of its kind; a CPU's nominal TF memory limit is
    replaced by ``cpu_memory_bytes`` (or a 16 GiB default)."""
    defaults = _REMOTE_CPU if kind == "CPU" else _REMOTE_GPU
    if kind == "CPU" and (memory == _TF_NOMINAL_CPU_LIMIT or memory <= 0):
        memory = cpu_memory_bytes or _REMOTE_CPU_MEMORY
    elif kind == "CPU" and cpu_memory_bytes:
        memory = cpu_memory_bytes
    return Device(name=label, kind=kind, memory_bytes=int(memory), tf_device=tf_name, **defaults)


def _task_link(a: Device, b: Device) -> tuple[float, float]:
    """PCIe-like between devices of one task (server), network-like between tasks."""
    same_task = a.tf_device.split("/device:")[0] == b.tf_device.split("/device:")[0]
    return _SAME_TASK_LINK if same_task else _NETWORK_LINK


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
    jobs = spec_jobs(spec)
    if job is not None and (not isinstance(job, str) or job not in jobs):
        raise bad("job", job, f"a job of the cluster spec: {', '.join(jobs)}")
    master_job = job if job is not None else ("worker" if "worker" in jobs else next(iter(jobs)))
    target = f"grpc://{jobs[master_job][0]}"
    wanted = {job: jobs[job]} if job is not None else jobs
    check_number(timeout_s, "timeout_s", 0, what="a finite number of seconds", low_open=True)
    if cpu_memory_bytes is not None:
        check_number(cpu_memory_bytes, "cpu_memory_bytes", *MEMORY_RANGE, what="a positive whole number of bytes",
                     integer=True)
    if check_bool(probe, "probe"):
        deadline = time.monotonic() + float(timeout_s)
        _check_reachable(jobs, deadline)
        listed = _list_devices(target, max(deadline - time.monotonic(), 0.5))
    else:
        listed = [(f"/job:{j}/replica:0/task:{t}/device:CPU:0", "CPU", _TF_NOMINAL_CPU_LIMIT)
                  for j, tasks in wanted.items() for t in range(len(tasks))]
    devices = [_remote_device(*found, cpu_memory_bytes) for found in _wanted_devices(listed, jobs, wanted, target)]
    cluster_name = name if name is not None else f"tf:{jobs[master_job][0]}"
    return linked_cluster(cluster_name, devices, _task_link, remote_target=target, remote_jobs=jobs)
