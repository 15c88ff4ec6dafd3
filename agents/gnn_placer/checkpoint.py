"""The placer's checkpoint: the network's weights, its :class:`Config` and what it was trained on, saved with
``torch.save`` as plain tensors and dicts and loaded with ``torch.load(weights_only=True)``, so a crafted file
cannot run code when it is read.

The harness methods load ``$GNN_PLACER_CHECKPOINT`` when it is set, else the pre-trained ``pretrained.pt``
beside this file (made by the README's training command). A missing file is a FileNotFoundError and an
unreadable or foreign one a CheckpointMismatchError; both name the file and how to make one.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from agents.run_files import atomic_write
from placement_env.errors import CheckpointMismatchError

from .network import GnnPlacerNet
from .trainer import Config

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
PRETRAINED = Path(__file__).with_name("pretrained.pt")
CHECKPOINT_ENV = "GNN_PLACER_CHECKPOINT"
HOW_TO_TRAIN = "python -m agents.gnn_placer --out-dir DIR makes DIR/checkpoint.pt"


def save_checkpoint(path: Path, net: GnnPlacerNet, config: Config, meta: dict[str, Any]) -> None:
    """Write ``net``'s weights, ``config`` and ``meta`` (plain data: what it was trained on) to ``path``."""
    state = {"format": CHECKPOINT_FORMAT, "config": config.as_dict(), "feature_dim": net.feature_dim,
             "meta": meta, "weights": {k: v.detach().clone() for k, v in net.state_dict().items()}}
    atomic_write(Path(path), lambda handle: torch.save(state, handle), binary=True)


def checkpoint_path() -> Path:
    """``$GNN_PLACER_CHECKPOINT`` if set, else the committed pre-trained checkpoint."""
    return Path(os.environ[CHECKPOINT_ENV]) if os.environ.get(CHECKPOINT_ENV) else PRETRAINED


def load_network(path: Path | None = None) -> tuple[GnnPlacerNet, Config, dict[str, Any]]:
    """The network, its config and meta from the checkpoint at ``path`` (default :func:`checkpoint_path`)."""
    path = Path(path) if path is not None else checkpoint_path()
    if not path.is_file():
        raise FileNotFoundError(f"GNN placer: no checkpoint at {path} (set ${CHECKPOINT_ENV} to another; "
                                f"{HOW_TO_TRAIN})")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch raises several types for a bad file
        reason = (str(error).strip().splitlines() or ["no details"])[0][:200]
        raise CheckpointMismatchError(f"GNN placer: {path} is not a readable checkpoint ({type(error).__name__}: "
                                      f"{reason}); {HOW_TO_TRAIN}") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointMismatchError(f"GNN placer: {path} is not a GNN placer checkpoint of format "
                                      f"{CHECKPOINT_FORMAT} (found {found!r}); {HOW_TO_TRAIN}")
    try:
        config = Config(**state["config"])
        net = config.network(int(state["feature_dim"]))
        net.load_state_dict(state["weights"])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointMismatchError(f"GNN placer: {path} does not fit this version's network "
                                      f"({type(error).__name__}: {str(error)[:200]}); {HOW_TO_TRAIN}") from None
    net.eval()
    return net, config, dict(state.get("meta", {}))
