"""Writing and reading the agents' torch checkpoints.

A checkpoint is written with ``torch.save`` through a temporary file and a rename (:func:`save_plain`), and
read with ``torch.load(weights_only=True)`` on the CPU (:func:`load_plain`): tensors and plain data only, so a
crafted file cannot run code when it is read. What the file must hold is each agent's own check.
"""
from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any, Callable

from placement_env import CheckpointMismatchError

from .run_files import atomic_write

NO_CODE_RUN = "only tensors and plain data are loaded, and no code is run"


def save_plain(path: str | os.PathLike, state: Any) -> None:
    """Write ``state`` (tensors and plain data) to ``path`` with ``torch.save``, atomically."""
    import torch

    atomic_write(Path(path), lambda handle: torch.save(state, handle), binary=True)


def load_plain(path: str | os.PathLike, unreadable: Callable[[str], str]) -> Any:
    """What ``torch.save`` wrote to ``path``, loaded on the CPU with ``weights_only=True``. FileNotFoundError if
    there is no file; for a file it cannot read (empty, cut short, not a checkpoint, or asking for other objects),
    a CheckpointMismatchError whose message is ``unreadable(why)``, ``why`` from :func:`unreadable_reason`."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - torch raises several types for a bad file
        raise CheckpointMismatchError(unreadable(unreadable_reason(error))) from None


def unreadable_reason(error: Exception) -> str:
    """Why ``torch.load(weights_only=True)`` could not read a file, in our words: torch's own text for a file
    that asks for other objects suggests loading it with ``weights_only=False``, which would run whatever
    code the file holds."""
    if isinstance(error, pickle.UnpicklingError):
        wanted = re.search(r"GLOBAL (\S+)", str(error))
        return (f"it asks for the Python object {wanted.group(1)}" if wanted else "its data is not a checkpoint's")
    if isinstance(error, EOFError):
        return "it is empty or cut short"
    first = str(error).strip().split(". ")[0][:200]
    return f"{type(error).__name__}: {first if first and 'weights_only' not in first else 'not a torch checkpoint'}"
