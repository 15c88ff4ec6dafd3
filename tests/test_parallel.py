"""placement_env.parallel.ParallelEvaluator: same answers as a local Evaluator, survives dead workers, clear errors."""
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import placement_env as pe
from placement_env import ParallelEvaluator, RayUnreachableError
from placement_env.parallel import start_local_ray
from placement_env.placement import random_placements
from socket_helpers import is_loopback

BENCH, CLUSTER = "rnnlm-tiny", "paper-2gpu"


@pytest.fixture(scope="module")
def reference():
    graph, cluster = pe.load_benchmark(BENCH), pe.load_cluster(CLUSTER)
    placements = random_placements(graph, cluster, 8, rng=0)
    return placements, pe.Evaluator(graph, cluster).batch(placements)


@pytest.fixture(scope="module")
def ray_instance():
    """One local Ray instance for the module (start-up is slow on 2 cores); shut down at the end."""
    ray = pytest.importorskip("ray")
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # worker_setup helpers of this file
    # Logical CPUs: room for the shared evaluator's 2 actors and a test's own at the same time.
    start_local_ray(num_cpus=6, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module", params=["process", "ray"])
def backend(request):
    if request.param == "ray":
        request.getfixturevalue("ray_instance")
    return request.param


@pytest.fixture(scope="module")
def shared(backend):
    """One 2-worker evaluator per backend for the tests that leave it healthy; the cluster is given as
    a Cluster object (process) or its JSON dict (ray), not by name."""
    cluster = pe.load_cluster(CLUSTER)
    ev = ParallelEvaluator(BENCH, cluster if backend == "process" else cluster.to_dict(), backend=backend, workers=2)
    yield ev
    pids = ev.worker_pids()
    ev.close()
    assert _gone(pids), "worker processes left after close()"


def _same(measurements, expected):
    assert len(measurements) == len(expected)
    for got, want in zip(measurements, expected):
        assert got.ok == want.ok and got.failure == want.failure
        assert got.runtime_s == pytest.approx(want.runtime_s, rel=1e-12)
        np.testing.assert_array_equal(got.placement, want.placement)


def _gone(pids, within_s=15.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.2)
    return False


# Test-only wrappers, installed through the public worker_setup hook.
class _Slow:
    def __init__(self, evaluator, delay_s):
        self.evaluator, self.delay_s = evaluator, delay_s

    def __call__(self, placement):
        time.sleep(self.delay_s)
        return self.evaluator(placement)


class _Dies:
    """Kills its worker on a call while fewer than ``deaths`` marker files exist in ``folder``."""

    def __init__(self, evaluator, folder, deaths):
        self.evaluator, self.folder, self.deaths = evaluator, Path(folder), deaths

    def __call__(self, placement):
        if len(list(self.folder.iterdir())) < self.deaths:
            (self.folder / f"death-{os.getpid()}-{time.monotonic_ns()}").touch()
            os._exit(1)
        return self.evaluator(placement)


def _slow_setup(evaluator, delay_s):
    return _Slow(evaluator, delay_s)


def _dies_setup(evaluator, folder, deaths):
    return _Dies(evaluator, folder, deaths)


def test_same_runtimes_as_local_evaluator_in_order(shared, reference):
    placements, expected = reference
    _same(shared.batch(placements), expected)
    _same([shared(placements[3])], [expected[3]])
    _same(shared.batch(placements[::-1]), expected[::-1])
    assert len(set(shared.worker_pids())) == 2


def test_worker_killed_mid_batch_loses_no_sample(backend, reference):
    placements, expected = reference
    with ParallelEvaluator(BENCH, CLUSTER, backend=backend, workers=2,
                           worker_setup=functools.partial(_slow_setup, delay_s=1.5)) as ev:
        victim = ev.worker_pids()[0]
        killer = threading.Timer(0.5, os.kill, (victim, signal.SIGKILL))
        killer.start()
        try:
            got = ev.batch(placements[:4])  # each worker is 1 s into its first placement when killed
        finally:
            killer.join()
        _same(got, expected[:4])
        assert victim not in ev.worker_pids()
        _same(ev.batch(placements[4:6]), expected[4:6])  # still usable
        pids = ev.worker_pids()
    assert _gone([victim, *pids])


def test_worker_killed_while_idle(shared, reference):
    placements, expected = reference
    victim = shared.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.3)
    _same(shared.batch(placements), expected)
    assert victim not in shared.worker_pids()


def test_retried_on_a_fresh_worker_then_reported_as_crash(backend, reference, tmp_path):
    placements, expected = reference
    # The first three calls kill their worker: placement 0 dies twice (-> crash after 1 retry),
    # placement 1 dies once and its retry answers.
    with ParallelEvaluator(BENCH, CLUSTER, backend=backend, workers=1, max_retries=1,
                           worker_setup=functools.partial(_dies_setup, folder=str(tmp_path), deaths=3)) as ev:
        got = ev.batch(placements[:2])
        assert not got[0].ok and got[0].failure == "crash" and np.isnan(got[0].runtime_s)
        assert "died 2 time(s)" in got[0].message and "1 retry" in got[0].message
        np.testing.assert_array_equal(got[0].placement, placements[0])
        _same(got[1:], expected[1:2])
        assert len(list(tmp_path.iterdir())) == 3
        _same(ev.batch(placements[2:4]), expected[2:4])  # the evaluator stays usable
        pids = ev.worker_pids()
    assert _gone(pids)


