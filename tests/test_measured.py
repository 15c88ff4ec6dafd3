"""Measured runtime on real local TF workers in a private network namespace."""
import dataclasses
import os
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import placement_env as pe
from placement_env.errors import IsolationError
from placement_env.runtime.driver import LocalWorkers
from placement_env.runtime.measured import MeasuredRuntime
from placement_env.runtime.timeouts import SETUP_ALLOWANCE_S, STEP_FACTOR, single_device_step_s
from placement_env.runtime.workers import alive

from tf_helpers import child_pids, live_processes_where, needs_netns


@pytest.fixture(scope="module")
def graph(synth):
    return synth


@pytest.fixture(scope="module")
def cluster(local2):
    return local2


@pytest.fixture(scope="module")
def runtime(cluster):
    rt = MeasuredRuntime(cluster, timeout_s=60)
    yield rt
    rt.close()


def _split(graph):
    return np.arange(graph.n_groups) % 2


def _group_members(pgid):
    return live_processes_where(2, pgid)


def _assert_ok(m, steps=5):
    assert m.ok, (m.failure, m.message)
    assert m.runtime == "measured"
    assert m.runtime_s > 0 and np.isfinite(m.runtime_s)
    assert len(m.extra["timed_step_times_s"]) == steps
    assert m.runtime_s == pytest.approx(float(np.median(m.extra["timed_step_times_s"])))


def test_invalid_placement_raises_before_any_worker_starts(graph, cluster):
    rt = MeasuredRuntime(cluster)
    with pytest.raises(pe.InvalidPlacementError):
        rt.measure(graph, np.zeros(graph.n_groups + 1, dtype=int))
    with pytest.raises(pe.InvalidPlacementError):
        rt.measure(graph, np.full(graph.n_groups, 2))
    assert rt._workers is None or not rt._workers.running


def test_refuses_exposed_workers_without_consent(monkeypatch):
    monkeypatch.setattr("placement_env.runtime.workers.unshare_command", lambda: ([], "not allowed in this test"))
    with pytest.raises(IsolationError, match="allow_exposed_workers"):
        LocalWorkers(2)
    with pytest.raises(IsolationError):
        LocalWorkers(2, isolate=False)
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        LocalWorkers(2, allow_exposed_workers=True)  # not started


def test_cluster_without_servers_is_a_clear_error():
    with pytest.raises(pe.ClusterConfigError, match="paper-2gpu.*no TF servers.*local:N.*cluster_from_spec"):
        MeasuredRuntime(pe.load_cluster("paper-2gpu"))


@pytest.mark.slow
@needs_netns
def test_measures_a_placement(runtime, graph):
    m = runtime.measure(graph, _split(graph))
    _assert_ok(m)
    assert len(m.extra["step_times_s"]) == 10
    assert list(m.placement) == list(_split(graph))
    one = runtime.measure(graph, np.ones(graph.n_groups, dtype=int), trace=True)
    _assert_ok(one)
    ran = one.extra["trace_devices"]
    on_task = {i: sum(n for d, n in ran.items() if f"/task:{i}/" in d) for i in range(2)}
    assert on_task[1] > 100 and on_task[0] == 0, ran  # the placement is honoured
    both = runtime.measure(graph, _split(graph), trace=True).extra["trace_devices"]
    assert all(sum(n for d, n in both.items() if f"/task:{i}/" in d) > 100 for i in range(2)), both
    assert runtime.workers.starts == 1  # the driver is reused across placements


@pytest.mark.slow
@needs_netns
def test_workers_unreachable_from_host_namespace(runtime, graph):
    _assert_ok(runtime.measure(graph, _split(graph)))
    hello = runtime.workers.hello
    assert hello["isolated"] and hello["interfaces"] == ["lo"]
    addresses = ["127.0.0.1"]
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
        addresses += [line.split()[3].split("/")[0] for line in out.splitlines() if " lo " not in line]
    except OSError:
        pass
    for address in addresses:
        for port in hello["ports"]:
            with socket.socket() as sock:
                sock.settimeout(2)
                assert sock.connect_ex((address, port)) != 0, f"worker port {address}:{port} reachable from host"


@pytest.mark.slow
@needs_netns
def test_worker_killed_mid_run_is_an_infrastructure_failure_then_recovers(runtime, graph):
    runtime.workers.start()
    victim = runtime.workers.worker_pids[1]
    driver, group = runtime.workers.pid, runtime.workers.process_group
    steps = runtime.steps
    runtime.steps, runtime.retries = 100_000, 0  # long enough to be killed mid-run; no retry
    timer = threading.Timer(1.5, os.kill, (victim, signal.SIGKILL))
    timer.start()
    try:
        begin = time.monotonic()
        m = runtime.measure(graph, _split(graph))
    finally:
        runtime.steps, runtime.retries = steps, 2
        timer.cancel()
    assert not m.ok and m.failure == "infrastructure" and m.infrastructure_failure, (m.failure, m.message)
    assert "died" in m.message and "failed on 1 try" in m.message
    assert time.monotonic() - begin < 30
    assert not _group_members(group) and not alive(victim) and not alive(driver)
    _assert_ok(runtime.measure(graph, _split(graph)))
    assert runtime.workers.pid != driver


