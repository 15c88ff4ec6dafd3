"""Clusters from a running TF cluster (tf.train.ClusterSpec) and the measured runtime on them.

Security: tf.distribute.Server listens on all interfaces without authentication and runs any
graph sent to it. So the two test servers never run in the host's network namespace: the test
runs this file as a script under ``unshare --net --map-root-user``; in that private namespace
(only ``lo``) the script starts both servers, calls ``cluster_from_spec`` and measures with a
``MeasuredRuntime`` whose driver (a child) shares the namespace, then prints a JSON report.
"""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import placement_env as pe
from placement_env.cluster import cluster_from_spec
from placement_env.errors import ClusterUnreachableError
from placement_env.runtime.measured import MeasuredRuntime
from placement_env.runtime.workers import unshare_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tf_helpers import needs_netns

_SERVER = """
import sys, tensorflow as tf
addresses, index = sys.argv[1].split(","), int(sys.argv[2])
config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
server = tf.distribute.Server(tf.train.ClusterSpec({"worker": addresses}), job_name="worker",
                              task_index=index, config=config, start=True)
print("READY", flush=True)
server.join()
"""


def _inside_namespace() -> dict:
    """Run in the private namespace: start 2 servers, probe them, measure; return a report."""
    from placement_env.runtime.local_driver import bring_loopback_up, free_ports

    bring_loopback_up()
    addresses = [f"localhost:{p}" for p in free_ports(2)]
    servers = [subprocess.Popen([sys.executable, "-c", _SERVER, ",".join(addresses), str(i)],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) for i in range(2)]
    try:
        import tensorflow as tf

        for proc in servers:
            assert proc.stdout.readline().strip() == b"READY"
        spec = tf.train.ClusterSpec({"worker": addresses})
        cluster = cluster_from_spec(spec, timeout_s=60)
        from_dict = cluster_from_spec({"worker": addresses}, timeout_s=60)
        graph = pe.load_benchmark("rnnlm-tiny")
        split = np.arange(graph.n_groups) % 2
        with MeasuredRuntime(cluster, timeout_s=120) as runtime:
            m = runtime.measure(graph, split, trace=True)
            driver_hello = dict(runtime.workers.hello)
        return {"interfaces": [name for _, name in socket.if_nameindex()], "addresses": addresses,
                "cluster": cluster.to_dict(), "same_via_dict": from_dict == cluster,
                "ok": m.ok, "failure": m.failure, "message": m.message,
                "runtime_s": m.runtime_s, "trace_devices": m.extra.get("trace_devices", {}),
                "driver_hello": {k: driver_hello.get(k) for k in ("isolated", "ports", "worker_pids", "target")}}
    finally:
        for proc in servers:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
               TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([*unshare_command()[0], sys.executable, os.path.abspath(__file__), "--inside"],
                         capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_netns
def test_servers_ran_in_a_private_namespace(report):
    assert report["interfaces"] == ["lo"]


@pytest.mark.slow
@needs_netns
def test_cluster_from_spec_lists_the_devices(report):
    cluster = pe.Cluster.from_dict(report["cluster"])
    assert [d.tf_device for d in cluster.devices] == [f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in range(2)]
    assert [d.kind for d in cluster.devices] == ["CPU", "CPU"]
    assert [d.name for d in cluster.devices] == ["worker:0/cpu:0", "worker:1/cpu:0"]
    assert cluster.remote_target == f"grpc://{report['addresses'][0]}"
    assert dict(cluster.remote_jobs) == {"worker": tuple(report["addresses"])}
    assert cluster.local_workers == 0
    assert report["same_via_dict"]


@pytest.mark.slow
@needs_netns
def test_json_round_trip_keeps_the_remote_fields(report, tmp_path):
    cluster = pe.Cluster.from_dict(report["cluster"])
    path = tmp_path / "tf.json"
    cluster.save(path)
    again = pe.load_cluster(str(path))
    assert again == cluster and hash(again) == hash(cluster)
    assert again.remote_target == cluster.remote_target and again.remote_jobs == cluster.remote_jobs
    import pickle

    assert pickle.loads(pickle.dumps(cluster)) == cluster


@pytest.mark.slow
@needs_netns
def test_measurement_split_across_the_two_tasks(report):
    assert report["ok"], (report["failure"], report["message"])
    assert report["runtime_s"] > 0 and np.isfinite(report["runtime_s"])
    ran = report["trace_devices"]
    assert all(sum(n for d, n in ran.items() if f"/task:{i}/" in d) > 0 for i in range(2)), ran
    hello = report["driver_hello"]
    assert hello["target"] == f"grpc://{report['addresses'][0]}"
    assert not hello["isolated"] and hello["ports"] == [] and hello["worker_pids"] == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_address_is_a_clear_error_within_the_timeout():
    address = f"127.0.0.1:{_closed_port()}"
    begin = time.monotonic()
    with pytest.raises(ClusterUnreachableError, match=f'{address} \\(job "worker", task 0\\) is unreachable'):
        cluster_from_spec({"worker": [address]}, timeout_s=5)
    assert time.monotonic() - begin < 10
    # an address nothing answers on (TEST-NET-1, RFC 5737): fails by the timeout, not later
    begin = time.monotonic()
    with pytest.raises(ClusterUnreachableError, match="192.0.2.1:2222"):
        cluster_from_spec({"worker": ["192.0.2.1:2222"]}, timeout_s=2)
    assert time.monotonic() - begin < 6


@pytest.mark.parametrize("spec, expected", [
    ({}, "cluster spec is empty"),
    ({"worker": []}, "non-empty list"),
    ({"worker": [1234]}, r"cluster spec.worker\[0\] = 1234"),
    ({"worker": ["localhost"]}, r'"localhost".*host:port'),
    ({"worker": "localhost:1"}, "non-empty list"),
])
def test_bad_specs_name_the_value(spec, expected):
    with pytest.raises(pe.ClusterConfigError, match=expected):
        cluster_from_spec(spec, probe=False)


def test_probe_false_and_dict_forms():
    cluster = cluster_from_spec({"ps": ["h0:1"], "worker": ["h1:2", "h2:3"]}, job="worker", probe=False)
    assert [d.tf_device for d in cluster.devices] == [
        "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"]
    assert cluster.remote_target == "grpc://h1:2" and list(cluster.remote_jobs) == ["ps", "worker"]
    assert cluster.bandwidth[0, 1] == pytest.approx(1e9)
    assert pe.Cluster.from_json(cluster.to_json()) == cluster
    with pytest.raises(pe.ClusterConfigError, match='job = "chief"'):
        cluster_from_spec({"worker": ["h:1"]}, job="chief", probe=False)
    # the cluster JSON form is still a dict with "name"/"devices"
    assert pe.load_cluster(pe.load_cluster("paper-2gpu").to_dict()) == pe.load_cluster("paper-2gpu")
    with pytest.raises(pe.ClusterConfigError, match="give both"):
        pe.Cluster.from_dict({**cluster.to_dict(), "remote_target": ""})


def test_load_cluster_never_connects_to_a_tf_cluster(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError(f"load_cluster opened a connection: {args}")

    monkeypatch.setattr(socket, "create_connection", no_network)
    tf = pytest.importorskip("tensorflow")
    for spec in ({"worker": ["localhost:2222", "localhost:2223"]}, {"worker": {0: "h:1"}, "ps": ("h:2",)},
                 tf.train.ClusterSpec({"worker": ["localhost:2222"]})):
        with pytest.raises(pe.ClusterConfigError) as info:
            pe.load_cluster(spec)
        message = str(info.value)
        assert "localhost:2222" in message or '"h:1"' in message
        assert "pe.cluster_from_spec(spec)" in message and "running TF cluster" in message
        assert 'load_cluster accepts a Cluster, a preset name, "local:N", a JSON file path' in message


def test_measured_runtime_needs_servers():
    cluster = pe.load_cluster("paper-2gpu")
    with pytest.raises(pe.ClusterConfigError, match="no TF servers"):
        MeasuredRuntime(cluster)


if __name__ == "__main__" and sys.argv[1:] == ["--inside"]:
    result = _inside_namespace()
    sys.stdout.flush()
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)
