"""The training checkpoint (``checkpoint.pt`` in the run folder): its format, saving and loading it, and the
checks that refuse to resume from one that belongs to another version, task or graph shape.

A checkpoint is ``{"format": CHECKPOINT_FORMAT, "meta": {benchmark, cluster, runtime}, **Trainer.state()}``,
written atomically with ``torch.save``. A refused resume raises :class:`CheckpointMismatchError` and changes
nothing in the run folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from agents.run_files import atomic_write
from placement_env.errors import CheckpointMismatchError

from .trainer import Trainer

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 3  # 2: dot-product attention, elites; 3: local moves
CHECKPOINT_EVERY = 25  # updates


def save_checkpoint(path: Path, trainer: Trainer, meta: dict[str, str]) -> None:
    """Write ``trainer``'s state for the task ``meta`` to ``path``."""
    state = {"format": CHECKPOINT_FORMAT, "meta": meta, **trainer.state()}
    atomic_write(path, lambda handle: torch.save(state, handle), binary=True)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path``, as saved (tensors on the CPU).

    Loaded with ``weights_only=True``: a checkpoint holds tensors and plain data only, so a crafted
    file cannot run code when it is read. Anything unreadable (empty, truncated, not a checkpoint,
    or asking for other objects) is a CheckpointMismatchError that names the file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:  # noqa: BLE001 - torch raises several types for a bad file
        reason = (str(error).strip().splitlines() or ["no details"])[0][:200]
        raise CheckpointMismatchError(
            f"resume: {path} is not a readable checkpoint ({type(error).__name__}: {reason}); only tensors and "
            "plain data are loaded; use another --out-dir to start afresh (nothing was changed)") from None
    if not isinstance(state, dict):
        raise CheckpointMismatchError(f"resume: {path} holds a {type(state).__name__}, not a checkpoint "
                                      "(nothing was changed)")
    return state


def load_for_resume(path: Path, meta: dict[str, str]) -> dict[str, Any]:
    """The checkpoint at ``path`` if a run on the task ``meta`` may continue from it.

    FileNotFoundError if there is none; CheckpointMismatchError if it has another format or belongs to
    another benchmark, cluster or runtime."""
    if not path.exists():
        raise FileNotFoundError(f"resume: no checkpoint at {path}")
    state = load_checkpoint(path)
    if state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(
            f"resume: {path} has checkpoint format {state.get('format')!r}, this version reads format "
            f"{CHECKPOINT_FORMAT}; use another --out-dir to start afresh (nothing was changed)")
    theirs = state.get("meta", {})
    if theirs != meta:
        raise CheckpointMismatchError(
            f"resume: {path} belongs to benchmark={theirs.get('benchmark')!r} "
            f"cluster={theirs.get('cluster')!r} runtime={theirs.get('runtime')!r}, not benchmark="
            f"{meta['benchmark']!r} cluster={meta['cluster']!r} runtime={meta['runtime']!r}; "
            f"use another --out-dir or the matching flags (nothing was changed)")
    return state


def check_shapes(state: dict[str, Any], path: Path, *, feature_dim: int, n_devices: int) -> None:
    """CheckpointMismatchError if the checkpoint's policy was made for other features or another device count."""
    weights = state["policy"]
    if weights["head.weight"].shape[0] != n_devices or weights["embed.0.weight"].shape[1] != feature_dim:
        raise CheckpointMismatchError(f"resume: {path} was made for another graph or cluster shape")
