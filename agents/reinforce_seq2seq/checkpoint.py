"""The training checkpoint (``checkpoint.pt`` in the run folder): its format, saving and loading it, and the
checks a resume makes before anything in the run folder is written or any update is taken.

A checkpoint is ``{"format": CHECKPOINT_FORMAT, "meta": {benchmark, cluster, runtime}, **Trainer.state()}``,
written atomically with ``torch.save`` and read with ``weights_only=True`` (tensors and plain data only, so a
crafted file runs no code). A resume is refused with a :class:`CheckpointMismatchError` naming the file when
the checkpoint is unreadable or of another format or task (:func:`load_for_resume`), and with its subclass
:class:`CheckpointFieldError` naming the field, its value and what is accepted when a field has the wrong type
or range for this run (:func:`checkpoint_config`, :func:`check_state`) or the stored best placement does not
re-evaluate to its recorded runtime (:func:`check_best`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, NoReturn

import numpy as np
import torch

from agents.common.checkpoint import NO_CODE_RUN, load_plain, save_plain
from placement_env import (CheckpointFieldError, CheckpointMismatchError, InfrastructureError, InvalidPlacementError,
                           Problem, check_placement)

from .config import Config, field_error, is_finite_number, is_integer
from .trainer import LOG_COLUMNS, EvaluateBatch, Trainer

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 3  # 2: dot-product attention, elites; 3: local moves
CHECKPOINT_EVERY = 25  # updates
ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")  # the optimiser's state per parameter (Adam without amsgrad)
# how far (relative) the stored best placement's runtime may be from a re-evaluation of it: the simulator and
# grappler's estimate give the same runtime again; measured step times vary from one measurement to the next
BEST_TOLERANCE = {"sim": 1e-6, "grappler": 1e-6, "measured": 0.5}
UNCHANGED = "(nothing was changed)"


def save_checkpoint(path: Path, trainer: Trainer, meta: dict[str, str]) -> None:
    """Write ``trainer``'s state for the task ``meta`` to ``path``."""
    save_plain(path, {"format": CHECKPOINT_FORMAT, "meta": meta, **trainer.state()})


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path``, as saved (tensors on the CPU).

    Loaded with ``weights_only=True``: a checkpoint holds tensors and plain data only, so a crafted
    file cannot run code when it is read. Anything unreadable (empty, truncated, not a checkpoint,
    or asking for other objects) is a CheckpointMismatchError that names the file."""
    state = load_plain(path, lambda why: f"resume: {path} is not a readable checkpoint ({why}); {NO_CODE_RUN}; use "
                                          f"another --out-dir to start afresh {UNCHANGED}")
    if not isinstance(state, dict):
        raise CheckpointMismatchError(f"resume: {path} holds a {type(state).__name__}, not a checkpoint {UNCHANGED}")
    return state


def load_for_resume(path: Path, meta: dict[str, str]) -> dict[str, Any]:
    """The checkpoint at ``path`` if a run on the task ``meta`` may continue from it.

    FileNotFoundError if there is none; CheckpointMismatchError if it has another format or belongs to
    another benchmark, cluster or runtime."""
    if not path.exists():
        raise FileNotFoundError(f"resume: no checkpoint at {path}")
    state = load_checkpoint(path)
    found = state.get("format")
    if not (is_integer(found) and found == CHECKPOINT_FORMAT):
        raise CheckpointMismatchError(
            f"resume: {path} has checkpoint format {_describe(found)}, this version reads format "
            f"{CHECKPOINT_FORMAT}; use another --out-dir to start afresh {UNCHANGED}")
    theirs = state.get("meta")
    if not (isinstance(theirs, dict) and set(theirs) == set(meta)
            and all(isinstance(theirs[key], str) and theirs[key] == value for key, value in meta.items())):
        task = (" ".join(f"{key}={_describe(theirs.get(key))}" for key in meta) if isinstance(theirs, dict)
                else f"meta={_describe(theirs)}")
        raise CheckpointMismatchError(
            f"resume: {path} belongs to {task}, not " + " ".join(f"{key}={value!r}" for key, value in meta.items())
            + f"; use another --out-dir or the matching flags {UNCHANGED}")
    return state


def _describe(value: Any) -> str:
    """``value`` in an error message: a tensor by its dtype and shape, anything else by its repr, cut short."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    if isinstance(value, Mapping):
        keys = list(value)
        if not keys:
            return f"an empty {type(value).__name__}"
        return (f"a {type(value).__name__} with the keys {', '.join(_describe(key) for key in keys[:4])}"
                + (f" and {len(keys) - 4} more" if len(keys) > 4 else ""))
    text = " ".join(repr(value).split())  # one line
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(path: Path, field: str, shown: str, accepted: str) -> NoReturn:
    raise CheckpointFieldError(f"resume: {path} has {field}={shown}; expected {accepted} {UNCHANGED}", field=field)


