"""The agent's evaluations on a Ray cluster that someone else started: a head and a second node on loopback.

``ray start`` cannot put a two-node cluster on 127.0.0.1 in the host's network namespace: it replaces
``--node-ip-address=127.0.0.1`` with the machine's routable address (and its servers then listen on
every interface), and Ray's single-machine mode, which keeps 127.0.0.1, refuses a second node. So the
cluster runs where 127.0.0.1 is the only address there is: in a private network namespace, as the TF
workers do, which is also a private PID namespace, so that every process of the cluster ends with the
test, whatever happens. This file runs itself there as a script (``--inside DIR RAY_TEMP_DIR``): it
starts the head and a second node with ``ray start`` (token authentication on, as Ray recommends), runs
``python -m agents.reinforce_seq2seq --ray-address`` against them while it watches every listening
socket in the namespace, stops the cluster with ``ray stop`` and prints a JSON report.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # the ``ray`` command of this interpreter
NODE_OPTIONS = ["--num-cpus=1", "--disable-usage-stats", "--object-store-memory=100000000"]
BUDGET = 8


def _namespace_prefix() -> list[str] | None:
    """``unshare`` into private network and PID namespaces (killed with the test), or None where not allowed."""
    tool = shutil.which("unshare")
    if tool is None:
        return None
    prefix = [tool, "--net", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc", "--"]
    probe = subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, timeout=60)
    return prefix if probe.returncode == 0 else None


# -- inside the namespaces ----------------------------------------------------------------------------


def _ray(*args: str, env: dict) -> None:
    out = subprocess.run([*RAY, *args], capture_output=True, text=True, timeout=300, env=env)
    if out.returncode:
        raise RuntimeError(f"ray {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def _processes() -> dict[int, list[str]]:
    """pid -> command line of every live process in this PID namespace but this one."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if state not in ("Z", "X"):
                found[int(entry)] = cmdline
    return found


def _raylets() -> dict[int, str]:
    """pid -> Ray node id of every raylet."""
    return {pid: arg.split("=", 1)[1] for pid, cmdline in _processes().items()
            if os.path.basename(cmdline[0]) == "raylet" for arg in cmdline if arg.startswith("--node_id=")}


def _reap() -> None:
    """Collect the exit status of Ray's daemons, which were re-parented to this process (PID 1 here)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def start_two_loopback_nodes(temp_dir: Path) -> tuple[str, dict]:
    """``ray start`` a head and a second node on 127.0.0.1 with a fresh auth token; their address and the
    environment that reaches them (``ray stop`` with it ends them)."""
    from placement_env.runtime.local_driver import bring_loopback_up

    bring_loopback_up()
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    _ray("start", "--head", "--port=0", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}",
         "--include-dashboard=false", *NODE_OPTIONS, env=env)
    address = (temp_dir / "ray_current_cluster").read_text().strip()
    _ray("start", f"--address={address}", *NODE_OPTIONS, env=env)
    return address, env


def inside(folder: Path, temp_dir: Path) -> dict:
    from socket_helpers import listening_sockets

    address, env = start_two_loopback_nodes(temp_dir)
    sockets = set()
    cli = subprocess.Popen(
        [sys.executable, "-m", "agents.reinforce_seq2seq", "--benchmark", "rnnlm-tiny", "--cluster", "paper-2gpu",
         "--ray-address", address, "--workers", "2", "--budget", str(BUDGET), "--samples", "4", "--paper",
         "--no-progress", "--no-baselines", "--out-dir", str(folder / "run")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    while cli.poll() is None:  # the workers' and the agent's sockets exist only while it runs
        sockets.update(listening_sockets(list(_processes())))
        time.sleep(0.5)
    stdout, stderr = cli.communicate()
    raylets = _raylets()
    _ray("stop", env=env)
    _reap()
    return {"address": address, "sockets": sorted(sockets), "raylets": raylets, "returncode": cli.returncode,
            "stdout": stdout[-4000:], "stderr": stderr[-4000:], "left": list(_processes().values())}


# -- the test, in the host's namespaces ---------------------------------------------------------------


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("ray")
    prefix = _namespace_prefix()
    if prefix is None:
        pytest.skip("no private network and PID namespaces (unshare) on this machine")
    folder = tmp_path_factory.mktemp("ray-cluster")
    # Ray's sockets live under its temp dir and a Unix socket path has at most 107 bytes, so Ray gets a
    # short one in /tmp (as its default, /tmp/ray), not one under pytest's deep tmp_path
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    try:
        out = subprocess.run([*prefix, sys.executable, os.path.abspath(__file__), "--inside", str(folder), temp_dir],
                             capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-4000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["marks"] = [str(folder), temp_dir]
        yield result
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_agent_evaluates_on_both_nodes(report):
    assert report["returncode"] == 0, report["stderr"]
    assert f"{BUDGET} evaluations" in report["stdout"]
    line = re.search(r"evaluations per Ray node: (.*)", report["stdout"]).group(1)
    per_node = {node: int(count) for node, count in (item.split() for item in line.split(", "))}
    assert len(report["raylets"]) == 2 and set(per_node) == set(report["raylets"].values()), (line, report["raylets"])
    assert all(count > 0 for count in per_node.values()) and sum(per_node.values()) == BUDGET


@pytest.mark.slow
def test_every_socket_of_the_cluster_and_the_agent_is_on_loopback(report):
    from socket_helpers import is_loopback

    sockets = [tuple(entry) for entry in report["sockets"]]
    names = [os.path.basename(name) for _, name, _, _ in sockets]
    assert names.count("gcs_server") >= 1 and names.count("raylet") >= 4, sockets  # 2 servers per raylet
    assert names.count("ray::RayWorker") >= 2 and any(name.startswith("python") for name in names), sockets
    exposed = [entry for entry in sockets if not is_loopback(entry[2])]
    assert not exposed, f"sockets beyond loopback: {exposed}"
    assert report["address"].startswith("127.0.0.1:")


@pytest.mark.slow
def test_ray_stop_leaves_nothing_running(report):
    assert report["left"] == [], report["left"]
    leftovers = []
    for entry in os.listdir("/proc"):  # and nothing of the cluster outlived its namespace on the host
        try:
            if entry.isdigit() and any(mark.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
                                       for mark in report["marks"]):
                leftovers.append(int(entry))
        except OSError:
            pass
    assert not leftovers, f"processes of the test cluster still running: {leftovers}"


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    print(json.dumps(inside(Path(sys.argv[2]), Path(sys.argv[3]))))
