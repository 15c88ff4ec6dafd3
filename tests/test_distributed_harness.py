"""The harness spread over worker processes and over a two-node Ray cluster kept on loopback: the rows of a serial
run (but for wall times), written as they finish, resumable, and a dying worker costs only its own row.

The methods below that crash or sleep are named by import path (``test_distributed_harness:dies``), as a
third-party method would be; the worker processes import this file as the parent does (``tests`` is on the path).
"""
from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from placement_env.cli import main
from placement_env.harness import Task, markdown_table, read_rows, run_suite
from placement_env.harness.leaderboard import leaderboard_table

ROOT = Path(__file__).resolve().parents[1]
METHODS = ["single_gpu", "heft", "random_search", "hill_climbing"]
BUDGET = 8
SEEDS = [0, 1]
ONE_TASK = [Task("synthetic-tiny-2gpu", "synthetic-tiny", "paper-2gpu", model="synthetic-tiny", gpus=2)]


# -- methods for the tests, run in worker processes ----------------------------------------------------------


def _in_worker() -> None:
    """Refuse to crash the test process itself: these methods die only in a worker."""
    if multiprocessing.parent_process() is None:
        raise RuntimeError("this test method crashes its process; run it in a harness worker only")


def dies(problem, *, how: Literal["kill", "exit", "segfault"]):
    """Kills the worker process that runs it, every time."""
    _in_worker()
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "exit":
        os._exit(3)
    ctypes.string_at(0)  # a segfault


def dies_once(problem, *, marker: str):
    """Kills its worker the first time (``marker`` does not exist yet), then places everything on device 0."""
    _in_worker()
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


def sleeps(problem, *, seconds: float):
    """Places everything on device 0 after ``seconds`` (a run long enough to interrupt)."""
    time.sleep(seconds)
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


class Stop(BaseException):
    """Not an Exception, so a row cannot record it (as KeyboardInterrupt): it stops the run."""


def stops(problem):
    """Stops the run on synthetic-tiny; places everything on device 0 elsewhere."""
    if problem.benchmark == "synthetic-tiny":
        raise Stop("stopped on synthetic-tiny")
    return np.zeros(problem.graph.n_groups, dtype=np.int64)


def where(problem):
    """Fails with where it ran (the harness's own process or a worker), its OpenMP wait policy and whether TF is
    imported there."""
    raise RuntimeError(f"worker={multiprocessing.parent_process() is not None} "
                       f"omp={os.environ.get('OMP_WAIT_POLICY')} tf={'tensorflow' in sys.modules}")


# -- helpers --------------------------------------------------------------------------------------------------


def comparable(rows: list[dict]) -> list[str]:
    """The rows without their wall times (``wall_s``, the wall column of ``anytime``), in a fixed order."""
    out = []
    for row in rows:
        row = dict(row)
        del row["wall_s"]
        row["anytime"] = [entry[:2] for entry in row.get("anytime", [])]
        out.append(json.dumps(row, sort_keys=True))
    return sorted(out)


