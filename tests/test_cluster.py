"""Cluster presets, validation messages, JSON round trips and load_cluster's accepted forms."""
from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest

from placement_env.cluster import (PRESETS, Cluster, Device, Link, Topology, load_cluster, local_cluster, preset_names,
                                   topology_cluster)
from placement_env.errors import ClusterConfigError, OutputPathError, UnknownClusterError
from placement_env.opgraph import DEVICE_KINDS


def small() -> dict:
    """A valid three-device cluster in the JSON form, fresh for each test to break."""
    gpu = {"kind": "GPU", "peak_flops": 4e12, "memory_bandwidth": 2.4e11, "memory_bytes": 12 * 2**30,
           "concurrency": 1}
    return {
        "name": "small",
        "devices": [
            {"name": "cpu:0", "kind": "CPU", "peak_flops": 1e12, "memory_bandwidth": 6.8e10,
             "memory_bytes": 2**38, "concurrency": 18},
            {"name": "gpu:0", **gpu},
            {"name": "gpu:1", **gpu},
        ],
        "default_link": {"bandwidth": 12e9, "latency": 1e-5},
    }


def config_error(data: dict) -> str:
    with pytest.raises(ClusterConfigError) as info:
        Cluster.from_dict(data)
    return str(info.value)


@pytest.mark.parametrize("name", preset_names())
def test_presets_validate_and_round_trip(name: str, tmp_path) -> None:
    cluster = load_cluster(name)
    assert cluster.name == name and cluster == PRESETS[name]()
    assert Cluster.from_json(cluster.to_json()) == cluster
    assert Cluster.from_dict(json.loads(json.dumps(cluster.to_dict()))) == cluster
    path = tmp_path / f"{name}.json"
    cluster.save(path)
    assert Cluster.load_json(path) == cluster and load_cluster(str(path)) == cluster
    assert load_cluster(path) == cluster and hash(load_cluster(path)) == hash(cluster)
    assert pickle.loads(pickle.dumps(cluster)) == cluster
    assert cluster.describe().count("\n") >= cluster.n_devices
    n = cluster.n_devices
    assert cluster.bandwidth.shape == cluster.latency.shape == (n, n)
    assert np.all(np.isinf(np.diag(cluster.bandwidth))) and np.all(np.diag(cluster.latency) == 0)
    assert [DEVICE_KINDS[k] for k in cluster.kinds] == [d.kind for d in cluster.devices]
    assert all(cluster.device_index(d.name) == i for i, d in enumerate(cluster.devices))


def test_paper_machines() -> None:
    two, four = load_cluster("paper-2gpu"), load_cluster("paper-4gpu")
    assert two.n_devices == 3 and four.n_devices == 5
    assert list(two.kinds) == [0, 1, 1] and list(four.kinds) == [0, 1, 1, 1, 1]
    assert two.is_gpu.tolist() == [False, True, True] and four.is_gpu.dtype == bool
    assert list(two.memory_bytes[1:]) == [12 * 2**30] * 2
    assert two.devices[1].tf_device == "/job:localhost/replica:0/task:0/device:GPU:0"
    assert 4.3e12 < two.peak_flops[1] < 4.4e12 and two.concurrency.tolist() == [18, 1, 1]
    assert two.bandwidth[0, 1] > two.bandwidth[1, 2]  # host copies a bit faster than GPU peer


def test_arrays_are_read_only_copies() -> None:
    cluster = load_cluster("paper-2gpu")
    for array in (cluster.bandwidth, cluster.latency, cluster.kinds, cluster.is_gpu, cluster.peak_flops,
                  cluster.memory_bandwidth, cluster.memory_bytes, cluster.concurrency):
        with pytest.raises(ValueError):
            array[0] = 1
    bandwidth = cluster.bandwidth.copy()
    copy = Cluster("copy", cluster.devices, bandwidth, cluster.latency)
    bandwidth[0, 1] = 1.0
    assert copy.bandwidth[0, 1] == cluster.bandwidth[0, 1]


@pytest.mark.parametrize("n", [1, 4])
def test_local_workers(n: int) -> None:
    cluster = load_cluster(f"local:{n}")
    assert cluster.local_workers == n == cluster.n_devices and set(cluster.kinds) == {0}
    assert cluster.devices[-1].tf_device == f"/job:worker/replica:0/task:{n - 1}/device:CPU:0"
    assert cluster.concurrency.tolist() == [1] * n and cluster.memory_bytes[0] > 0
    assert Cluster.from_json(cluster.to_json()) == cluster == local_cluster(n)


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local:-2", "local:1000", "local:", "local:2.5"])
def test_bad_local_specs(spec: str) -> None:
    with pytest.raises(ClusterConfigError, match="from 1 to 64"):
        load_cluster(spec)


