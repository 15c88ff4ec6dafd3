"""Checks of the files and folders a command is to write, made before it starts its work, so that a bad
path is a sentence naming the flag and the path, not a traceback after minutes of computing."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import OutputPathError


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
    """``path`` as a Path if it is a folder that exists or can be made; an OutputPathError naming ``flag`` if not."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"argument {flag}: {path} is a file; give a folder (it is made if missing)")
    _check_can_create_in(path, path, flag)
    return path


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` as a Path if it is a file that can be written (made, with its folders, if missing); an
    OutputPathError naming ``flag`` if not."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"argument {flag}: {path} is a folder; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"argument {flag}: {path} is not writable")
    _check_can_create_in(path.parent, path, flag)
    return path