def _alive_in_group(group: int, wait_s: float) -> list[int]:
    """The processes of process group ``group`` that are still running (not zombies) after up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                alive.append(int(entry))
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> list[dict]:
    path = tmp_path_factory.mktemp("serial") / "serial.jsonl"
    rows = run_suite("tiny", METHODS, path, budget=BUDGET, seeds=SEEDS, progress=False)
    assert len(rows) == 3 * len(METHODS) * len(SEEDS)
    return read_rows(path)


# -- worker processes -----------------------------------------------------------------------------------------


def test_two_worker_processes_give_the_serial_rows_and_report(serial, tmp_path, capsys):
    path = tmp_path / "parallel.jsonl"
    assert main(["run", "--suite", "tiny", "--methods", *METHODS, "--budget", str(BUDGET), "--seeds",
                 *map(str, SEEDS), "--workers", "2", "-o", str(path)]) == 0
    rows = read_rows(path)
    assert comparable(rows) == comparable(serial)
    assert "2 process workers" in capsys.readouterr().err
    # the file's order is the order rows finished; what is made of it does not depend on that order
    assert markdown_table(rows) == markdown_table(serial) == markdown_table(serial[::-1])
    assert leaderboard_table(serial) == leaderboard_table(serial[::-1])  # (its wall times are the run's own)


def test_a_dying_worker_costs_its_own_row_only_and_a_rerun_redoes_it(tmp_path):
    path, marker = tmp_path / "r.jsonl", str(tmp_path / "died-once")
    methods = ["single_gpu", "test_distributed_harness:dies@how=kill", "test_distributed_harness:dies@how=exit",
               "test_distributed_harness:dies@how=segfault", f"test_distributed_harness:dies_once@marker={marker}"]
    rows = run_suite("mine", methods, path, tasks=ONE_TASK, budget=0, progress=False, workers=2)
    by_method = {row["method"] + str(row["method_args"].get("how", "")): row for row in rows}
    assert len(rows) == 5 and len(read_rows(path)) == 5
    assert by_method["single_gpu"]["ok"]
    assert by_method["test_distributed_harness:dies_once"]["ok"]  # died once, then made again on a fresh worker
    why = {"kill": "killed by signal SIGKILL", "exit": "exited with code 3", "segfault": "killed by signal SIGSEGV"}
    for how, death in why.items():
        row = by_method[f"test_distributed_harness:dies{how}"]
        assert row["failure"] == "infrastructure" and not row["ok"] and row["placement"] == [], row
        assert re.search(rf"the process worker making this row died 2 times \(last: pid \d+ {death}\)",
                         row["message"]), row["message"]
        assert row["lower_bound_s"] > 0
    again = run_suite("mine", methods[:2], path, tasks=ONE_TASK, budget=0, progress=False, workers=2)
    assert [row["method_args"] for row in again] == [{"how": "kill"}]  # the unfinished row only, made again


def test_ctrl_c_stops_the_workers_keeps_the_rows_and_a_rerun_resumes(serial, tmp_path):
    path = tmp_path / "r.jsonl"
    methods = ["single_gpu", "test_distributed_harness:sleeps@seconds=0.5"]
    command = [sys.executable, "-m", "placement_env", "run", "--suite", "tiny", "--methods", *methods, "--budget",
               str(BUDGET), "--seeds", *map(str, SEEDS), "--workers", "2", "-o", str(path)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    # its own process group, as a terminal's job would be, with Ctrl-C's default action: a suite started in the
    # background by a non-interactive shell passes SIGINT on ignored, and Python then never raises KeyboardInterrupt
    cli = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while (not path.exists() or path.read_text().count("\n") < 2) and time.monotonic() < deadline:
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.1)
        os.killpg(cli.pid, signal.SIGINT)  # Ctrl-C: the whole job gets SIGINT
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert cli.returncode != 0 and b"KeyboardInterrupt" in stderr, stderr[-2000:]
    assert not _alive_in_group(cli.pid, wait_s=15.0), "a worker outlived the run"
    kept = read_rows(path)  # whole rows only
    assert 2 <= len(kept) < 3 * 2 * len(SEEDS)
    written = run_suite("tiny", methods, path, budget=BUDGET, seeds=SEEDS, progress=False, workers=2)
    final = read_rows(path)
    assert len(written) + len(kept) == len(final) == 3 * 2 * len(SEEDS) and all(row["ok"] for row in final)
    assert comparable([r for r in final if r["method"] == "single_gpu"]) == \
        comparable([r for r in serial if r["method"] == "single_gpu"])


def test_measured_tasks_run_first_in_this_process_the_rest_on_workers_without_tensorflow(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    tasks = [Task("measured", "rnnlm-tiny", "local:2", runtime="measured"), *ONE_TASK]
    rows = run_suite("mixed", ["test_distributed_harness:where"], tmp_path / "r.jsonl", tasks=tasks, budget=0,
                     seeds=[0, 1], progress=False, workers=2)
    # the workers get each task's op costs from this process, so none of them imports TF to compute them; they wait
    # for OpenMP work passively (their torch threads may outnumber the cores), this process as it was
    assert [(row["task"], row["message"].split(" tf=")[0]) for row in rows] == [
        ("measured", "RuntimeError: worker=False omp=None"), ("measured", "RuntimeError: worker=False omp=None"),
        ("synthetic-tiny-2gpu", "RuntimeError: worker=True omp=PASSIVE"),
        ("synthetic-tiny-2gpu", "RuntimeError: worker=True omp=PASSIVE")]
    assert all(row["anchor_s"] > 0 for row in rows[:2])  # a measured row whose method failed: its anchor still
    assert all(row["message"].endswith("tf=False") for row in rows[2:]), rows


def test_bad_worker_counts_and_addresses_are_refused_before_any_work(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    for workers in (0, -2, True, 2.5, "2"):
        with pytest.raises(ValueError, match=re.escape(f"workers={workers!r}; expected an integer >= 1")):
            run_suite("tiny", ["single_gpu"], path, workers=workers, progress=False)
    for address in ("", "  ", 6379):
        with pytest.raises(ValueError, match=re.escape(f"ray_address={address!r}; expected 'auto'")):
            run_suite("tiny", ["single_gpu"], path, ray_address=address, progress=False)
    assert main(["run", "--methods", "single_gpu", "--workers", "0", "-o", str(path)]) == 2
    assert "--workers 0: expected an integer >= 1 (worker processes, or Ray actors)" in capsys.readouterr().err
    assert not path.exists()


def test_what_a_row_cannot_hold_stops_the_run_with_the_workers_traceback_after_the_rows_in_hand(tmp_path):
    path = tmp_path / "r.jsonl"
    with pytest.raises(Stop, match="stopped on synthetic-tiny") as info:
        run_suite("tiny", ["single_gpu", "test_distributed_harness:stops"], path, budget=0, progress=False, workers=2)
    assert any(re.search(r"in harness worker process \d+:\n.*in stops", note, re.S) for note in info.value.__notes__)
    rows = read_rows(path)  # the rows that came back before and while the run stopped are kept
    assert {row["method"] for row in rows} <= {"single_gpu", "test_distributed_harness:stops"}
    assert not [row for row in rows if row["task"] == "synthetic-tiny-2gpu" and row["method"] != "single_gpu"]


@pytest.mark.slow
def test_a_local_ray_instance_gives_the_serial_rows_and_is_shut_down(serial, tmp_path):
    pytest.importorskip("ray")
    path = tmp_path / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    cli = subprocess.run([sys.executable, "-m", "placement_env", "run", "--suite", "tiny", "--methods", *METHODS,
                          "--budget", str(BUDGET), "--seeds", *map(str, SEEDS), "--ray-address", "local", "--workers",
                          "2", "-o", str(path)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert comparable(read_rows(path)) == comparable(serial)
    assert re.search(r"rows per Ray node: \w+ 24$", cli.stderr, re.M), cli.stderr[-3000:]  # one node, this machine's


# -- a Ray cluster of two nodes on loopback -------------------------------------------------------------------


def inside(folder: Path, temp_dir: Path) -> dict:
    """In private network and PID namespaces: a head and a second node (``ray start``, token authentication on),
    ``placement-env run --ray-address`` against them, then ``ray stop``."""
    from test_ray_cluster import _processes, _ray, _raylets, _reap, start_two_loopback_nodes

    address, env = start_two_loopback_nodes(temp_dir)
    cli = subprocess.run([sys.executable, "-m", "placement_env", "run", "--suite", "tiny", "--methods", *METHODS,
                          "--budget", str(BUDGET), "--seeds", *map(str, SEEDS), "--ray-address", address,
                          "-o", str(folder / "ray.jsonl")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    raylets = _raylets()
    _ray("stop", env=env)
    _reap()
    return {"address": address, "raylets": raylets, "returncode": cli.returncode, "stdout": cli.stdout[-4000:],
            "stderr": cli.stderr[-4000:], "left": list(_processes().values())}


@pytest.mark.slow
def test_a_two_node_ray_cluster_on_loopback_gives_the_serial_rows(serial, tmp_path):
    pytest.importorskip("ray")
    from test_ray_cluster import _namespace_prefix

    prefix = _namespace_prefix()
    if prefix is None:
        pytest.skip("no private network and PID namespaces (unshare) on this machine")
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay short
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    try:
        out = subprocess.run([*prefix, sys.executable, os.path.abspath(__file__), "--inside", str(tmp_path), temp_dir],
                             capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["returncode"] == 0, report["stderr"]
    assert report["address"].startswith("127.0.0.1:") and report["left"] == []
    assert comparable(read_rows(tmp_path / "ray.jsonl")) == comparable(serial)
    line = re.search(r"rows per Ray node: (.*)", report["stderr"]).group(1)
    per_node = {node: int(count) for node, count in (item.split() for item in line.split(", "))}
    assert set(per_node) == set(report["raylets"].values()) and len(per_node) == 2, (line, report["raylets"])
    assert all(count > 0 for count in per_node.values()) and sum(per_node.values()) == len(serial)


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    print(json.dumps(inside(Path(sys.argv[2]), Path(sys.argv[3]))))
