"""OpGraph: one training step of a TF graph as immutable numpy arrays.

Ops are stored in a topological order (index = position), so every data or control edge goes
from a lower to a higher index. Everything downstream (grouping, costs, simulator, env) reads
these arrays and never touches TensorFlow; the serialised GraphDef rides along as opaque bytes
for the parts that execute or export the graph.

Sizes: an output's bytes are ``prod(dims) * dtype size``. Resource handles count 0 bytes (they
name a variable, the data stays where the variable lives); string and variant elements count
``tf_import.op_facts.OPAQUE_ELEMENT_BYTES`` each, an estimate since their size is only known at run time.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .errors import GraphFormatError

DEVICE_KINDS = ("CPU", "GPU")
CPU_ONLY = 0b01  # device_mask value of an op that may only run on a CPU
ANY_KIND = 0b11  # device_mask value of an op with kernels for every kind
MAX_RANK = 8  # output_dims is padded to this many dimensions with -1
# Ops whose output shares their (first data) input's buffer in TF's executor instead of
# allocating a new one: views and reads of a resource variable (its buffer is the variable's).
BUFFER_FORWARDING_OPS = frozenset({"Identity", "Snapshot", "Reshape", "Squeeze", "ExpandDims", "StopGradient",
                                   "ReadVariableOp"})
FORMAT_VERSION = 1

# Array fields, in file order, with the dtype each is stored as.
_ARRAY_FIELDS: dict[str, Any] = {
    "op_names": np.str_,
    "op_types": np.str_,
    "flops": np.float64,
    "persistent_bytes": np.int64,
    "device_mask": np.uint8,
    "colocation": np.int32,
    "group": np.int32,
    "output_ptr": np.int64,
    "output_dims": np.int64,
    "output_dtypes": np.str_,
    "output_bytes": np.int64,
    "edge_src": np.int32,
    "edge_dst": np.int32,
    "edge_src_output": np.int32,
    "edge_bytes": np.int64,
}


@dataclass(frozen=True, eq=False)
class OpGraph:
    """An immutable, array-based graph of one training step.

    Per op (length ``n_ops``, topological order): ``op_names``, ``op_types``, ``flops`` (a coarse
    analytical FLOP estimate used to balance groups, not a runtime), ``persistent_bytes`` (variable
    and optimizer-slot memory that stays resident), ``device_mask`` (bit k set: may run on
    ``DEVICE_KINDS[k]``), ``colocation`` (hard co-location component: TF requires these ops on one
    device) and ``group`` (the co-location group the agent places; groups are numbered by their
    first op).

    Per output (op i owns ``output_ptr[i]:output_ptr[i+1]``): ``output_dims`` (padded with -1 to
    ``MAX_RANK``), ``output_dtypes``, ``output_bytes``.

    Per edge (sorted by source, then destination): ``edge_src``, ``edge_dst``,
    ``edge_src_output`` (output index on the source op, -1 for a control edge) and
    ``edge_bytes`` (0 for control edges). An output consumed twice by one op is one edge.

    ``graph_def`` is the serialised TF GraphDef (step plus initialisers), ``train_op`` and
    ``init_op`` the op names to run, ``feeds`` the placeholders a run must feed
    (name, shape, dtype) and ``meta`` free-form provenance (source, builder parameters, TF version).
    """

    name: str
    op_names: np.ndarray
    op_types: np.ndarray
    flops: np.ndarray
    persistent_bytes: np.ndarray
    device_mask: np.ndarray
    colocation: np.ndarray
    group: np.ndarray
    output_ptr: np.ndarray
    output_dims: np.ndarray
    output_dtypes: np.ndarray
    output_bytes: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_src_output: np.ndarray
    edge_bytes: np.ndarray
    graph_def: bytes = b""
    train_op: str = ""
    init_op: str = ""
    feeds: tuple[dict[str, Any], ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, dtype in _ARRAY_FIELDS.items():
            array = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        object.__setattr__(self, "feeds", tuple(dict(f) for f in self.feeds))
        self._check_consistency()

    def _check_consistency(self) -> None:
        n = len(self.op_names)
        for name in ("op_types", "flops", "persistent_bytes", "device_mask", "colocation", "group"):
            if len(getattr(self, name)) != n:
                raise GraphFormatError(f"OpGraph.{name} has {len(getattr(self, name))} entries, expected n_ops = {n}")
        if len(self.output_ptr) != n + 1 or (n and self.output_ptr[-1] != len(self.output_bytes)):
            raise GraphFormatError("OpGraph.output_ptr must have n_ops + 1 entries ending at the output count")
        if self.output_dims.ndim != 2 or self.output_dims.shape != (len(self.output_bytes), MAX_RANK):
            raise GraphFormatError(f"OpGraph.output_dims must have shape (n_outputs, {MAX_RANK})")
        m = len(self.edge_src)
        for name in ("edge_dst", "edge_src_output", "edge_bytes"):
            if len(getattr(self, name)) != m:
                raise GraphFormatError(f"OpGraph.{name} has {len(getattr(self, name))} entries, expected {m} edges")
        if m and (self.edge_src.min() < 0 or self.edge_dst.max() >= n or np.any(self.edge_src >= self.edge_dst)):
            raise GraphFormatError("OpGraph edges must go from a lower to a higher op index (topological order)")
        if n and (self.group.min() != 0 or np.unique(self.group).size != self.group.max() + 1):
            raise GraphFormatError("OpGraph.group must number groups 0..n_groups-1 without gaps")

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_edges(self) -> int:
        return len(self.edge_src)

    @cached_property
    def n_groups(self) -> int:
        return int(self.group.max()) + 1 if self.n_ops else 0

    @cached_property
    def digest(self) -> str:
        """A short fingerprint of what the runtimes read: the name and every per-op, per-output and per-edge array
        (grouping included; not the serialised GraphDef or the provenance in ``meta``). Two builds of a graph with
        the same digest place and simulate alike."""
        sha = hashlib.sha256(self.name.encode("utf-8"))
        for name in _ARRAY_FIELDS:
            array = getattr(self, name)
            sha.update(f"{name}:{array.dtype.str}:{array.shape}".encode("utf-8"))
            sha.update(array.tobytes() if array.dtype != object else "\x00".join(map(str, array)).encode("utf-8"))
        return sha.hexdigest()[:16]

    # ---- derived per-op and per-group arrays -------------------------------------------------
    @cached_property
    def op_output_bytes(self) -> np.ndarray:
        """Bytes produced by each op (sum over its outputs)."""
        owner = np.repeat(np.arange(self.n_ops), np.diff(self.output_ptr))
        return _readonly(np.bincount(owner, weights=self.output_bytes, minlength=self.n_ops).astype(np.int64))

    @cached_property
    def is_control_edge(self) -> np.ndarray:
        return _readonly(self.edge_src_output < 0)

    @cached_property
    def group_sizes(self) -> np.ndarray:
        return _readonly(np.bincount(self.group, minlength=self.n_groups))

    @cached_property
    def group_flops(self) -> np.ndarray:
        return _readonly(np.bincount(self.group, weights=self.flops, minlength=self.n_groups))

    @cached_property
    def group_persistent_bytes(self) -> np.ndarray:
        return _readonly(np.bincount(self.group, weights=self.persistent_bytes, minlength=self.n_groups).astype(np.int64))

    @cached_property
    def group_output_bytes(self) -> np.ndarray:
        """Bytes each group's ops output in a step (all their outputs, consumed inside the group or not)."""
        return _readonly(np.bincount(self.group, weights=self.op_output_bytes, minlength=self.n_groups).astype(np.int64))

    @cached_property
    def group_device_mask(self) -> np.ndarray:
        """Device kinds every op of the group can run on (bitwise AND over its ops)."""
        mask = np.full(self.n_groups, ANY_KIND, dtype=np.uint8)
        np.bitwise_and.at(mask, self.group, self.device_mask)
        return _readonly(mask)

    def ops_of_group(self, group: int) -> np.ndarray:
        """Indices of the ops in ``group``."""
        return np.flatnonzero(self.group == group)

    def index_of(self, op_name: str) -> int:
        """Index of the op called ``op_name``."""
        try:
            return self.index_by_name[op_name]
        except KeyError:
            raise KeyError(f"no op named {op_name!r} in graph {self.name!r} ({self.n_ops} ops)") from None

    @cached_property
    def index_by_name(self) -> dict[str, int]:
        """Op name -> op index (built once per graph)."""
        return {name: i for i, name in enumerate(self.op_names.tolist())}

    def with_groups(self, group: np.ndarray, **meta: Any) -> "OpGraph":
        """A copy with another grouping (numbered 0..k-1) and extra ``meta`` entries."""
        return replace(self, group=group, meta={**self.meta, **meta})

    # ---- serialisation (npz, no pickle) ------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the graph to ``path`` (an .npz file), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "train_op": self.train_op,
            "init_op": self.init_op,
            "feeds": list(self.feeds),
            "meta": self.meta,
        }
        arrays = {name: getattr(self, name) for name in _ARRAY_FIELDS}
        arrays["graph_def"] = np.frombuffer(self.graph_def, dtype=np.uint8)
        arrays["header"] = np.array(json.dumps(header, sort_keys=True))
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "OpGraph":
        """Read a graph written by :meth:`save`; a corrupt or foreign file raises GraphFormatError."""
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                arrays = {name: data[name] for name in _ARRAY_FIELDS}
                graph_def = data["graph_def"].tobytes()
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as error:
            raise GraphFormatError(f"{path}: not a readable OpGraph file ({type(error).__name__}: {error})") from error
        if header.get("format_version") != FORMAT_VERSION:
            raise GraphFormatError(
                f"{path}: OpGraph format version {header.get('format_version')!r}, this package reads {FORMAT_VERSION}"
            )
        return cls(
            name=header["name"],
            graph_def=graph_def,
            train_op=header["train_op"],
            init_op=header["init_op"],
            feeds=tuple(header["feeds"]),
            meta=header["meta"],
            **arrays,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpGraph):
            return NotImplemented
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, np.ndarray):
                if mine.shape != theirs.shape or not np.array_equal(mine, theirs):
                    return False
            elif mine != theirs:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, ops={self.n_ops}, edges={self.n_edges}, groups={self.n_groups})"


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array
