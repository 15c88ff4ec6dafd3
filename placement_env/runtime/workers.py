"""Operating-system side of the local TF workers: isolation from the network and the host's files, stopping processes.

TF's gRPC servers listen on 0.0.0.0 without authentication and run any graph sent to them, and a
graph's ops run with the user's rights. So local workers run inside private network, mount and pid
namespaces (``unshare --net --mount --pid --fork --map-root-user``): nothing outside the driver can
reach their ports, and the driver pivots into a private root (:mod:`.private_root`) where the host's
files are out of reach and the only writable place is a tmpfs that disappears with the workers.
:func:`isolation_prefix` decides how a driver is run: isolated so, or (only with the caller's
explicit consent) exposed on this machine's network and file system. :func:`kill_process_tree`
stops a driver and its workers; :func:`alive` tells whether a process is still there,
:func:`unresponsive` which processes died or are stopped, and :func:`host_pids` the host's ids of
processes known by their ids inside the driver's pid namespace.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

from ..errors import IsolationError
from . import private_root

REAP_WAIT_S = 5.0  # how long to wait for killed workers to disappear
ISOLATION_FLAGS = ("--net", "--mount", "--pid", "--kill-child", "--map-root-user")


@functools.lru_cache(maxsize=1)
def unshare_command() -> tuple[list[str], str]:
    """(the prefix that runs a command in private namespaces, ``""``), or (``[]``, why not) where this
    machine does not allow them or the private root (:mod:`.private_root`) cannot be built in them.
    Probed once per process: the probe builds the root and checks what it sees."""
    tool = shutil.which("unshare")
    if tool is None:
        return [], "the unshare command (util-linux) is missing"
    prefix = [tool, *ISOLATION_FLAGS, "--"]
    probe_command = [*prefix, sys.executable, "-I", private_root.__file__, private_root.package_root()]
    try:
        probe = subprocess.run(probe_command, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as error:
        return [], f"`{' '.join(probe_command)}` failed: {error}"
    if probe.returncode != 0:
        last_line = (probe.stderr.decode(errors="replace").strip().splitlines() or [f"status {probe.returncode}"])[-1]
        return [], f"`unshare {' '.join(ISOLATION_FLAGS)}` with a private root failed: {last_line}"
    try:
        check_private_root(json.loads(probe.stdout), own_namespace())
    except (ValueError, IsolationError) as error:
        return [], str(error)
    return prefix, ""


def own_namespace() -> str:
    """This process's mount namespace id (``mnt:[inode]``), ``""`` if /proc does not tell."""
    try:
        return os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""


def check_private_root(seen: dict, host_namespace: str) -> None:
    """IsolationError unless ``seen`` (:func:`~.private_root.describe_root` of a driver) shows a mount
    namespace other than ``host_namespace``, no host files, and only the private tmpfs writable."""
    namespace = seen.get("mount_namespace") if isinstance(seen, dict) else None
    if not isinstance(seen, dict) or not namespace or namespace == host_namespace:
        raise IsolationError(f"the driver reports no private mount namespace ({seen!r:.200}); its workers "
                             "would see the host's files")
    if seen.get("host_files") or seen.get("writable") != [private_root.PRIVATE_TMP]:
        raise IsolationError(f"the driver's private root is not sealed: host files visible = "
                             f"{seen.get('host_files')!r}, writable = {seen.get('writable')!r} (expected only "
                             f"{private_root.PRIVATE_TMP!r})")


def isolation_prefix(isolate: bool, allow_exposed_workers: bool) -> tuple[list[str], bool]:
    """(command prefix, isolated) for a driver with local workers.

    ``isolate=True`` gives the :func:`unshare_command` prefix; where the OS allows no private
    namespaces or root it raises IsolationError, unless ``allow_exposed_workers=True``: then the
    workers run in the host's namespaces (warned), as they do with ``isolate=False`` (which needs that
    consent too).
    """
    prefix: list[str] = []
    isolated = False
    if isolate:
        unshare, why_not = unshare_command()
        if unshare:
            prefix, isolated = unshare, True
        elif not allow_exposed_workers:
            raise IsolationError(
                f"cannot isolate the TF workers here ({why_not}): they need private network, mount and pid "
                "namespaces, because TF worker servers listen on 0.0.0.0 with no authentication and run any "
                "graph sent to them with your rights on your files. Enable unprivileged user namespaces, or "
                "pass allow_exposed_workers=True to run them exposed on this machine's network and file "
                "system anyway.")
    elif not allow_exposed_workers:
        raise IsolationError("isolate=False exposes the TF workers to the network and to this machine's files; "
                             "pass allow_exposed_workers=True as well to confirm")
    if not isolated:
        warnings.warn(  # stacklevel: the caller of LocalWorkers(...)
            "placement_env: local TF workers run WITHOUT isolation: their gRPC ports accept unauthenticated "
            "graphs from any host that can reach this machine, and those graphs run with your rights on your "
            "files", RuntimeWarning, stacklevel=3)
    return prefix, isolated


def host_pids(leader: int, inside: list[int]) -> list[int]:
    """The host's process ids of ``inside`` (ids in the pid namespace of ``leader``'s child, the
    driver that ``unshare --fork`` started); an id not found stays as given."""
    driver = next((pid for pid, parent in _processes() if parent == leader), None)
    if driver is None:
        return list(inside)
    try:
        namespace = os.readlink(f"/proc/{driver}/ns/pid")
    except OSError:
        return list(inside)
    by_inner: dict[int, int] = {}
    for pid, _ in _processes():
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
                continue
            with open(f"/proc/{pid}/status", "rb") as handle:
                line = next(row for row in handle if row.startswith(b"NSpid:"))
        except (OSError, StopIteration):
            continue
        by_inner[int(line.split()[-1])] = pid
    return [by_inner.get(pid, pid) for pid in inside]


def _processes() -> list[tuple[int, int]]:
    """(pid, parent pid) of every process in this pid namespace's /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    found.append((int(entry), int(handle.read().rsplit(b")", 1)[1].split()[1])))
            except (OSError, IndexError, ValueError):
                continue
    return found


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

    ``worker_pids`` (the workers, and the driver where ``proc`` is the ``unshare`` that started it) are
    killed one by one as well, in case one left the group. They are reaped by init once ``proc`` is
    gone; this waits up to :data:`REAP_WAIT_S` for them to disappear, so callers see them gone.
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
