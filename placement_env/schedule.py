"""The timeline of one simulated training step, as the simulator recorded it.

``simulate(..., schedule=True)`` returns a :class:`Schedule` in ``Measurement.schedule``: when
every op ran and on which device, every tensor that crossed a link (which output of which op,
from where to where, when and how many bytes), and the memory in use on every device after each
change the simulator made. It is plain read-only data, so whoever draws or analyses a step (the
Gantt chart of :mod:`placement_env.render`) reads the simulator's own answer and never re-derives
its model (transfer numbering, memory liveness).

It sits next to :class:`~placement_env.placement.Measurement`, which carries it, below every
runtime: it depends on numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["Schedule"]

_INT = np.int64
_FLOAT = np.float64
# (dtype, length group) of every field: fields of one group have one length (ops, transfers, changes).
_LAYOUT = {
    "op_device": (_INT, "op"), "op_start": (_FLOAT, "op"), "op_end": (_FLOAT, "op"),
    "transfer_src_op": (_INT, "transfer"), "transfer_output": (_INT, "transfer"),
    "transfer_src_device": (_INT, "transfer"), "transfer_dst_device": (_INT, "transfer"),
    "transfer_start": (_FLOAT, "transfer"), "transfer_end": (_FLOAT, "transfer"),
    "transfer_bytes": (_INT, "transfer"),
    "memory_time": (_FLOAT, "change"), "memory_in_use": (_INT, "change"),
}


@dataclass(frozen=True, eq=False)
class Schedule:
    """One simulated step: ops, transfers and memory over time (seconds from the step's start).

    Transfers are numbered as the simulator made them: one per (output, destination device), in
    the order of their first consuming edge (ops by index, each op's out-edges in edge order).
    ``memory_time[0]`` is 0 and ``memory_in_use[:, 0]`` the persistent bytes; column j > 0 is the
    state right after the simulator's j-th non-zero change, at ``memory_time[j]``. Changes at one
    instant keep the simulator's order, so times repeat and a spike of zero duration is kept: the
    column maximum is the simulator's peak exactly.
    """

    op_device: np.ndarray  # int64 [n_ops]: device of every op
    op_start: np.ndarray  # float64 [n_ops]
    op_end: np.ndarray  # float64 [n_ops]
    transfer_src_op: np.ndarray  # int64 [n_transfers]: the op whose output is sent
    transfer_output: np.ndarray  # int64 [n_transfers]: that output's index in OpGraph.output_bytes
    transfer_src_device: np.ndarray  # int64 [n_transfers]
    transfer_dst_device: np.ndarray  # int64 [n_transfers]
    transfer_start: np.ndarray  # float64 [n_transfers]: the link starts sending (after any queue)
    transfer_end: np.ndarray  # float64 [n_transfers]: the copy has arrived
    transfer_bytes: np.ndarray  # int64 [n_transfers]
    memory_time: np.ndarray  # float64 [n_changes + 1], non-decreasing
    memory_in_use: np.ndarray  # int64 [n_devices, n_changes + 1]: bytes in use from memory_time[j] on

    def __post_init__(self) -> None:
        lengths: dict[str, tuple[str, int]] = {}
        for f in fields(self):
            dtype, group = _LAYOUT[f.name]
            array = np.array(getattr(self, f.name), dtype=dtype)  # a private copy, made read-only
            array.setflags(write=False)
            object.__setattr__(self, f.name, array)
            expected_ndim = 2 if f.name == "memory_in_use" else 1
            if array.ndim != expected_ndim:
                raise ValueError(f"Schedule.{f.name} has shape {array.shape}; expected {expected_ndim} dimension(s)")
            first = lengths.setdefault(group, (f.name, array.shape[-1]))
            if array.shape[-1] != first[1]:
                raise ValueError(f"Schedule.{f.name} has length {array.shape[-1]} but {first[0]} has {first[1]}; "
                                 f"every per-{group} array needs the same length")

    @property
    def n_devices(self) -> int:
        return int(self.memory_in_use.shape[0])

    @property
    def makespan(self) -> float:
        """The step time: the last op's end (0 for an empty graph)."""
        return float(self.op_end.max()) if self.op_end.size else 0.0

    @property
    def memory_peak(self) -> np.ndarray:
        """int64 [n_devices]: the most bytes in use on each device at any moment of the step."""
        return self.memory_in_use.max(axis=1)

    @property
    def links(self) -> np.ndarray:
        """int64 [n_links, 2]: the directed (source, destination) device pairs that carried a transfer, sorted."""
        return self._link_index()[0]

    @property
    def transfer_link(self) -> np.ndarray:
        """int64 [n_transfers]: every transfer's row in :attr:`links`."""
        return self._link_index()[1]

    @property
    def link_bytes(self) -> np.ndarray:
        """int64 [n_links]: the bytes every link in :attr:`links` carried."""
        links, index = self._link_index()
        total = np.zeros(len(links), _INT)
        np.add.at(total, index, self.transfer_bytes)
        return total

    def _link_index(self) -> tuple[np.ndarray, np.ndarray]:
        pairs = np.stack([self.transfer_src_device, self.transfer_dst_device], axis=1)
        links, index = np.unique(pairs.reshape(-1, 2), axis=0, return_inverse=True)
        return links.astype(_INT), index.reshape(-1).astype(_INT)