def test_unknown_name_lists_presets() -> None:
    with pytest.raises(UnknownClusterError) as info:
        load_cluster("paper-3gpu")
    message = str(info.value)
    assert all(name in message for name in preset_names())
    assert "local:N" in message and ".json" in message and 'did you mean "paper-' in message
    with pytest.raises(UnknownClusterError, match="no such file"):
        load_cluster("/nonexistent/cluster.json")


def test_load_cluster_forms() -> None:
    cluster = load_cluster("paper-4gpu")
    assert load_cluster(cluster) is cluster
    assert load_cluster(small()).name == "small"
    with pytest.raises(ClusterConfigError, match="a Cluster, a preset name"):
        load_cluster(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d["default_link"].update(bandwidth=-5.0),
     ["default_link.bandwidth = -5.0", "positive number of bytes/s"]),
    (lambda d: d["devices"][1].update(memory_bytes=0),
     ["devices[1].memory_bytes = 0", 'device "gpu:0"', "positive whole number of bytes"]),
    (lambda d: d["devices"][2].update(kind="TPU"), ['devices[2].kind = "TPU"', '"CPU" or "GPU"']),
    (lambda d: d["devices"][2].update(name="gpu:0"),
     ['devices[2].name = "gpu:0"', "unique", "devices[1]"]),
    (lambda d: d.update(links=[{"src": "cpu:0", "dst": "gpu:7", "bandwidth": 1e9}]),
     ['links[0].dst = "gpu:7"', "cpu:0, gpu:0, gpu:1"]),
    (lambda d: d.update(link=[]), ['unknown key "link"', 'did you mean "links"', "accepted keys: name, devices"]),
    (lambda d: d.update(links=[{"src": "gpu:0", "dst": "gpu:1", "bandwidth": -5.0}]),
     ["links[0].bandwidth = -5.0", 'between "gpu:0" and "gpu:1"', "positive number of bytes/s"]),
    (lambda d: d["devices"][0].pop("peak_flops"), ['devices[0]: missing required key "peak_flops"']),
    (lambda d: d["devices"][0].update(peak_flops="1e12"), ['devices[0].peak_flops = "1e12"', "FLOP/s"]),
    (lambda d: d["devices"][0].update(concurrency=2.5), ["devices[0].concurrency = 2.5", "positive integer"]),
    (lambda d: d["devices"][0].update(flops=1), ['devices[0]: unknown key "flops"', "accepted keys"]),
    (lambda d: d["default_link"].update(latency=float("nan")), ["default_link.latency = NaN", "seconds >= 0"]),
    (lambda d: d.pop("default_link"), ["default_link: missing", '"cpu:0" -> "gpu:0"']),
    (lambda d: d.update(devices=[]), ["devices = []", "non-empty list"]),
    (lambda d: d.update(local_workers=2), ["local_workers = 2", "number of devices (3)"]),
    (lambda d: d.update(links=[{"src": "gpu:0", "dst": "gpu:1", "latency": 0.0},
                               {"src": "gpu:1", "dst": "gpu:0", "latency": 0.0}]),
     ['links[1]: sets "gpu:1" -> "gpu:0" again', "links[0]"]),
])
def test_bad_json_names_the_field(edit, expected: list[str]) -> None:
    data = small()
    edit(data)
    message = config_error(data)
    for part in expected:
        assert part in message, message


