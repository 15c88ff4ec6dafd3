"""CP-SAT in a fresh Python process: ``solve_isolated`` (parent side) and ``python -m placement_env.exact.isolated
IN OUT`` (the child).

TensorFlow's native libraries and OR-Tools' clash in one process (CP-SAT crashes with a segmentation fault once
TensorFlow is imported, whichever model it solves), and this package imports TensorFlow to build and cost graphs.
So the solver runs in a child that never imports it: the parent writes the relaxed model to a file, the child
solves it and writes the result back. A child that crashes or overruns its time leaves the parent usable: the
parent raises a SolverError that says what happened.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..cluster import Cluster
from ..errors import SolverError
from .cp_sat import ExactResult, model_symmetries, solve_relaxed
from .relaxation import RelaxedModel

__all__ = ["solve_isolated"]

CHILD_MODULE = "placement_env.exact.isolated"  # what the child runs (python -m)
STARTUP_ALLOWANCE_S = 120.0  # past the solver's time limit: the child's start, the model's build, the result's write


def _write_model(path: Path, model: RelaxedModel, symmetries: np.ndarray, options: dict) -> None:
    arrays = {f"model_{f.name}": np.asarray(getattr(model, f.name)) for f in dataclasses.fields(model)}
    extras = {key: np.asarray(value) for key, value in options.items() if value is not None}
    np.savez(path, symmetries=symmetries, **arrays, **{f"option_{k}": v for k, v in extras.items()})


def _read_model(path: Path) -> tuple[RelaxedModel, np.ndarray, dict]:
    with np.load(path) as data:
        fields = {f.name: data[f"model_{f.name}"] for f in dataclasses.fields(RelaxedModel)}
        fields["tick_s"], fields["n_groups"] = float(fields["tick_s"]), int(fields["n_groups"])
        options = {key[len("option_"):]: data[key] for key in data.files if key.startswith("option_")}
        return RelaxedModel(**fields), data["symmetries"], options


def _write_result(path: Path, result: ExactResult) -> None:
    n = 0 if result.placement is None else len(result.placement)
    solutions = np.array(result.solutions, np.int64).reshape(len(result.solutions), n)
    np.savez(path, placement=np.zeros(0, np.int64) if result.placement is None else result.placement,
             has_placement=result.placement is not None, makespan_s=result.makespan_s, bound_s=result.bound_s,
             status=result.status, solver_s=result.solver_s, solutions=solutions)


def _read_result(path: Path) -> ExactResult:
    with np.load(path) as data:
        return ExactResult(placement=data["placement"].copy() if bool(data["has_placement"]) else None,
                           makespan_s=float(data["makespan_s"]), bound_s=float(data["bound_s"]),
                           status=str(data["status"]), solver_s=float(data["solver_s"]),
                           solutions=tuple(row.copy() for row in data["solutions"]))


def solve_isolated(model: RelaxedModel, cluster: Cluster, *, time_limit_s: float, horizon_ticks: int | None = None,
                   hint: np.ndarray | None = None, hint_starts: np.ndarray | None = None, workers: int = 1,
                   log: bool = False) -> ExactResult:
    """:func:`~placement_env.exact.cp_sat.solve_relaxed` of ``model`` (on ``cluster``) in a child process; a
    SolverError if the child crashes, overruns ``time_limit_s`` by ``STARTUP_ALLOWANCE_S`` or writes no result."""
    options = {"time_limit_s": float(time_limit_s), "horizon_ticks": horizon_ticks, "hint": hint,
               "hint_starts": hint_starts, "workers": int(workers), "log": bool(log)}
    with tempfile.TemporaryDirectory(prefix="placement_env_cp_sat_") as folder:
        model_path, result_path = Path(folder) / "model.npz", Path(folder) / "result.npz"
        _write_model(model_path, model, model_symmetries(cluster, model), options)
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
            str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))}
        try:
            done = subprocess.run([sys.executable, "-m", CHILD_MODULE, str(model_path),
                                   str(result_path)], env=environment, stdout=None if log else subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=time_limit_s + STARTUP_ALLOWANCE_S, check=False)
        except subprocess.TimeoutExpired:
            raise SolverError(f"the CP-SAT process ran past its time limit of {time_limit_s:g} s by more than "
                              f"{STARTUP_ALLOWANCE_S:g} s and was stopped") from None
        if done.returncode != 0 or not result_path.exists():
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise SolverError(f"the CP-SAT process exited with code {done.returncode} and no result"
                              + (": " + " | ".join(tail) if tail else ""))
        return _read_result(result_path)


def _main(model_path: str, result_path: str) -> None:
    model, symmetries, options = _read_model(Path(model_path))
    if "tensorflow" in sys.modules:  # pragma: no cover - a guard on this module's reason to exist
        raise RuntimeError("TensorFlow is imported in the CP-SAT process; the solver would crash")
    hint = options.get("hint")
    horizon = options.get("horizon_ticks")
    result = solve_relaxed(model, symmetries, time_limit_s=float(options["time_limit_s"]),
                           horizon_ticks=None if horizon is None else int(horizon),
                           hint=None if hint is None else hint.astype(np.int64), hint_starts=options.get("hint_starts"),
                           workers=int(options["workers"]), log=bool(options["log"]))
    _write_result(Path(result_path), result)


if __name__ == "__main__":
    _main(*sys.argv[1:3])
