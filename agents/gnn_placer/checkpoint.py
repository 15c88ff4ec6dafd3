"""The placer's checkpoint (the network's weights, its :class:`Config` and what it was trained on) and the cost
model's (:class:`.cost_model.CostNet`'s weights and shape), saved with ``torch.save`` as plain tensors and dicts
and loaded with ``torch.load(weights_only=True)``, so a crafted file cannot run code when it is read.

The harness methods load ``$GNN_PLACER_CHECKPOINT`` when it is set, else the pre-trained ``pretrained.pt``
beside this file (made by the README's training command), and ``$GNN_PLACER_COST_MODEL`` or ``cost_model.pt``
likewise. The committed networks have names (:data:`COMMITTED`, ``<name>.pt`` beside this file): ``pretrained``
and ``placebench-v1``, the network trained on placebench-v1's generalisation train split (its command is in
docs/agents.md). A missing file is a FileNotFoundError and an unreadable or foreign one a
CheckpointMismatchError; both name the file and how to make one.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, get_args

from agents.common.checkpoint import NO_CODE_RUN, load_plain, save_plain
from placement_env.errors import CheckpointMismatchError

from .cost_model import CostNet
from .network import GnnPlacerNet
from .trainer import Config

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
PRETRAINED = Path(__file__).with_name("pretrained.pt")
# The committed networks by name, each <name>.pt beside this file; a harness method's ``checkpoint=`` takes a
# name or a path.
CommittedName = Literal["pretrained", "placebench-v1"]
COMMITTED = {name: Path(__file__).with_name(f"{name}.pt") for name in get_args(CommittedName)}
CHECKPOINT_ENV = "GNN_PLACER_CHECKPOINT"
HOW_TO_TRAIN = "python -m agents.gnn_placer --out-dir DIR makes DIR/checkpoint.pt"
COST_MODEL = "cost_model.pt"
COST_MODEL_FORMAT = 1
PRETRAINED_COST_MODEL = Path(__file__).with_name(COST_MODEL)
COST_MODEL_ENV = "GNN_PLACER_COST_MODEL"
HOW_TO_TRAIN_COST_MODEL = "python -m agents.gnn_placer.train_cost_model --out-dir DIR makes DIR/cost_model.pt"


def save_checkpoint(path: Path, net: GnnPlacerNet, config: Config, meta: dict[str, Any]) -> None:
    """Write ``net``'s weights, ``config`` and ``meta`` (plain data: what it was trained on) to ``path``."""
    state = {"format": CHECKPOINT_FORMAT, "config": config.as_dict(), "feature_dim": net.feature_dim,
             "meta": meta, "weights": {k: v.detach().clone() for k, v in net.state_dict().items()}}
    save_plain(path, state)


def checkpoint_path(checkpoint: str | Path | None = None) -> Path:
    """The file of ``checkpoint``: a name of :data:`COMMITTED`, a path, or (None) ``$GNN_PLACER_CHECKPOINT`` if set,
    else the committed pre-trained checkpoint."""
    if isinstance(checkpoint, str) and checkpoint in COMMITTED:
        return COMMITTED[checkpoint]
    if checkpoint is not None:
        return Path(checkpoint)
    return Path(os.environ[CHECKPOINT_ENV]) if os.environ.get(CHECKPOINT_ENV) else PRETRAINED


def cost_model_path() -> Path:
    """``$GNN_PLACER_COST_MODEL`` if set, else the committed cost model."""
    return Path(os.environ[COST_MODEL_ENV]) if os.environ.get(COST_MODEL_ENV) else PRETRAINED_COST_MODEL


def _read(path: Path, what: str, kind: str | None, fmt: int, how: str) -> dict[str, Any]:
    """The dict a checkpoint (``what``, in errors) of ``kind`` (None: the placer's, which carry no kind) in format
    ``fmt`` holds at ``path``; errors name the file and ``how`` to make one."""
    if not path.is_file():
        raise FileNotFoundError(f"GNN placer: no {what} at {path}; {how}")
    state = load_plain(path, lambda why: f"GNN placer: {path} is not a readable {what} ({why}); {NO_CODE_RUN}; {how}")
    if not isinstance(state, dict) or state.get("format") != fmt or state.get("kind") != kind:
        if not isinstance(state, dict):
            found = type(state).__name__
        else:
            found = repr(state.get("format")) if state.get("format") != fmt else f"kind {state.get('kind')!r}"
        raise CheckpointMismatchError(f"GNN placer: {path} is not a {what} of format {fmt} (found {found}); {how}")
    return state


def load_network(path: str | Path | None = None) -> tuple[GnnPlacerNet, Config, dict[str, Any]]:
    """The network, its config and meta from the checkpoint ``path``: a file, a name of :data:`COMMITTED`, or
    (None) :func:`checkpoint_path`'s default."""
    path = checkpoint_path(path)
    how = f"set ${CHECKPOINT_ENV} to another; {HOW_TO_TRAIN}"
    state = _read(path, "checkpoint", None, CHECKPOINT_FORMAT, how)
    try:
        config = Config(**state["config"])
        net = config.network(int(state["feature_dim"]))
        net.load_state_dict(state["weights"])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointMismatchError(f"GNN placer: {path} does not fit this version's network "
                                      f"({type(error).__name__}: {str(error)[:200]}); {HOW_TO_TRAIN}") from None
    net.eval()
    return net, config, dict(state.get("meta", {}))


def save_cost_model(path: Path, net: CostNet, meta: dict[str, Any]) -> None:
    """Write the cost model ``net``'s weights and shape and ``meta`` (plain data) to ``path``."""
    state = {"format": COST_MODEL_FORMAT, "kind": "cost model", "hidden": net.hidden, "layers": net.layers,
             "meta": meta, "weights": {k: v.detach().clone() for k, v in net.state_dict().items()}}
    save_plain(path, state)


def load_cost_model(path: Path | None = None) -> tuple[CostNet, dict[str, Any]]:
    """The cost model and its meta from ``path`` (default :func:`cost_model_path`)."""
    path = Path(path) if path is not None else cost_model_path()
    how = f"set ${COST_MODEL_ENV} to another; {HOW_TO_TRAIN_COST_MODEL}"
    state = _read(path, "cost model checkpoint", "cost model", COST_MODEL_FORMAT, how)
    try:
        net = CostNet(hidden=int(state["hidden"]), layers=int(state["layers"]))
        net.load_state_dict(state["weights"])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise CheckpointMismatchError(f"GNN placer: {path} does not fit this version's cost model "
                                      f"({type(error).__name__}: {str(error)[:200]}); {HOW_TO_TRAIN_COST_MODEL}") from None
    net.eval()
    return net, dict(state.get("meta", {}))