def test_errors_from_files_and_text_name_the_source(tmp_path) -> None:
    path = tmp_path / "bad.json"
    data = small()
    data["devices"][0]["memory_bytes"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(ClusterConfigError, match=r"bad\.json: devices\[0\]\.memory_bytes = 0"):
        load_cluster(str(path))
    with pytest.raises(ClusterConfigError, match="not valid JSON"):
        Cluster.from_json("{")


def test_direct_construction_is_validated() -> None:
    cluster = load_cluster("paper-2gpu")
    bandwidth = cluster.bandwidth.copy()
    bandwidth[1, 2] = -5.0
    with pytest.raises(ClusterConfigError, match=r'bandwidth\[1, 2\] = -5.0 \(from "gpu:0" to "gpu:1"\)'):
        Cluster("x", cluster.devices, bandwidth, cluster.latency)
    with pytest.raises(ClusterConfigError, match=r"shape \(2, 2\) must be \(3, 3\)"):
        Cluster("x", cluster.devices, np.ones((2, 2)), cluster.latency)
    with pytest.raises(ClusterConfigError, match="Device.memory_bandwidth = 0"):
        Device("gpu:9", "GPU", 1e12, 0, 2**30, 1, "/device:GPU:9")
    with pytest.raises(ClusterConfigError, match='device "gpu:9" is not in cluster "paper-2gpu"'):
        cluster.device_index("gpu:9")


def test_link_override_changes_only_its_pair() -> None:
    base = Cluster.from_dict(small())
    data = small()
    data["links"] = [{"src": "cpu:0", "dst": "gpu:1", "bandwidth": 5e9, "latency": 2e-5}]
    both = Cluster.from_dict(data)
    changed = base.bandwidth != both.bandwidth
    assert set(zip(*np.nonzero(changed))) == {(0, 2), (2, 0)}
    assert both.bandwidth[0, 2] == both.bandwidth[2, 0] == 5e9 and both.latency[2, 0] == 2e-5

    data["links"][0]["bidirectional"] = False
    one = Cluster.from_dict(data)
    assert set(zip(*np.nonzero(base.bandwidth != one.bandwidth))) == {(0, 2)}
    assert one.bandwidth[2, 0] == 12e9 and one.latency[2, 0] == 1e-5
    assert Cluster.from_json(one.to_json()) == one  # an asymmetric pair survives the round trip

    data["links"][0] = {"src": "gpu:0", "dst": "gpu:1", "latency": 0.0}  # bandwidth from the default
    partial = Cluster.from_dict(data)
    assert partial.bandwidth[1, 2] == 12e9 and partial.latency[2, 1] == 0.0


def test_default_tf_devices_and_equality() -> None:
    cluster = Cluster.from_dict(small())
    assert [d.tf_device.rsplit("/", 1)[1] for d in cluster.devices] == [
        "device:CPU:0", "device:GPU:0", "device:GPU:1"]
    assert cluster != load_cluster("paper-2gpu") and cluster != "small"


def test_the_digest_fingerprints_the_whole_definition():
    from placement_env.cluster import load_cluster

    k80 = load_cluster("k80-2gpu")
    assert k80.digest == load_cluster("k80-2gpu").digest and len(k80.digest) == 16
    assert dataclasses.replace(k80, name="paper-2gpu").digest != k80.digest
    assert dataclasses.replace(k80, accumulate_sums=True).digest != k80.digest
    assert dataclasses.replace(k80, update_traffic=False).digest != k80.digest
    assert dataclasses.replace(k80, transfer_overhead_s=1e-3).digest != k80.digest


def test_update_traffic_is_an_option_written_only_when_on():
    paper = load_cluster("paper-2gpu")
    assert not paper.update_traffic and "update_traffic" not in paper.to_json()  # the ideal presets' digests stay
    on = dataclasses.replace(paper, update_traffic=True)
    assert Cluster.from_json(on.to_json()) == on != paper and hash(on) != hash(paper)
    assert pickle.loads(pickle.dumps(on)) == on
    assert "memory traffic" in on.describe() and "memory traffic" not in paper.describe()
    with pytest.raises(ClusterConfigError, match='update_traffic = "yes": must be True or False'):
        dataclasses.replace(paper, update_traffic="yes")
    with pytest.raises(ClusterConfigError, match=r"update_traffic"):
        Cluster.from_dict({**small(), "update_traffic": 1})


def test_the_largest_cluster_loads_and_one_more_device_is_refused():
    device = {"kind": "GPU", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 2**34, "concurrency": 1}
    data = {"name": "big", "devices": [{"name": f"gpu:{i}", **device} for i in range(1024)],
            "default_link": {"bandwidth": 1e10, "latency": 1e-5}}
    assert Cluster.from_dict(data).n_devices == 1024
    data["devices"].append({"name": "gpu:1024", **device})
    with pytest.raises(ClusterConfigError, match="devices: 1,025 devices; a cluster has at most 1,024"):
        Cluster.from_dict(data)


def test_routes_of_a_switched_topology_match_each_pair_route():
    devices = [Device(f"gpu:{i}", "GPU", 1e13, 1e12, 2**34, 1, f"/device:GPU:{i}") for i in range(24)]
    links = [Link(f"gpu:{i}", f"sw:{i % 3}", (1 + i % 2) * 1e10, 1e-6 * (i % 4)) for i in range(24)]
    links += [Link("sw:0", "sw:1", 5e9, 2e-6), Link("sw:1", "sw:2", 5e9), Link("sw:0", "sw:2", 2e9, 1e-6)]
    topology = Topology(("sw:0", "sw:1", "sw:2"), tuple(links))
    cluster = topology_cluster("switched", devices, topology)
    names = [d.name for d in devices]
    routes = cluster.routes
    for src in range(24):
        for dst in range(24):
            path = topology.route(names, src, dst)
            p = src * 24 + dst
            assert routes.resources[routes.pointer[p]:routes.pointer[p + 1]].tolist() == [2 * k + d for k, d in path]
            if src != dst:
                assert cluster.bandwidth[src, dst] == min(links[k].bandwidth for k, _ in path)
                assert cluster.latency[src, dst] == max(links[k].latency for k, _ in path)
    assert topology.route(names, 0, 1) == [(0, 0), (24, 0), (1, 1)]  # gpu:0 -> sw:0 -> sw:1 -> gpu:1


def test_save_makes_folders_and_refuses_a_folder(tmp_path):
    cluster = load_cluster("paper-2gpu")
    cluster.save(tmp_path / "new" / "c.json")
    assert Cluster.load_json(tmp_path / "new" / "c.json") == cluster
    with pytest.raises(OutputPathError, match="is a folder; give a file path"):
        cluster.save(tmp_path / "new")
