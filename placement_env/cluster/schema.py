"""The JSON form of a cluster: its keys, its validation, and reading and writing it.

A cluster is written as its devices plus either a ``topology`` (switches and full-duplex links,
from which every pair's route follows) or a ``default_link`` (the most common bandwidth and
latency) with ``links`` overrides per pair, so a file stays short and readable; reading it back
gives an equal cluster. ``transfer_overhead_s`` is the fixed cost per cross-device tensor;
``host_transfer`` (``{"per_tensor_s": ..., "bandwidth": ...}``) the CPU work on each end of one. Every problem is a ``ClusterConfigError`` that names the key, the value
and the rule (``links[0].dst = "gpu:7": must be the name of a device of this cluster: ...``).
``Cluster.to_dict/from_dict/to_json/from_json/save/load_json`` call the functions here.
"""
from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..errors import ClusterConfigError
from ..opgraph import DEVICE_KINDS
from ..output_paths import check_output_file, write_output_file
from .checks import bad, bytes_per_s, check_bool, check_device_count, nonempty_str, seconds, show
from .device import FRACTIONS, Device, check_unique, device_fields
from .host_transfer import HostTransfer
from .topology import Link as TopologyLink
from .topology import Topology

if TYPE_CHECKING:
    from .model import Cluster

C = TypeVar("C", bound="Cluster")

DEVICE_REQUIRED = ("name", "kind", "peak_flops", "memory_bandwidth", "memory_bytes", "concurrency")
DEVICE_OPTIONAL = ("tf_device", "op_overhead_s", *FRACTIONS)
CLUSTER_REQUIRED = ("name", "devices")
CLUSTER_OPTIONAL = ("default_link", "links", "topology", "transfer_overhead_s", "buffer_forwarding", "accumulate_sums",
                    "update_traffic", "copy_streams", "ready_fifo", "host_transfer", "local_workers", "remote_target",
                    "remote_jobs")
TOPOLOGY_REQUIRED = ("links",)
TOPOLOGY_OPTIONAL = ("switches",)
TOPOLOGY_LINK_REQUIRED = ("a", "b", "bandwidth")
TOPOLOGY_LINK_OPTIONAL = ("latency", "label")
LINK_REQUIRED = ("src", "dst")
LINK_OPTIONAL = ("bandwidth", "latency", "bidirectional")

Link = tuple[float, float]  # (bandwidth bytes/s, latency s) of one direction