def _expect(ok: bool, path: Path, field: str, value: Any, accepted: str) -> None:
    """CheckpointFieldError naming ``field``, ``value`` and what is ``accepted`` unless ``ok``."""
    if not ok:
        _refuse(path, field, _describe(value), accepted)


def checkpoint_config(state: dict[str, Any], path: Path) -> Config:
    """The checkpoint's Config, each field checked as the command line checks its flag."""
    fields = state.get("config")
    names = [name for name in Config.__dataclass_fields__]
    _expect(isinstance(fields, dict) and set(fields) == set(names), path, "config", fields,
            f"a dict of the Config fields {', '.join(names)}")
    for name in names:
        accepted = field_error(name, fields[name])
        _expect(accepted is None, path, f"config.{name}", fields[name], accepted or "")
    return Config(**fields)


def _check_tensors(path: Path, field: str, value: Any, reference: Mapping[str, torch.Tensor], whose: str) -> None:
    """``value`` a dict of finite tensors with ``reference``'s names, dtypes and shapes."""
    accepted = f"the state dict of {whose} ({len(reference)} tensors)"
    _expect(isinstance(value, Mapping), path, field, value, accepted)
    missing, unknown = [name for name in reference if name not in value], [k for k in value if k not in reference]
    if missing or unknown:
        _refuse(path, field, "a state dict " + " and ".join(
            ([f"without {', '.join(map(repr, missing))}"] if missing else [])
            + ([f"with the unknown {', '.join(_describe(k) for k in unknown)}"] if unknown else [])), accepted)
    for name, expected in reference.items():
        tensor = value[name]
        _expect(isinstance(tensor, torch.Tensor) and tensor.dtype == expected.dtype
                and tensor.shape == expected.shape, path, f"{field}[{name!r}]", tensor,
                f"{_describe(expected)}, as in {whose}")
        _expect(not tensor.is_floating_point() or bool(torch.isfinite(tensor).all()), path, f"{field}[{name!r}]",
                "a tensor holding inf or NaN", "finite values")


def _check_optimizer(path: Path, value: Any, parameters: list[torch.Tensor], updates: int) -> None:
    """The optimiser's per-parameter state: Adam's step count and finite moments of each parameter's shape.
    (Its hyper-parameters are not read: the trainer takes them from the config.)"""
    _expect(isinstance(value, Mapping) and isinstance(value.get("state"), Mapping), path, "optimizer", value,
            "an optimizer state dict (with 'state' and 'param_groups')")
    for index, entry in value["state"].items():
        field = f"optimizer.state[{index!r}]"
        _expect(is_integer(index) and 0 <= index < len(parameters), path, "optimizer.state", index,
                f"parameter indices 0..{len(parameters) - 1}")
        _expect(isinstance(entry, Mapping) and set(entry) == set(ADAM_STATE), path, field, entry,
                f"Adam's state of a parameter ({', '.join(ADAM_STATE)})")
        moments = {name: entry[name] for name in ADAM_STATE if name != "step"}
        shapes = {name: parameters[index].detach() for name in moments}
        _check_tensors(path, field, moments, shapes, f"parameter {index} of the model")
        _expect(bool((entry["exp_avg_sq"] >= 0).all()), path, f"{field}['exp_avg_sq']", "a tensor with negatives",
                "values >= 0")
        step = entry["step"]
        _expect(isinstance(step, torch.Tensor) and step.dim() == 0 and step.is_floating_point()
                and float(step).is_integer() and 0 <= float(step) <= updates, path, f"{field}['step']", step,
                f"a whole number from 0 to {updates} (the checkpoint's updates)")


def _check_placement(path: Path, field: str, value: Any, problem: Problem) -> None:
    """``value`` a list of device indices that is a valid placement for the problem's graph and cluster, each
    group on a device its ops have kernels for."""
    graph, cluster = problem.graph, problem.cluster
    what = f"a list of {graph.n_groups} device indices for {graph.name!r} on {cluster.name!r}"
    _expect(isinstance(value, list) and all(is_integer(device) for device in value), path, field, value, what)
    try:
        placement = check_placement(graph, cluster, value)
    except InvalidPlacementError as error:
        _refuse(path, field, _describe(value), f"{what} ({error})")
    kernel_less = np.flatnonzero(~problem.allowed[np.arange(graph.n_groups), placement])
    if kernel_less.size:
        group = int(kernel_less[0])
        _refuse(path, field, _describe(value), f"{what}, each group on a device its ops have kernels for (group "
                f"{group} is on device {int(placement[group])}, which has none)")


