"""A private file system for measured workers: the host's files out of reach, one private tmpfs to write.

Run inside fresh user, mount and pid namespaces (``unshare --net --mount --pid --fork --map-root-user``, see
:mod:`.workers`), :func:`enter_private_root` builds a new root on a tmpfs that holds, read-only,
only what the driver and its TF workers need to run -- the system's programs and libraries
(``/usr`` and its ``/bin``, ``/lib*`` links), the Python installation, the virtual environment, the
``placement_env`` package, ``/etc/ld.so.cache`` and four character devices -- a ``/proc`` of its own
pid namespace (TF reads ``/proc/self/exe``; the host's ``/proc`` would lead back to the host's root
through ``/proc/<pid>/root``), and one writable, size-limited tmpfs at ``/tmp`` (also ``$HOME`` and
``$TMPDIR``). It then pivots into that root and detaches the host's: the rest of the host's tree
(``/etc``, ``/home``, ``/root``, the project's files, the user's data) is not in the namespace at
all, and the new root itself is read-only. Everything is undone by the kernel when the namespace's last process exits: the tmpfs and
what a graph wrote there disappear with the workers.

:func:`describe_root` is the driver's own check of the result (reported in its hello and verified by
the parent, :class:`~.driver.DriverProcess`): which paths are writable and whether a probe file
outside ``/tmp`` can be created.

Only the standard library is used: this runs in the driver before TensorFlow is imported.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

PRIVATE_TMP = "/tmp"  # the only writable place inside the private root
TMPFS_SIZE = "2g"  # cap on what a graph can write there (tmpfs pages are memory)

# <linux/mount.h>
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (Linux >= 5.12)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache")


class PrivateRootError(OSError):
    """The private root could not be made (a mount, pivot or check failed)."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise PrivateRootError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)),
           f"mount {source or fstype} on {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _make_read_only(target: str) -> None:
    """Mark the mount at ``target`` and every mount below it read-only (``mount_setattr``)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, target.encode(), AT_RECURSIVE, ctypes.byref(attr),
                         ctypes.sizeof(attr)), f"make {target} read-only")


def needed_paths(package_root: str) -> list[str]:
    """Host paths the driver and workers need inside the private root: the system's programs and
    libraries, the Python installation and environment, and the folder that holds ``placement_env``."""
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))]
    package = [os.path.join(package_root, "placement_env")]
    found: list[str] = []
    for path in [*SYSTEM_PATHS, *python, *package]:
        if os.path.lexists(path) and path not in found:
            found.append(path)
    return found


def _copy_path(path: str, root: str) -> None:
    """Reproduce host ``path`` under ``root``: a symlink as the same symlink, a folder or file as a
    read-only bind mount (with the mounts below it)."""
    inside = root + path
    if os.path.lexists(inside):
        return
    os.makedirs(os.path.dirname(inside), exist_ok=True)
    if os.path.islink(path) and not os.path.isabs(os.readlink(path)):
        os.symlink(os.readlink(path), inside)  # /lib -> usr/lib, resolved inside the new root
        return
    if os.path.isdir(path):
        os.makedirs(inside, exist_ok=True)
    else:
        open(inside, "wb").close()
    _mount(path, inside, None, MS_BIND | MS_REC)
    _make_read_only(inside)


def _mount_point(keep: list[str]) -> str:
    """An existing host folder to build the new root on (the tmpfs hides it in this namespace only),
    none of ``keep`` below it."""
    for folder in ("/mnt", "/media", "/srv", "/opt", "/tmp"):
        if os.path.isdir(folder) and not os.path.islink(folder) and not any(
                path == folder or path.startswith(folder + "/") for path in keep):
            return folder
    raise PrivateRootError(errno.ENOENT, "no free folder (/mnt, /media, /srv, /opt, /tmp) to build the private root on")


def enter_private_root(keep: list[str]) -> None:
    """Pivot this process into a new root that holds ``keep`` (read-only), four devices and a private
    writable tmpfs at :data:`PRIVATE_TMP`; the host's root is detached. Needs private mount and pid
    namespaces with ``CAP_SYS_ADMIN`` in them (``unshare --mount --pid --fork --map-root-user``);
    raises PrivateRootError."""
    if os.uname().machine not in SYS_PIVOT_ROOT:
        raise PrivateRootError(errno.ENOSYS, f"no pivot_root number known for {os.uname().machine}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below leaks back to the host
    root = _mount_point(keep)
    _mount("placement-env-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    for path in keep:
        _copy_path(path, root)
    for device in DEVICES:
        if os.path.exists(device):
            _copy_path(device, root)
    private_tmp = root + PRIVATE_TMP
    os.makedirs(private_tmp, exist_ok=True)
    _mount("placement-env-tmp", private_tmp, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMPFS_SIZE}")
    os.makedirs(root + "/proc", exist_ok=True)  # this pid namespace's processes only
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(root + "/dev/shm", exist_ok=True)
    _mount("placement-env-shm", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    os.chdir(root)
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root into the private root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.environ.update(HOME=PRIVATE_TMP, TMPDIR=PRIVATE_TMP)
    os.chdir(PRIVATE_TMP)


def describe_root(probes: tuple[str, ...] = ("/", "/usr", "/etc")) -> dict:
    """What this process sees of the file system: ``writable`` (each of ``probes`` and
    :data:`PRIVATE_TMP` where a new file can be made), ``host_files`` (the host's ``/etc`` or
    ``/home`` is visible) and ``mount_namespace`` (its id, ``mnt:[inode]``)."""
    writable = []
    for folder in (*probes, PRIVATE_TMP):
        probe = os.path.join(folder, f".placement-env-probe-{os.getpid()}")
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            continue
        os.close(fd)
        os.unlink(probe)
        writable.append(folder)
    return {"writable": writable, "host_files": os.path.exists("/etc/passwd") or os.path.exists("/home"),
            "mount_namespace": _namespace_id()}


def _namespace_id() -> str:
    try:
        return os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""


def package_root() -> str:
    """The folder that holds the ``placement_env`` package (what ``PYTHONPATH`` needs to import it)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":  # the probe of :func:`~.workers.unshare_command`: build the root, print what it holds
    import json

    enter_private_root(needed_paths(sys.argv[1] if len(sys.argv) > 1 else package_root()))
    print(json.dumps(describe_root()))