def check_keys(obj: object, path: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    """Return ``obj`` if it is a dict with all ``required`` keys and no keys outside both lists."""
    accepted = ", ".join(required + optional)
    if not isinstance(obj, dict):
        raise bad(path, obj, f"a JSON object with keys {accepted}")
    for key in obj:
        if key not in required and key not in optional:
            close = difflib.get_close_matches(str(key), required + optional, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise ClusterConfigError(f'{path}: unknown key {show(key)}{hint}; accepted keys: {accepted}')
    for key in required:
        if key not in obj:
            raise ClusterConfigError(
                f'{path}: missing required key "{key}"; required keys: {", ".join(required)}'
                + (f'; optional keys: {", ".join(optional)}' if optional else "")
            )
    return obj


# -- writing ----------------------------------------------------------------------------------


def to_dict(cluster: Cluster) -> dict[str, Any]:
    """The JSON form: the most common link as ``default_link``, other pairs as ``links``."""
    n = cluster.n_devices
    pair = {(i, j): (float(cluster.bandwidth[i, j]), float(cluster.latency[i, j]))
            for i in range(n) for j in range(n) if i != j}
    out: dict[str, Any] = {
        "name": cluster.name,
        "local_workers": cluster.local_workers,
        "devices": [
            {"name": d.name, "kind": d.kind, "peak_flops": d.peak_flops,
             "memory_bandwidth": d.memory_bandwidth, "memory_bytes": d.memory_bytes,
             "concurrency": d.concurrency, "tf_device": d.tf_device, "op_overhead_s": d.op_overhead_s,
             **{key: getattr(d, key) for key in FRACTIONS if getattr(d, key) != 1.0}}
            for d in cluster.devices
        ],
    }
    if cluster.remote_target:
        out["remote_target"] = cluster.remote_target
        out["remote_jobs"] = {job: list(tasks) for job, tasks in cluster.remote_jobs.items()}
    if cluster.transfer_overhead_s:
        out["transfer_overhead_s"] = cluster.transfer_overhead_s
    if cluster.buffer_forwarding:
        out["buffer_forwarding"] = True
    if cluster.accumulate_sums:
        out["accumulate_sums"] = True
    if cluster.update_traffic:
        out["update_traffic"] = True
    if cluster.copy_streams:
        out["copy_streams"] = True
    if cluster.ready_fifo:
        out["ready_fifo"] = True
    if cluster.host_transfer is not None:
        out["host_transfer"] = cluster.host_transfer.to_dict()
    if cluster.topology is not None:
        out["topology"] = {
            "switches": list(cluster.topology.switches),
            "links": [{"a": link.a, "b": link.b, "bandwidth": link.bandwidth, "latency": link.latency,
                       "label": link.label} for link in cluster.topology.links],
        }
        return out
    if not pair:
        return out
    default = Counter(pair.values()).most_common(1)[0][0]
    out["default_link"] = {"bandwidth": default[0], "latency": default[1]}
    out["links"] = _link_overrides(cluster, pair, default)
    return out


def _link_overrides(cluster: Cluster, pair: dict[tuple[int, int], Link], default: Link) -> list[dict[str, Any]]:
    """The links that differ from ``default``: one bidirectional entry where both directions agree."""
    names = [d.name for d in cluster.devices]
    links = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            forward, backward = pair[i, j], pair[j, i]
            if forward == backward != default:
                links.append(_link_dict(names[i], names[j], forward, True))
                continue
            if forward != default:
                links.append(_link_dict(names[i], names[j], forward, False))
            if backward != default:
                links.append(_link_dict(names[j], names[i], backward, False))
    return links


def _link_dict(src: str, dst: str, link: Link, bidirectional: bool) -> dict[str, Any]:
    return {"src": src, "dst": dst, "bandwidth": link[0], "latency": link[1], "bidirectional": bidirectional}


def to_json(cluster: Cluster) -> str:
    """The JSON form as indented text."""
    return json.dumps(to_dict(cluster), indent=2) + "\n"


def save(cluster: Cluster, path: str | os.PathLike[str]) -> None:
    """Write ``to_json(cluster)`` to ``path``, making its folders; an OutputPathError if it is a folder, a link
    or under a file."""
    write_output_file(check_output_file(path, "path"), to_json(cluster).encode("utf-8"))


# -- reading ----------------------------------------------------------------------------------


def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
    """A ``cls`` (Cluster) from its JSON form; every problem is a ClusterConfigError naming the key."""
    data = check_keys(dict(data) if isinstance(data, Mapping) else data, "cluster",
                      CLUSTER_REQUIRED, CLUSTER_OPTIONAL)
    name = nonempty_str(data["name"], "name")
    devices = _devices(data["devices"])
    check_unique(devices)
    topology = _topology(data)
    if topology is None:
        bandwidth, latency = _link_matrices(data, devices)
    else:
        topology.check([d.name for d in devices])
        routes = topology.routes([d.name for d in devices])
        bandwidth, latency = routes.bandwidth, routes.latency
    return cls(name=name, devices=tuple(devices), bandwidth=bandwidth, latency=latency,
               local_workers=data.get("local_workers", 0), remote_target=data.get("remote_target", ""),
               remote_jobs=data.get("remote_jobs", {}), topology=topology,
               transfer_overhead_s=data.get("transfer_overhead_s", 0.0),
               buffer_forwarding=data.get("buffer_forwarding", False),
               accumulate_sums=data.get("accumulate_sums", False),
               update_traffic=data.get("update_traffic", False),
               copy_streams=data.get("copy_streams", False),
               ready_fifo=data.get("ready_fifo", False),
               host_transfer=HostTransfer.from_dict(data["host_transfer"]) if "host_transfer" in data else None)


def _topology(data: dict) -> Topology | None:
    """The ``topology`` of the JSON form (then ``default_link`` and ``links`` must be absent)."""
    if "topology" not in data:
        return None
    given = [key for key in ("default_link", "links") if key in data]
    if given:
        raise ClusterConfigError(f"{', '.join(given)}: a cluster with a topology takes every pair's link from "
                                 "its routes; give either topology or default_link/links, not both")
    raw = check_keys(data["topology"], "topology", TOPOLOGY_REQUIRED, TOPOLOGY_OPTIONAL)
    switches = raw.get("switches", [])
    if not isinstance(switches, list):
        raise bad("topology.switches", switches, "a list of switch names")
    if not isinstance(raw["links"], list):
        raise bad("topology.links", raw["links"], "a list of link objects")
    links = []
    for k, link in enumerate(raw["links"]):
        link = check_keys(link, f"topology.links[{k}]", TOPOLOGY_LINK_REQUIRED, TOPOLOGY_LINK_OPTIONAL)
        try:
            links.append(TopologyLink(**link))
        except ClusterConfigError as error:
            raise ClusterConfigError(f"topology.links[{k}]: {error}") from None
    return Topology(tuple(switches), tuple(links))


def _devices(raw_devices: object) -> list[Device]:
    """The devices of the JSON form; a missing ``tf_device`` is the next device of its kind on this host."""
    if not isinstance(raw_devices, list) or not raw_devices:
        raise bad("devices", raw_devices, "a non-empty list of device objects")
    check_device_count(len(raw_devices))
    devices: list[Device] = []
    per_kind: Counter[str] = Counter()
    for i, raw in enumerate(raw_devices):
        path = f"devices[{i}]"
        raw = dict(check_keys(raw, path, DEVICE_REQUIRED, DEVICE_OPTIONAL))
        kind = raw["kind"]
        if kind in DEVICE_KINDS:
            raw.setdefault("tf_device", f"/job:localhost/replica:0/task:0/device:{kind}:{per_kind[kind]}")
            per_kind[kind] += 1
        devices.append(Device(**device_fields(raw, path)))
    return devices


def from_json(cls: type[C], text: str) -> C:
    """Parse the JSON form (see ``from_dict``)."""
    if not isinstance(text, str):
        raise bad("cluster JSON", text, "a str of JSON text (to read a file, use Cluster.load_json(path))")
    return from_dict(cls, parse_json(text, "cluster JSON"))


# A cluster file's largest size. The JSON form of MAX_DEVICES devices under a topology or a default link
# takes under 1 MiB; one that lists a link for each pair of them (both directions alike) about 55 MiB.
# Parsing JSON takes several times the text's size in memory, so a larger file is refused unread.
MAX_FILE_BYTES = 64 * 2**20


def load_json(cls: type[C], path: str | os.PathLike[str]) -> C:
    """Read a cluster JSON file (UTF-8 text, at most MAX_FILE_BYTES); errors are prefixed with the file name."""
    if not isinstance(path, (str, os.PathLike)):
        raise bad("path", path, "a str or os.PathLike naming a cluster .json file")
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "is not a regular file" if os.path.exists(path) \
            else "no such file"
        raise ClusterConfigError(f"{path}: {what}; expected a cluster .json file (the JSON form Cluster.save writes)")
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ClusterConfigError(f"{path}: {size:,} bytes; a cluster JSON file has at most {MAX_FILE_BYTES:,} "
                                     f"bytes ({MAX_FILE_BYTES // 2**20} MiB)")
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ClusterConfigError(f"{path}: cannot read the cluster file ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClusterConfigError(f"{path}: not UTF-8 JSON text (byte {exc.start:,} is 0x{data[exc.start]:02x}); "
                                 "a cluster file is the JSON form that Cluster.save writes") from None
    data = parse_json(text, str(path))
    try:
        return from_dict(cls, data)
    except ClusterConfigError as exc:
        raise ClusterConfigError(f"{path}: {exc}") from None


def parse_json(text: str, source: str) -> Any:
    """``json.loads(text)``, failing with a ClusterConfigError that names ``source``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ClusterConfigError(f"{source}: not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of more digits than Python converts
        raise ClusterConfigError(f"{source}: not valid JSON: {exc}") from None


def _default_link(data: dict) -> Link | None:
    if "default_link" not in data:
        return None
    raw = check_keys(data["default_link"], "default_link", ("bandwidth", "latency"), ())
    return (bytes_per_s(raw["bandwidth"], "default_link.bandwidth"),
            seconds(raw["latency"], "default_link.latency"))


def _link_matrices(data: dict, devices: list[Device]) -> tuple[np.ndarray, np.ndarray]:
    """Bandwidth and latency matrices from ``default_link`` and the ``links`` overrides."""
    n = len(devices)
    bandwidth = np.full((n, n), np.nan)
    latency = np.full((n, n), np.nan)
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    default = _default_link(data)
    if default is not None:
        off = ~np.eye(n, dtype=bool)
        bandwidth[off], latency[off] = default
    index = {d.name: i for i, d in enumerate(devices)}
    links = data.get("links", [])
    if not isinstance(links, list):
        raise bad("links", links, "a list of link objects")
    set_by: dict[tuple[int, int], int] = {}
    for k, raw in enumerate(links):
        src, dst, values, bidirectional = _link(raw, f"links[{k}]", index, default)
        for i, j in ((src, dst), (dst, src)) if bidirectional else ((src, dst),):
            if (i, j) in set_by:
                raise ClusterConfigError(
                    f'links[{k}]: sets "{devices[i].name}" -> "{devices[j].name}" again '
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


def _link(raw: object, path: str, index: dict[str, int], default: Link | None) -> tuple[int, int, Link, bool]:
    """``(src, dst, (bandwidth, latency), bidirectional)`` of one entry of ``links``."""
    raw = check_keys(raw, path, LINK_REQUIRED, LINK_OPTIONAL)
    ends = []
    for key in ("src", "dst"):
        if not isinstance(raw[key], str) or raw[key] not in index:
            raise bad(f"{path}.{key}", raw[key], f"the name of a device of this cluster: {', '.join(index)}")
        ends.append(index[raw[key]])
    src, dst = ends
    if src == dst:
        raise bad(f"{path}.dst", raw["dst"], "a device other than src (a device's own link is free)")
    where = f'between "{raw["src"]}" and "{raw["dst"]}"'
    values = []
    for pos, key in enumerate(("bandwidth", "latency")):
        if key in raw:
            values.append(bytes_per_s(raw[key], f"{path}.{key}", where) if pos == 0
                          else seconds(raw[key], f"{path}.{key}", where))
        elif default is not None:
            values.append(default[pos])
        else:
            raise ClusterConfigError(f'{path}: missing key "{key}" and there is no default_link to fall back on')
    bidirectional = check_bool(raw.get("bidirectional", True), f"{path}.bidirectional", where)
    return src, dst, (values[0], values[1]), bidirectional
