"""Interconnect topologies: routes over ports and switches, JSON round trip, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster import Cluster, Device
from placement_env.cluster.model import topology_cluster
from placement_env.cluster.topology import Link, Topology

GB = 1e9


def _devices(n_gpus: int) -> list[Device]:
    cpu = Device(name="cpu:0", kind="CPU", peak_flops=1e12, memory_bandwidth=68 * GB, memory_bytes=2**36,
                 concurrency=18, tf_device="/job:localhost/replica:0/task:0/device:CPU:0")
    return [cpu] + [Device(name=f"gpu:{i}", kind="GPU", peak_flops=4e12, memory_bandwidth=240 * GB,
                           memory_bytes=2**34, concurrency=1,
                           tf_device=f"/job:localhost/replica:0/task:0/device:GPU:{i}") for i in range(n_gpus)]


def two_boards() -> Cluster:
    """Two K80-like boards: two GPUs behind one switch per board, each board on one host slot."""
    links = [Link("cpu:0", "root", 68 * GB, 0.0, "host memory"),
             Link("root", "plx:0", 12 * GB, 1e-6, "slot 0"), Link("root", "plx:1", 12 * GB, 1e-6, "slot 1")]
    links += [Link(f"gpu:{g}", f"plx:{g // 2}", 12 * GB, 1e-6, "die") for g in range(4)]
    return topology_cluster("two-boards", _devices(4), Topology(("root", "plx:0", "plx:1"), tuple(links)))


def test_routes_follow_the_fewest_hops_and_use_each_link_in_its_direction():
    cluster = two_boards()
    routes = cluster.routes
    n = cluster.n_devices
    names = routes.names

    def route(src, dst):
        p = src * n + dst
        return [names[r] for r in routes.resources[routes.pointer[p]:routes.pointer[p + 1]]]

    assert route(1, 2) == ["gpu:0 -> plx:0", "plx:0 -> gpu:1"]  # same board: through its switch only
    assert route(1, 3) == ["gpu:0 -> plx:0", "plx:0 -> root", "root -> plx:1", "plx:1 -> gpu:2"]
    assert route(0, 1) == ["cpu:0 -> root", "root -> plx:0", "plx:0 -> gpu:0"]
    assert route(1, 0)[0] == "gpu:0 -> plx:0" and route(2, 0)[0] == "gpu:1 -> plx:0"
    assert route(1, 0)[1] == route(2, 0)[1] == "plx:0 -> root"  # both dies share their board's slot
    assert cluster.bandwidth[1, 3] == 12 * GB and cluster.latency[1, 3] == pytest.approx(1e-6)
    assert cluster.bandwidth[0, 1] == 12 * GB and cluster.latency[0, 1] == pytest.approx(1e-6)


def test_without_a_topology_every_ordered_pair_has_a_private_link():
    cluster = pe.load_cluster("paper-2gpu")
    routes = cluster.routes
    n = cluster.n_devices
    for src in range(n):
        for dst in range(n):
            p = src * n + dst
            assert list(routes.resources[routes.pointer[p]:routes.pointer[p + 1]]) == ([] if src == dst else [p])


def test_json_round_trip_and_describe():
    cluster = two_boards()
    again = Cluster.from_json(cluster.to_json())
    assert again == cluster and hash(again) == hash(cluster)
    assert again.topology.links[1].label == "slot 0"
    text = cluster.describe()
    assert "gpu:0 -> plx:0 -> root -> plx:1 -> gpu:2" in text and "slot 1" in text


def test_bad_topologies_get_clear_errors():
    data = two_boards().to_dict()
    data["topology"]["links"][3]["b"] = "plx:9"
    with pytest.raises(pe.ClusterConfigError, match=r'topology.links\[3\].b = "plx:9": must be a device or switch'):
        Cluster.from_dict(data)
    data = two_boards().to_dict()
    del data["topology"]["links"][-1]
    with pytest.raises(pe.ClusterConfigError, match="no route from device \"cpu:0\" to 'gpu:3'"):
        Cluster.from_dict(data)
    data = two_boards().to_dict()
    data["default_link"] = {"bandwidth": 1e9, "latency": 0}
    with pytest.raises(pe.ClusterConfigError, match="either topology or default_link/links"):
        Cluster.from_dict(data)
    data = two_boards().to_dict()
    data["topology"]["links"][0]["bandwidth"] = -1
    with pytest.raises(pe.ClusterConfigError, match=r"topology.links\[0\]: link.bandwidth = -1"):
        Cluster.from_dict(data)
    cluster = two_boards()
    with pytest.raises(pe.ClusterConfigError, match="takes its bandwidth from the topology"):
        Cluster(cluster.name, cluster.devices, np.where(np.eye(5, dtype=bool), np.inf, 1e9), cluster.latency,
                topology=cluster.topology)
    with pytest.raises(pe.ClusterConfigError, match="transfer_overhead_s = -1"):
        Cluster(cluster.name, cluster.devices, cluster.bandwidth, cluster.latency, topology=cluster.topology,
                transfer_overhead_s=-1)
