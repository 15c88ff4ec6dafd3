"""Training on a benchmark: :func:`train` builds the task through the public API (``Problem.make`` on
``load_benchmark`` / ``load_cluster``), trains a :class:`Trainer` for an evaluation or wall budget with
:func:`run_updates`, and keeps the run folder up to date (:class:`RunRecorder`): ``log.csv`` and the same
scalars under ``tensorboard/``, ``checkpoint.pt``, ``best_placement.json`` and ``learning_curve.png``.
``resume=True`` continues from ``out_dir/checkpoint.pt``.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from agents.common.report import plot_curve
from agents.common.run_files import BEST_JSON, CURVE, LOG, TENSORBOARD, TensorBoardLog, run_dir, write_json, write_log
from agents.common.torch_threads import keeps_caller_float_mode
from placement_env import Cluster, Evaluator, Problem, load_benchmark, load_cluster

from .checkpoint import (CHECKPOINT, CHECKPOINT_EVERY, adopt_written_best, check_best, check_state, checkpoint_config,
                         load_for_resume, save_checkpoint)
from .config import Config, is_integer
from .policy import problem_features
from .trainer import LOG_COLUMNS, EvaluateBatch, Trainer, batch_function
from .warm_start import warm_start

DEFAULT_MINUTES = 10.0


@dataclass
class TrainResult:
    """What :func:`train` gives back: the best placement, the record of the run and the trained policy."""

    best_placement: np.ndarray | None
    best_runtime_s: float
    history: list[dict[str, float]]
    evaluations: int
    wall_s: float  # over all sessions of a resumed run
    updates: int = 0
    lower_bound_s: float = float("nan")
    out_dir: Path | None = None
    trainer: Trainer | None = None  # the trained policy, e.g. to sample more placements


def default_out_dir(benchmark: str, cluster: str, runtime: str) -> Path:
    """``runs/reinforce_seq2seq/<benchmark>-<cluster>-<runtime>``."""
    return run_dir("reinforce_seq2seq", benchmark, cluster, runtime)


def run_updates(trainer: Trainer, evaluate_batch: EvaluateBatch, *, budget: int | None, seconds: float | None,
                progress: bool, on_update: Callable[[dict[str, float]], None] | None = None, desc: str = "") -> None:
    """Update until the evaluation budget (total, over resumed sessions) or the session's seconds run out."""
    from tqdm import tqdm

    start = time.monotonic()
    wall0 = trainer.wall_s
    total = budget if budget is not None else (int(seconds) if seconds is not None else None)
    bar = tqdm(total=total, initial=min(trainer.evaluations, budget) if budget is not None else 0, desc=desc,
               unit="eval" if budget is not None else "s", disable=not progress, leave=True)
    try:
        while True:
            elapsed = time.monotonic() - start
            if seconds is not None and elapsed >= seconds:
                break
            k = trainer.config.samples
            if budget is not None:
                k = min(k, budget - trainer.evaluations)
                if k < 1:
                    break
            row = trainer.update(evaluate_batch, samples=k)
            now = time.monotonic() - start
            trainer.wall_s = wall0 + now
            row["wall_s"] = trainer.wall_s
            trainer.history.append(row)
            if on_update is not None:
                on_update(row)
            bar.update(k if budget is not None else (int(now) - bar.n if seconds is not None else 0))
            bar.set_postfix_str(f"best {trainer.best_runtime_s:.4g}s mean {row['mean_runtime_s']:.4g}s "
                                f"ent {row['entropy']:.3f}")
    finally:
        trainer.wall_s = wall0 + (time.monotonic() - start)
        bar.close()