def _check_history(path: Path, rows: Any, updates: int) -> None:
    """The log rows of the updates so far: 1, 2, ... with increasing evaluation counts, wall times that do not
    go back, and finite numbers (the mean runtime of the successful samples is NaN in an update without one;
    the best is inf before the first)."""
    _expect(isinstance(rows, list) and len(rows) in (updates - 1, updates), path, "history", rows,
            f"a list of the log rows of the {updates} updates")
    evaluations, wall_s = 0, 0.0
    for i, row in enumerate(rows):
        field = f"history[{i}]"
        _expect(isinstance(row, dict) and set(row) == set(LOG_COLUMNS), path, field, row,
                f"a log row with the keys {', '.join(LOG_COLUMNS)}")
        _expect(is_integer(row["update"]) and row["update"] == i + 1, path, f"{field}.update", row["update"],
                f"{i + 1}")
        _expect(is_integer(row["evaluations"]) and row["evaluations"] > evaluations, path, f"{field}.evaluations",
                row["evaluations"], f"an integer > {evaluations} (the row before's)")
        _expect(is_finite_number(row["wall_s"]) and row["wall_s"] >= wall_s, path, f"{field}.wall_s", row["wall_s"],
                f"a finite number >= {wall_s!r} (the row before's)")
        evaluations, wall_s = row["evaluations"], row["wall_s"]
        for key in (key for key in LOG_COLUMNS if key not in ("update", "evaluations", "wall_s")):
            value = row[key]
            ok = is_finite_number(value) or (
                key == "mean_ok_runtime_s" and isinstance(value, float) and math.isnan(value)) or (
                key == "best_runtime_s" and isinstance(value, float) and value == math.inf)
            _expect(ok, path, f"{field}.{key}", value, "a finite number" + {
                "mean_ok_runtime_s": " or NaN (no successful sample)",
                "best_runtime_s": " or inf (no successful sample yet)"}.get(key, ""))


def _is_generator_state(value: Any, reference: torch.Tensor) -> bool:
    """Whether ``value`` is a state a CPU random generator takes (tried on a scratch one)."""
    if not (isinstance(value, torch.Tensor) and value.dtype == reference.dtype and value.shape == reference.shape):
        return False
    try:
        torch.Generator().set_state(value)
    except RuntimeError:
        return False
    return True