@pytest.mark.slow
@needs_netns
def test_worker_killed_while_idle_restarts_transparently(runtime, graph):
    runtime.workers.start()
    driver = runtime.workers.pid
    os.kill(runtime.workers.worker_pids[0], signal.SIGKILL)
    time.sleep(0.5)  # the driver may or may not have noticed: either way the placement is measured
    _assert_ok(runtime.measure(graph, _split(graph)))
    assert runtime.workers.pid != driver


def _measure_once(runtime, graph, *, timeout_s):
    """The split placement measured with no retry (the fixture's runtime keeps its 2 retries after)."""
    runtime.retries = 0
    try:
        return runtime.measure(graph, _split(graph), timeout_s=timeout_s)
    finally:
        runtime.retries = 2


@pytest.mark.slow
@needs_netns
def test_stopped_worker_is_noticed_at_once_and_retried_on_fresh_workers(runtime, graph):
    runtime.workers.start()
    stopped, group, starts = runtime.workers.worker_pids[1], runtime.workers.process_group, runtime.workers.starts
    os.kill(stopped, signal.SIGSTOP)
    begin = time.monotonic()
    m = _measure_once(runtime, graph, timeout_s=30)
    assert m.failure == "infrastructure" and f"pid {stopped} is stopped" in m.message, (m.failure, m.message)
    assert time.monotonic() - begin < 5  # noticed, not waited out
    assert not _group_members(group) and not alive(stopped)
    runtime.workers.start()
    os.kill(runtime.workers.worker_pids[0], signal.SIGSTOP)
    m = runtime.measure(graph, _split(graph), timeout_s=30)  # two retries left: the second try runs
    _assert_ok(m)
    assert len(m.extra["infrastructure_failures"]) == 1 and "is stopped" in m.extra["infrastructure_failures"][0]
    assert runtime.workers.starts == starts + 2


@pytest.mark.slow
@needs_netns
def test_a_placement_past_its_timeout_fails_on_time_unretried_then_recovers(runtime, graph):
    runtime.workers.start()
    starts, steps = runtime.workers.starts, runtime.steps
    runtime.steps = 100_000  # far longer than the timeout
    try:
        begin = time.monotonic()
        m = runtime.measure(graph, _split(graph), timeout_s=3.0)
    finally:
        runtime.steps = steps
    assert not m.ok and m.failure == "timeout", (m.failure, m.message)  # the placement's failure, charged
    assert time.monotonic() - begin < 3.0 + 1.5 and m.extra["infrastructure_failures"] == []
    _assert_ok(runtime.measure(graph, _split(graph)))
    assert runtime.workers.starts == starts + 1  # fresh workers after the cancelled step, no retry


def test_default_timeout_scales_with_the_graph(cluster, graph):
    runtime = MeasuredRuntime(cluster)
    runs = 1 + runtime.steps + 1  # init, the steps, a traced step
    assert runtime.timeout_for(graph) == pytest.approx(SETUP_ALLOWANCE_S + STEP_FACTOR * runs * single_device_step_s(
        graph, cluster))
    assert runtime.timeout_for(graph) < 90  # a small graph waits about a minute, not 10
    heavy = dataclasses.replace(graph, flops=graph.flops * 1e6)
    assert runtime.timeout_for(heavy) > 10 * runs * float(np.sum(heavy.flops)) / cluster.devices[0].peak_flops
    assert MeasuredRuntime(cluster, timeout_s=7).timeout_for(heavy) == 7
    with pytest.raises(ValueError, match="timeout_s = 0: a positive number of seconds, or None"):
        MeasuredRuntime(cluster, timeout_s=0)
    with pytest.raises(ValueError, match="retries = -1"):
        MeasuredRuntime(cluster, retries=-1)


@pytest.mark.slow
@needs_netns
def test_hung_driver_is_killed_then_recovers(runtime, graph):
    runtime.workers.start()
    driver, group = runtime.workers.pid, runtime.workers.process_group
    os.kill(driver, signal.SIGSTOP)
    begin = time.monotonic()
    m = _measure_once(runtime, graph, timeout_s=2.0)
    assert not m.ok and m.failure == "infrastructure", (m.failure, m.message)
    assert "no answer within 2 s" in m.message
    assert time.monotonic() - begin < 2.0 + runtime.margin_s + 2  # the timeout holds, with the default margin
    assert not _group_members(group) and not alive(driver)
    _assert_ok(runtime.measure(graph, _split(graph)))


@pytest.mark.slow
@needs_netns
def test_close_leaves_no_processes(cluster, graph):
    with MeasuredRuntime(cluster) as rt:
        _assert_ok(rt.measure(graph, np.zeros(graph.n_groups, dtype=int)))
        driver, group, workers = rt.workers.pid, rt.workers.process_group, rt.workers.worker_pids
        assert {driver, *workers} <= set(_group_members(group))
    assert not rt.workers.running
    assert not _group_members(group)
    assert not any(alive(pid) for pid in [driver, *workers])
    assert driver not in child_pids(os.getpid())