class RunRecorder:
    """The run folder while a :class:`Trainer` trains: a log row (CSV and TensorBoard) per update, a checkpoint
    and ``best_placement.json`` every ``checkpoint_every`` updates, and all of them plus the learning curve on
    :meth:`close`. A resumed run's log restarts from the checkpoint's history (rows logged past it are dropped)."""

    def __init__(self, out: Path, trainer: Trainer, meta: dict[str, str], lower_bound_s: float, *, resumed: bool,
                 checkpoint_every: int) -> None:
        self.out, self.trainer, self.meta, self.lower_bound_s = out, trainer, meta, lower_bound_s
        self.checkpoint_every = checkpoint_every
        self.written_best_s = math.inf  # the runtime in best_placement.json
        if resumed:
            write_log(out / LOG, trainer.history, LOG_COLUMNS)
        self.board = TensorBoardLog(out / TENSORBOARD, trainer.history)
        self.handle = open(out / LOG, "a" if resumed else "w", newline="")
        self.writer = csv.DictWriter(self.handle, fieldnames=LOG_COLUMNS, extrasaction="ignore")
        if not resumed:
            self.writer.writeheader()

    def on_update(self, row: dict[str, float]) -> None:
        self.writer.writerow(row)
        self.handle.flush()
        self.board.write(row)
        if self.trainer.updates % self.checkpoint_every == 0:
            self.checkpoint()
        elif self.trainer.best_runtime_s < self.written_best_s:  # a SIGKILL loses no best placement
            self.write_best()

    def checkpoint(self, final: bool = False) -> None:
        """The checkpoint and ``best_placement.json``; ``final``: also the whole log, rewritten."""
        trainer, meta = self.trainer, self.meta
        save_checkpoint(self.out / CHECKPOINT, trainer, meta)
        if final:  # while training, rows are appended to the open log instead
            write_log(self.out / LOG, trainer.history, LOG_COLUMNS)
        self.write_best()

    def write_best(self) -> None:
        """``best_placement.json``, written atomically (a reader never sees half a file)."""
        trainer = self.trainer
        if trainer.best_placement is not None:
            record = {**self.meta, "placement": trainer.best_placement.tolist(), "runtime_s": trainer.best_runtime_s,
                      "lower_bound_s": self.lower_bound_s, "evaluations": trainer.evaluations,
                      "updates": trainer.updates}
            write_json(self.out / BEST_JSON, record)
            self.written_best_s = trainer.best_runtime_s

    def close(self) -> None:
        """Close the logs, write the final checkpoint and the learning curve (also after an interrupt)."""
        self.handle.close()
        self.board.close()
        self.checkpoint(final=True)
        meta = self.meta
        plot_curve(self.out / CURVE, self.trainer.history,
                   title=f"{meta['benchmark']} on {meta['cluster']} ({meta['runtime']})",
                   references={"lower bound": self.lower_bound_s})


def _check_arguments(budget: Any, samples: Any, checkpoint_every: Any, seconds: Any) -> None:
    for name, value, may_be_none in (("budget", budget, True), ("samples", samples, False),
                                     ("checkpoint_every", checkpoint_every, False)):
        if not (value is None and may_be_none) and (not is_integer(value) or value < 1):
            raise ValueError(f"{name}={value!r}; expected a positive integer")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or seconds <= 0):
        raise ValueError(f"seconds={seconds!r}; expected a positive number of seconds")


def _trainer(problem: Problem, state: dict[str, Any] | None, checkpoint: Path, config: Config, seed: int,
             budget: int | None) -> Trainer:
    """A new trainer on ``problem``, or one continuing from ``state`` (a checkpoint of a run on the same task,
    whose config it keeps) once every field of it is checked (CheckpointFieldError)."""
    features, allowed = problem_features(problem), problem.allowed
    if state is None:
        return Trainer(features, allowed, config, seed=seed)
    config = checkpoint_config(state, checkpoint)
    check_state(state, checkpoint, config, features, problem, budget)
    trainer = Trainer(features, allowed, config, seed=seed)
    trainer.load(state)
    return trainer


