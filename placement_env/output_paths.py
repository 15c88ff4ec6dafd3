"""The files and folders a command writes: checks made before it starts its work (so that a bad path is a
sentence naming the flag and the path, not a traceback after minutes of computing), and the writing itself.

A path named by a flag (a results file, a picture, a report folder) and every file written into a report folder
must not be a symbolic link: the folder is opened with ``O_DIRECTORY | O_NOFOLLOW`` and its files are opened
relative to it with ``O_NOFOLLOW``, so a link planted there (``report/report.md -> /elsewhere``) is refused with an
OutputPathError naming it, and nothing is written through it. A file that is not a regular file (a FIFO, a device)
or that has other hard links is refused too. The folders above the named path are the caller's and are followed.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Callable

from .errors import OutputPathError

_NAME_CHARACTERS = re.compile(r"[a-z0-9._-]")  # kept as they are in file names; every other byte is escaped
MAX_NAME_PART = 120  # characters of a file-name part before it is cut and given a hash


def file_name_part(name: str) -> str:
    """``name`` (e.g. a task name taken from a results file) as one file-name component that is different for
    every different ``name``, also on a file system that ignores case: lower-case letters, digits and ``._-`` as
    they are, each other UTF-8 byte as ``~XX`` (hex), a leading dot as ``~2e``; past ``MAX_NAME_PART`` characters
    the part is cut and ends with ``~~`` and 16 hex digits of the name's SHA-256."""
    escaped = "".join(c if _NAME_CHARACTERS.fullmatch(c) else "".join(f"~{b:02x}" for b in c.encode("utf-8",
                                                                                                  "surrogatepass"))
                      for c in str(name))
    if escaped.startswith("."):
        escaped = "~2e" + escaped[1:]
    if len(escaped) <= MAX_NAME_PART:
        return escaped or "~"
    cut = MAX_NAME_PART - 18
    while "~" in escaped[cut - 2:cut]:  # never cut an escape in two
        cut -= 1
    digest = hashlib.sha256(str(name).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{escaped[:cut]}~~{digest}"


def _refusal(shown: str, path: Path, flag: str = "") -> OutputPathError | None:
    """The OutputPathError for an existing ``path`` that must not be written to (a symbolic link, not a regular
    file or folder), or None."""
    prefix = f"argument {flag}: " if flag else ""
    try:
        info = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return OutputPathError(f"{prefix}{shown} is a symbolic link (to {os.readlink(path)}); nothing is written "
                               "through a link: remove it or give another path")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return OutputPathError(f"{prefix}{shown} is not a regular file or folder; give another path")
    return None


def _check_can_create_in(path: Path, shown: Path, flag: str) -> None:
    """OutputPathError unless ``path`` can be made: its nearest existing ancestor is a writable folder."""
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise OutputPathError(f"argument {flag}: {shown}: {existing} is a file, so nothing can be made under it; "
                              "give a path in a writable folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"argument {flag}: {shown}: the folder {existing} is not writable; "
                              "give a path in a writable folder")


def check_output_folder(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` as a Path if it is a folder that exists or can be made (not a symbolic link); an OutputPathError
    naming ``flag`` if not."""
    path = Path(path)
    refusal = _refusal(str(path), path, flag)
    if refusal is not None:
        raise refusal
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"argument {flag}: {path} is a file; give a folder (it is made if missing)")
    _check_can_create_in(path, path, flag)
    return path


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` as a Path if it is a file that can be written (made, with its folders, if missing; not a symbolic
    link); an OutputPathError naming ``flag`` if not."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise OutputPathError(f"argument {flag}: {path} is a folder; give a file path")
    refusal = _refusal(str(path), path, flag)
    if refusal is not None:
        raise refusal
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"argument {flag}: {path} is not writable")
    _check_can_create_in(path.parent, path, flag)
    return path


def _open_folder(path: Path, *, follow: bool) -> int:
    """A descriptor of folder ``path``, made (with its parents) if missing; with ``follow`` False the folder
    itself may not be a symbolic link."""
    if not path.is_symlink():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a file: named below
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(path, flags)
    except OSError as error:
        refusal = _refusal(str(path), path)
        if refusal is not None:
            raise refusal from None
        if error.errno == errno.ENOTDIR:
            raise OutputPathError(f"{path} is a file; give a folder") from None
        raise


def _open_file(folder: int, name: str, shown: str, *, append: bool) -> int:
    """A write descriptor of file ``name`` in the folder open as ``folder`` (made if missing, emptied unless
    ``append``), never through a symbolic link and only for a regular file without other hard links."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise OutputPathError(f"{shown}: {name!r} is not a file name; a file is written inside its folder")
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(name, flags, 0o644, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            target = os.readlink(name, dir_fd=folder)
            raise OutputPathError(f"{shown} is a symbolic link (to {target}); nothing is written through a link: "
                                  "remove it or give another path") from None
        if error.errno in (errno.ENXIO, errno.EISDIR):
            raise OutputPathError(f"{shown} is not a regular file; give another path") from None
        raise OSError(error.errno, error.strerror, shown) from None  # named by its whole path, not its name
    info = os.fstat(fd)
    reason = ("is not a regular file" if not stat.S_ISREG(info.st_mode)
              else f"has {info.st_nlink - 1} other hard link(s), which would change too" if info.st_nlink > 1 else "")
    if reason:
        os.close(fd)
        raise OutputPathError(f"{shown} {reason}; give another path")
    if not append:
        os.ftruncate(fd, 0)
    return fd


def _fill(handle: BinaryIO, content: bytes | Callable[[BinaryIO], object]) -> None:
    """Write ``content`` to ``handle``: the bytes, or what ``content(handle)`` writes."""
    if callable(content):
        content(handle)
    else:
        handle.write(content)


class OutputFolder:
    """A folder a command writes its files into (made if missing), opened once without following a symbolic
    link; each file is written through a descriptor opened relative to it (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd = _open_folder(self.path, follow=False)

    def write(self, name: str, content: bytes | Callable[[BinaryIO], object]) -> Path:
        """Write file ``name`` in the folder: ``content`` itself, or what ``content(handle)`` writes to the
        binary handle it is given; returns the file's path."""
        path = self.path / name
        with os.fdopen(_open_file(self._fd, name, str(path), append=False), "wb") as handle:
            _fill(handle, content)
        return path

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_output_file(path: str | os.PathLike[str], *, append: bool = False) -> BinaryIO:
    """File ``path`` opened for writing (binary, read too; made with its folders if missing, emptied unless
    ``append``); the file itself may not be a symbolic link (see the module docstring)."""
    path = Path(path)
    folder = _open_folder(path.parent, follow=True)
    try:
        return os.fdopen(_open_file(folder, path.name, str(path), append=append), "r+b")
    finally:
        os.close(folder)


def write_output_file(path: str | os.PathLike[str], content: bytes | Callable[[BinaryIO], object]) -> Path:
    """Write file ``path`` (as :meth:`OutputFolder.write` writes a file of a folder); returns ``path`` as a Path."""
    with open_output_file(path) as handle:
        _fill(handle, content)
    return Path(path)
