"""``HostTransfer``: cross-device tensors that cost CPU work on the sending and receiving device.

Between TF worker processes on one host (``local:N``) a tensor goes over loopback gRPC: the
sending worker encodes it (``grpc_tensor_coding``) and its gRPC thread writes it into a socket,
the receiving worker reads the socket and decodes the response into a new tensor before the
``_Recv`` op hands it to its consumers. Each end is a pass over the tensor's bytes plus a fixed
cost per RPC (rendezvous lookup, protobuf framing, thread hand-offs), run on the worker's own
CPU, so it delays that worker's ops instead of overlapping them as a copy engine's DMA would.

With ``Cluster.host_transfer`` set, the simulator runs every cross-device data tensor as a send
task on its source device's lanes, then the interconnect (whose link then only waits: the RPC's
round trip), then a receive task on its destination's lanes, each ``per_tensor_s + bytes /
bandwidth`` seconds of one thread. The two ends get one value because the step times that a fit
sees cannot tell them apart. Only clusters of CPU devices take it: a GPU's copies run on copy
engines beside its compute stream.

``remote_step_s``: what a step costs once for involving any worker besides the session's master,
device 0 (the worker a ``local:N`` session connects to): the master runs each other worker's partition
by a ``RunGraph`` RPC (master_session.cc, ``RunPartitions``), which carries the step's feeds to it and
whose reply the step waits for, while its own partition runs in process. The simulator adds it to the
step time of every placement that puts an op on a device other than 0.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import bad, bytes_per_s, seconds

HOST_TRANSFER_KEYS = ("per_tensor_s", "bandwidth")
OPTIONAL_KEYS = ("remote_step_s",)


@dataclass(frozen=True)
class HostTransfer:
    """Seconds of one thread that each end of a cross-device tensor spends: ``per_tensor_s + bytes / bandwidth``."""

    per_tensor_s: float
    bandwidth: float  # bytes/s one thread encodes or decodes (socket copy included)
    remote_step_s: float = 0.0  # once per step that runs ops on a worker other than the master (device 0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_tensor_s", seconds(self.per_tensor_s, "host_transfer.per_tensor_s"))
        object.__setattr__(self, "bandwidth", bytes_per_s(self.bandwidth, "host_transfer.bandwidth"))
        object.__setattr__(self, "remote_step_s", seconds(self.remote_step_s, "host_transfer.remote_step_s"))

    def seconds(self, n_bytes: float) -> float:
        """One end's CPU seconds for a tensor of ``n_bytes``."""
        return self.per_tensor_s + n_bytes / self.bandwidth

    def to_dict(self) -> dict[str, float]:
        """The JSON form; ``remote_step_s`` only when set (so clusters without it keep their digest)."""
        out = {"per_tensor_s": self.per_tensor_s, "bandwidth": self.bandwidth}
        if self.remote_step_s:
            out["remote_step_s"] = self.remote_step_s
        return out

    @classmethod
    def from_dict(cls, raw: object) -> HostTransfer:
        """From the JSON form ``{"per_tensor_s": ..., "bandwidth": ...[, "remote_step_s": ...]}``; a clear error
        for anything else."""
        if (not isinstance(raw, Mapping) or not set(HOST_TRANSFER_KEYS) <= set(raw)
                or not set(raw) <= set(HOST_TRANSFER_KEYS + OPTIONAL_KEYS)):
            raise bad("host_transfer", raw if not isinstance(raw, Mapping) else dict(raw),
                      'a JSON object with the keys "per_tensor_s" (seconds >= 0) and "bandwidth" (bytes/s > 0), '
                      'and optionally "remote_step_s" (seconds >= 0)')
        return cls(raw["per_tensor_s"], raw["bandwidth"], raw.get("remote_step_s", 0.0))


def check_host_transfer(value: Any, device_kinds: list[str], device_names: list[str]) -> HostTransfer | None:
    """``value`` if it is None or a HostTransfer on a cluster of CPU devices only."""
    if value is None:
        return None
    if not isinstance(value, HostTransfer):
        raise bad("host_transfer", value, "a HostTransfer or None")
    for kind, name in zip(device_kinds, device_names):
        if kind != "CPU":
            raise bad("host_transfer", value.to_dict(),
                      f"absent on a cluster with a {kind} (device \"{name}\"): host transfers model CPU worker "
                      "processes, whose copies run on their own cores")
    return value