def check_state(state: dict[str, Any], path: Path, config: Config, features: np.ndarray, problem: Problem,
                budget: int | None) -> None:
    """CheckpointFieldError for the first field of ``state`` that a trainer with the checkpoint's ``config`` on
    ``problem`` (whose policy input is ``features``) could not continue from: of the wrong type, shape or range
    for this model, graph, cluster and evaluation ``budget``, or inconsistent with the other fields."""
    with torch.device("meta"):  # the model's shapes and dtypes without its memory, whatever hidden size is asked
        trainer = Trainer(features, problem.allowed, config)
    reference = trainer.state()
    for name in reference:
        if name not in state:
            _refuse(path, name, "nothing", "a value, as every field of Trainer.state()")
    _check_tensors(path, "policy", state["policy"], reference["policy"],
                   f"the model of hidden size {trainer.config.hidden} for {problem.graph.name!r} on "
                   f"{problem.cluster.name!r}")
    for name in ("torch_rng", "generator"):
        _expect(_is_generator_state(state[name], reference[name]), path, name, state[name],
                f"{_describe(reference[name])} that is a torch random generator's state")
    updates = state["updates"]
    _expect(is_integer(updates) and updates >= 0, path, "updates", updates, "an integer >= 0")
    _check_optimizer(path, state["optimizer"], list(trainer.policy.parameters()), updates)
    _check_history(path, state["history"], updates)
    evaluations, history = state["evaluations"], state["history"]
    least = history[-1]["evaluations"] if history else 0
    _expect(is_integer(evaluations) and least <= evaluations <= (math.inf if budget is None else budget), path,
            "evaluations", evaluations, f"an integer from {least} (the history's last count)"
            + (f" to {budget} (the budget)" if budget is not None else ""))
    wall_s, baseline, spread = state["wall_s"], state["baseline"], state["spread"]
    least_s = history[-1]["wall_s"] if history else 0.0
    _expect(is_finite_number(wall_s) and wall_s >= least_s, path, "wall_s", wall_s,
            f"a finite number >= {least_s!r} (the history's last)")
    _expect(baseline is None or is_finite_number(baseline), path, "baseline", baseline, "None or a finite number")
    _expect(spread is None or (is_finite_number(spread) and spread >= 0), path, "spread", spread,
            "None or a finite number >= 0")
    best, best_s = state["best_placement"], state["best_runtime_s"]
    if best is None:
        _expect(isinstance(best_s, float) and best_s == math.inf, path, "best_runtime_s", best_s,
                "inf, as there is no best_placement")
    else:
        _check_placement(path, "best_placement", best, problem)
        _expect(is_finite_number(best_s) and best_s > 0, path, "best_runtime_s", best_s, "a finite number > 0")
    elites = state["elites"]
    _expect(isinstance(elites, list) and len(elites) <= (trainer.config.elites if best is not None else 0), path,
            "elites", elites, f"a list of at most {trainer.config.elites} (runtime, placement) pairs, none before "
            "there is a best_placement")
    previous = best_s
    for i, elite in enumerate(elites):
        _expect(isinstance(elite, (tuple, list)) and len(elite) == 2, path, f"elites[{i}]", elite,
                "a (runtime, placement) pair")
        runtime_s, placement = elite
        _expect(is_finite_number(runtime_s) and runtime_s >= previous, path, f"elites[{i}] runtime", runtime_s,
                f"a finite number >= {previous!r} (the elites are the fastest, fastest first, none below "
                "best_runtime_s)")
        previous = runtime_s
        _check_placement(path, f"elites[{i}] placement", placement, problem)
    if state["moved_from"] is not None:
        _check_placement(path, "moved_from", state["moved_from"], problem)
    tried, size = state["tried"], 8 * problem.graph.n_groups
    _expect(isinstance(tried, list) and all(isinstance(row, bytes) and len(row) == size for row in tried), path,
            "tried", tried, f"a list of placements as bytes ({size} each: {problem.graph.n_groups} int64 devices)")


def check_best(trainer: Trainer, path: Path, evaluate_batch: EvaluateBatch, runtime: str) -> None:
    """CheckpointFieldError naming both runtimes unless the loaded best placement re-evaluates (one evaluation,
    not counted) to its recorded runtime within ``BEST_TOLERANCE[runtime]`` (relative); InfrastructureError if the
    re-evaluation itself broke down."""
    if trainer.best_placement is None:
        return
    (measurement,) = evaluate_batch(trainer.best_placement[None])
    if measurement.infrastructure_failure:
        raise InfrastructureError(f"resume: re-evaluating the best placement of {path} failed: "
                                  f"{measurement.message}; try again {UNCHANGED}", measurement)
    recorded, tolerance = trainer.best_runtime_s, BEST_TOLERANCE[runtime]
    if not (measurement.ok and abs(measurement.runtime_s - recorded) <= tolerance * recorded):
        now = f"{measurement.runtime_s!r} s" if measurement.ok else f"a failure ({measurement.failure})"
        _refuse(path, "best_runtime_s", repr(recorded),
                f"the runtime its best_placement re-evaluates to on the {runtime} runtime, {now}, within "
                f"{tolerance:g} of it (relative)")


def adopt_written_best(trainer: Trainer, path: Path, problem: Problem, evaluate_batch: EvaluateBatch,
                       runtime: str) -> bool:
    """Take the best placement of ``best_placement.json`` at ``path`` into ``trainer`` when it is better than the
    checkpoint's (a run killed between checkpoints wrote it last) and re-evaluates (one evaluation, not counted)
    to its recorded runtime within ``BEST_TOLERANCE[runtime]``; True if taken. A file that is missing, unreadable,
    no better, or does not re-evaluate to its runtime is left to be replaced by the checkpoint's best."""
    try:
        record = json.loads(path.read_text())
        placement = check_placement(problem.graph, problem.cluster, record["placement"])
        recorded = record["runtime_s"]
    except (OSError, ValueError, KeyError, TypeError):  # ValueError: bad JSON or an invalid placement
        return False
    if not (is_finite_number(recorded) and 0 < recorded < trainer.best_runtime_s):
        return False
    (measurement,) = evaluate_batch(placement[None])
    if not (measurement.ok and abs(measurement.runtime_s - recorded) <= BEST_TOLERANCE[runtime] * recorded):
        return False
    trainer.best_runtime_s, trainer.best_placement = float(recorded), np.array(placement)
    return True