def test_timeout_reported_and_worker_replaced(reference):
    placements, expected = reference
    with ParallelEvaluator(BENCH, CLUSTER, workers=1, timeout_s=0.5,
                           worker_setup=functools.partial(_slow_setup, delay_s=30)) as ev:
        pid = ev.worker_pids()[0]
        started = time.monotonic()
        got = ev([0] * len(placements[0]))
        assert time.monotonic() - started < 10
        assert not got.ok and got.failure == "timeout" and "0.5 s" in got.message
        assert ev.worker_pids()[0] != pid
    assert _gone([pid])


def test_evaluation_errors_are_raised_and_evaluator_stays_usable(shared, reference):
    placements, expected = reference
    bad = placements[:3].copy()
    bad[1, 0] = 7
    with pytest.raises(pe.InvalidPlacementError, match="device 7"):
        shared.batch(bad)
    with pytest.raises(ValueError, match="expected"):
        shared.batch(placements[0])
    _same(shared.batch(placements[:2]), expected[:2])


def test_unreachable_ray_address_is_a_clear_quick_error(ray_instance, reference):
    for address, limit in (("127.0.0.1:1", 5.0), ("ray://127.0.0.1:1", 5.0), ("192.0.2.123:6379", 8.0)):
        started = time.monotonic()
        with pytest.raises(RayUnreachableError, match=address.replace(".", r"\.")) as info:
            ParallelEvaluator(BENCH, CLUSTER, backend="ray", address=address, connect_timeout_s=2.0)
        assert isinstance(info.value, ConnectionError) and isinstance(info.value, pe.PlacementEnvError)
        assert time.monotonic() - started < limit
    assert ray_instance.is_initialized()  # the running Ray instance is untouched


OWN_RAY = """
import json, os
import numpy as np
from placement_env import ParallelEvaluator
from socket_helpers import descendants, listening_sockets
ev = ParallelEvaluator("rnnlm-tiny", "paper-2gpu", backend="ray", workers=2)
ev.batch(np.zeros((2, ev.n_groups), dtype=int))
ray_pids = descendants(os.getpid())
report = {"sockets": listening_sockets([os.getpid(), *ray_pids]), "ray_pids": ray_pids,
          "per_node": ev.evaluations_per_node}
ev.close()
print(json.dumps(report))
"""


def test_own_local_ray_listens_on_loopback_only():
    """The Ray instance a ParallelEvaluator starts (GCS, raylet, workers, agents, the driver's own
    gRPC server) listens on 127.0.0.1 only, and stops with close()."""
    pytest.importorskip("ray")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]))
    out = subprocess.run([sys.executable, "-c", OWN_RAY], capture_output=True, text=True, timeout=600,
                         cwd=root, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    sockets = [tuple(entry) for entry in report["sockets"]]
    names = [os.path.basename(name) for _, name, _, _ in sockets]
    assert {"gcs_server", "raylet"} <= set(names) and names.count("ray::RayWorker") >= 2, sockets
    exposed = [entry for entry in sockets if not is_loopback(entry[2])]
    assert not exposed, f"Ray sockets beyond loopback: {exposed}"
    assert sum(report["per_node"].values()) == 2 and len(report["per_node"]) == 1
    assert _gone(report["ray_pids"]), "Ray processes left after close()"


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"backend='dask'; expected one of 'process', 'ray'"):
        ParallelEvaluator(BENCH, CLUSTER, backend="dask")
    with pytest.raises(ValueError, match="runtime="):
        ParallelEvaluator(BENCH, CLUSTER, "simulated")
    with pytest.raises(ValueError, match="workers="):
        ParallelEvaluator(BENCH, CLUSTER, workers=0)
    with pytest.raises(ValueError, match="for backend='ray'"):
        ParallelEvaluator(BENCH, CLUSTER, address="localhost:6379")
    with pytest.raises(pe.UnknownClusterError):
        ParallelEvaluator(BENCH, "paper-3gpu")
    with pytest.raises(pe.UnknownBenchmarkError):
        ParallelEvaluator("rnnlm-huge", CLUSTER)


def test_import_does_not_import_ray():
    code = "import sys, placement_env.parallel; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its reaper is gone for our purpose (the state follows the name's ")")
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_workers_exit_when_their_parent_is_killed(tmp_path):
    """SIGKILL of the process that owns a ParallelEvaluator leaves no worker process behind."""
    script = tmp_path / "owner.py"
    script.write_text(
        "import time\n"
        "from placement_env import ParallelEvaluator\n"
        "if __name__ == '__main__':  # spawned workers import this file again\n"
        "    ev = ParallelEvaluator('rnnlm-tiny', 'paper-2gpu', workers=2)\n"
        "    print(' '.join(map(str, ev.worker_pids())), flush=True)\n"
        "    time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[1])
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), f"workers {pids} outlived their parent"
