"""Operating-system side of the local TF workers: network isolation and stopping processes.

TF's gRPC servers listen on 0.0.0.0 without authentication and run any graph sent to them, so
local workers run inside a private network namespace (``unshare --net --map-root-user``) where
nothing outside the driver can reach them. :func:`isolation_prefix` decides how a driver is run:
in such a namespace, or (only with the caller's explicit consent) exposed on this machine's
network. :func:`kill_process_tree` stops a driver and its workers; :func:`alive` tells whether a
process is still there and :func:`unresponsive` which processes died or are stopped.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

from ..errors import IsolationError

REAP_WAIT_S = 5.0  # how long to wait for killed workers to disappear


def unshare_command() -> list[str] | None:
    """The prefix that runs a command in a private network namespace, or None if not allowed here."""
    tool = shutil.which("unshare")
    if tool is None:
        return None
    prefix = [tool, "--net", "--map-root-user", "--"]
    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix if probe.returncode == 0 else None


def isolation_prefix(isolate: bool, allow_exposed_workers: bool) -> tuple[list[str], bool]:
    """(command prefix, isolated) for a driver with local workers.

    ``isolate=True`` gives the :func:`unshare_command` prefix; where the OS allows no private
    namespace it raises IsolationError, unless ``allow_exposed_workers=True``: then the workers run
    in the host namespace (warned), as they do with ``isolate=False`` (which needs that consent too).
    """
    prefix: list[str] = []
    isolated = False
    if isolate:
        unshare = unshare_command()
        if unshare is not None:
            prefix, isolated = unshare, True
        elif not allow_exposed_workers:
            raise IsolationError(
                "cannot create a private network namespace (`unshare --net --map-root-user` is missing or not "
                "permitted here); TF worker servers listen on 0.0.0.0 with no authentication and run any graph "
                "sent to them. Enable unprivileged user namespaces, or pass allow_exposed_workers=True to run "
                "them exposed on this machine's network anyway.")
    elif not allow_exposed_workers:
        raise IsolationError("isolate=False exposes the TF workers to the network; "
                             "pass allow_exposed_workers=True as well to confirm")
    if not isolated:
        warnings.warn(  # stacklevel: the caller of LocalWorkers(...)
            "placement_env: local TF workers run WITHOUT network isolation: their gRPC ports accept "
            "unauthenticated graphs from any host that can reach this machine", RuntimeWarning, stacklevel=3)
    return prefix, isolated


def _state(pid: int) -> bytes:
    """The state letter of ``pid`` in ``/proc/<pid>/stat`` (b"R", b"S", b"T" stopped, b"Z" zombie, ...); b"" if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b""


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    return _state(pid) not in (b"", b"Z", b"X")


def unresponsive(pids: list[int]) -> list[str]:
    """What is wrong with each of ``pids`` that cannot work: "pid N died" or "pid N is stopped" (by SIGSTOP
    or a debugger); empty when all of them can run."""
    found = []
    for pid in pids:
        state = _state(pid)
        if state in (b"", b"Z", b"X"):
            found.append(f"pid {pid} died")
        elif state in (b"T", b"t"):
            found.append(f"pid {pid} is stopped")
    return found


def kill_process_tree(proc: subprocess.Popen, worker_pids: list[int]) -> None:
    """SIGKILL the process group led by ``proc`` (a driver and its workers) and reap ``proc``.

    ``worker_pids`` are killed one by one as well, in case a worker left the group. Workers are
    reaped by init once the driver is gone; this waits up to :data:`REAP_WAIT_S` for them to
    disappear, so callers see them gone.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in worker_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass
    end = time.monotonic() + REAP_WAIT_S
    while any(alive(pid) for pid in worker_pids) and time.monotonic() < end:
        time.sleep(0.02)
