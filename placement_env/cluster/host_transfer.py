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
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import bad, bytes_per_s, seconds

HOST_TRANSFER_KEYS = ("per_tensor_s", "bandwidth")


@dataclass(frozen=True)
class HostTransfer:
    """Seconds of one thread that each end of a cross-device tensor spends: ``per_tensor_s + bytes / bandwidth``."""

    per_tensor_s: float
    bandwidth: float  # bytes/s one thread encodes or decodes (socket copy included)

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_tensor_s", seconds(self.per_tensor_s, "host_transfer.per_tensor_s"))
        object.__setattr__(self, "bandwidth", bytes_per_s(self.bandwidth, "host_transfer.bandwidth"))

    def seconds(self, n_bytes: float) -> float:
        """One end's CPU seconds for a tensor of ``n_bytes``."""
        return self.per_tensor_s + n_bytes / self.bandwidth

    def to_dict(self) -> dict[str, float]:
        return {"per_tensor_s": self.per_tensor_s, "bandwidth": self.bandwidth}

    @classmethod
    def from_dict(cls, raw: object) -> HostTransfer:
        """From the JSON form ``{"per_tensor_s": ..., "bandwidth": ...}``; a clear error for anything else."""
        if not isinstance(raw, Mapping) or set(raw) != set(HOST_TRANSFER_KEYS):
            raise bad("host_transfer", raw if not isinstance(raw, Mapping) else dict(raw),
                      'a JSON object with exactly the keys "per_tensor_s" (seconds >= 0) and "bandwidth" '
                      "(bytes/s > 0)")
        return cls(raw["per_tensor_s"], raw["bandwidth"])


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