@keeps_caller_float_mode
def train(benchmark: str = "nmt", cluster: str | Cluster = "k80-2gpu", runtime: str = "sim", *,
          budget: int | None = None, seconds: float | None = None, samples: int = 16, seed: int = 0,
          out_dir: str | os.PathLike | None = None, resume: bool = False, evaluator: Any = None,
          progress: bool = True, config: Config | None = None, checkpoint_every: int = CHECKPOINT_EVERY,
          measured_options: dict[str, Any] | None = None) -> TrainResult:
    """Train the seq2seq policy on ``benchmark`` / ``cluster`` / ``runtime`` with REINFORCE.

    ``budget``: total runtime evaluations (a resumed run counts those already spent); ``seconds``:
    wall time of this session; with neither, 10 minutes. ``out_dir`` (default
    ``runs/reinforce_seq2seq/<benchmark>-<cluster>-<runtime>``) gets the log, checkpoints (every
    ``checkpoint_every`` updates, at the end, and on KeyboardInterrupt), the best placement and the
    learning curve. ``resume``: continue from ``out_dir/checkpoint.pt`` (which must belong to the
    same benchmark, cluster and runtime; its config is kept); every field of it is checked, and its best
    placement re-evaluated, before anything in ``out_dir`` is written (a CheckpointMismatchError refuses
    it). ``evaluator``: anything with ``.batch(placements [K, n]) -> list[Measurement]`` or such a callable (e.g. a
    ``placement_env.ParallelEvaluator``); by default the problem's own evaluator, which gets
    ``measured_options`` (e.g. ``{"timeout_s": 60}``) with ``runtime="measured"``.
    """
    _check_arguments(budget, samples, checkpoint_every, seconds)
    if budget is None and seconds is None:
        seconds = DEFAULT_MINUTES * 60
    cluster_name = cluster if isinstance(cluster, str) else getattr(cluster, "name", str(cluster))
    meta = {"benchmark": str(benchmark), "cluster": str(cluster_name), "runtime": str(runtime)}
    out = Path(out_dir) if out_dir is not None else default_out_dir(*meta.values())
    state = load_for_resume(out / CHECKPOINT, meta) if resume else None
    graph, cluster_spec = load_benchmark(benchmark), load_cluster(cluster)
    problem = Problem.make(graph, cluster_spec, seed=seed,
                           evaluator=Evaluator(graph, cluster_spec, runtime, measured_options=measured_options))
    try:
        trainer = _trainer(problem, state, out / CHECKPOINT,
                           dataclasses.replace(config or Config(), samples=int(samples)), seed, budget)
        evaluate_batch = batch_function(evaluator) if evaluator is not None else problem.evaluator.batch
        if state is not None:
            check_best(trainer, out / CHECKPOINT, evaluate_batch, meta["runtime"])
            adopt_written_best(trainer, out / BEST_JSON, problem, evaluate_batch, meta["runtime"])
        elif trainer.config.warm_start:
            start = warm_start(trainer, problem, evaluate_batch)
            if progress:
                print(f"warm start: {start['method']} ({start['runtime_s']:.4g} s), imitated in "
                      f"{start['imitation_steps']} steps", file=sys.stderr)
        out.mkdir(parents=True, exist_ok=True)
        lower = float(problem.lower_bound())
        recorder = RunRecorder(out, trainer, meta, lower, resumed=state is not None,
                               checkpoint_every=checkpoint_every)
        try:
            run_updates(trainer, evaluate_batch, budget=budget, seconds=seconds, progress=progress,
                        on_update=recorder.on_update, desc=f"reinforce {meta['benchmark']}")
        finally:  # also on KeyboardInterrupt: keep what was learnt
            recorder.close()
        return TrainResult(best_placement=trainer.best_placement, best_runtime_s=trainer.best_runtime_s,
                           history=trainer.history, evaluations=trainer.evaluations, wall_s=trainer.wall_s,
                           updates=trainer.updates, lower_bound_s=lower, out_dir=out, trainer=trainer)
    finally:
        problem.evaluator.close()
