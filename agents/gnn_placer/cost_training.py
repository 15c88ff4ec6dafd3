"""Training the cost model (:mod:`.cost_model`) on a suite's tasks, with its run folder: ``placements/<task>.npz``
(each task's :class:`.cost_data.Dataset`), ``log.csv``, ``learning_curve.png`` and ``cost_model.pt`` (written
every ``SAVE_EVERY`` steps and at the end).

Each task's data (:func:`.cost_data.task_dataset`, made with the placer checkpoint's network and memory margin)
is split at random: ``HELD_OUT`` of its placements that ran (at most ``HELD_OUT_MAX``) are kept out of training
and only measured. Each
step takes ``batch`` placements that ran of one task drawn at random and one Adam step on the squared error of
the predicted log(runtime / lower bound), plus ``RANKING_WEIGHT`` times the squared error of the predictions'
deviations from their batch mean against the targets' (what decides which of two placements of one graph is
faster, the refinement's question). Every ``LOG_EVERY`` steps the log gets the mean loss and, on the held-out
placements, the Spearman rank correlation of prediction and runtime and the mean absolute error in log units,
averaged over the tasks. Training stops after ``steps`` steps or after the step in hand when ``stop`` is set (the
command line sets it on Ctrl-C and SIGTERM), with everything written.

:func:`fit` is the training alone, on any tasks' splits: ``python -m experiments.cost_model_holdout`` trains on
subsets of a run folder's measured placements (:func:`load_dataset`) to choose the train graphs on train tasks.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from scipy.stats import spearmanr
from tqdm import tqdm

from agents.common.run_files import CURVE, LOG, write_log
from placement_env.harness import GENERALISATION_TRAIN, k80_tasks

from .checkpoint import COST_MODEL, checkpoint_path, load_network, save_cost_model
from .cost_data import Dataset, task_dataset
from .cost_model import CostInput, CostNet, cost_input
from .curve import plot_cost_training
from .harness import memory_margin
from .trainer import Trainer
from .training import suite_tasks


def random_cnns(count: int) -> tuple[tuple[str, str], ...]:
    """(label, benchmark) of the random CNNs of seeds 0 .. count - 1 (batch 256)."""
    return tuple((f"Random CNN {seed}", f"random_cnn:{seed}") for seed in range(count))


# What the committed cost model learned from: the placer's train split plus eight random CNNs (seeds 0-7, batch
# 256: single-GPU peak over two K80 dies 0.54-0.78), a family drawn at random, each a mix of plain, residual and
# branched units in its own proportions; no test family.
COST_MODEL_SUITE = k80_tasks((*GENERALISATION_TRAIN, *random_cnns(8)))
DEFAULT_SUITE = "agents.gnn_placer.cost_training:COST_MODEL_SUITE"  # --suite of train_cost_model, for load_suite
HELD_OUT = 0.1
HELD_OUT_MAX = 500
RANKING_WEIGHT = 4.0
LOG_EVERY = 500
SAVE_EVERY = 1000
COLUMNS = ("step", "seconds", "loss", "held_out_spearman", "held_out_error")


@dataclass(frozen=True)
class Split:
    """One task's training and held-out placements (those that ran) and their targets, log(runtime / lower bound)."""

    name: str
    inputs: CostInput
    train: tuple[torch.Tensor, torch.Tensor]
    held_out: tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class CostTrainingResult:
    out_dir: Path
    steps: int
    evaluations: int
    seconds: float
    held_out: dict[str, tuple[float, float]]  # per task: Spearman and mean absolute error (log units)


def split(name: str, inputs: CostInput, data: Dataset, rng: np.random.Generator) -> Split:
    """``data``'s placements that ran, ``HELD_OUT`` of them (at most ``HELD_OUT_MAX``) at random held out."""
    placements = torch.from_numpy(data.placements[data.ok].astype(np.int64))
    targets = torch.from_numpy(np.log(data.runtime_s[data.ok] / inputs.lower_bound).astype(np.float32))
    order = torch.from_numpy(rng.permutation(len(placements)))
    k = min(int(len(placements) * HELD_OUT), HELD_OUT_MAX)
    return Split(name, inputs, (placements[order[k:]], targets[order[k:]]), (placements[order[:k]], targets[order[:k]]))


def loss(net: CostNet, inputs: CostInput, placements: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Squared error plus ``RANKING_WEIGHT`` x squared error of the deviations from the batch means."""
    predicted = net(inputs, placements)
    centred = (predicted - predicted.mean()) - (targets - targets.mean())
    return ((predicted - targets) ** 2).mean() + RANKING_WEIGHT * (centred ** 2).mean()


def held_out_scores(net: CostNet, splits: Sequence[Split]) -> dict[str, tuple[float, float]]:
    """Per task: Spearman's rank correlation of predictions and targets on its held-out placements, and the mean
    absolute error."""
    out = {}
    for s in splits:
        placements, targets = s.held_out
        predicted = net.predict(s.inputs, placements.numpy())
        truth = targets.numpy().astype(np.float64)
        out[s.name] = (float(spearmanr(predicted, truth)[0]), float(np.abs(predicted - truth).mean()))
    return out


def train_cost_model(out_dir: Path, *, suite: str, checkpoint: Path | None = None,
                     steps: int = 3000, batch: int = 64, lr: float = 1e-3, seed: int = 0, progress: bool = True,
                     stop: threading.Event | None = None) -> CostTrainingResult:
    """Make each task's data, train a fresh cost model on it, and write the run folder ``out_dir``."""
    out_dir = Path(out_dir)
    (out_dir / "placements").mkdir(parents=True, exist_ok=True)
    placer, config, placer_meta = load_network(checkpoint)
    margin = memory_margin(placer_meta, checkpoint)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    splits, evaluations = [], 0
    for task in tqdm(suite_tasks(suite), desc="measuring placements", unit="task", disable=not progress):
        data = task_dataset(task, Trainer(placer, config), margin, rng)
        save_dataset(out_dir / "placements" / f"{task.name}.npz", data)
        evaluations += task.problem.evaluations
        splits.append(split(task.name, cost_input(task.problem), data, rng))

    def meta(steps_taken: int) -> dict:
        return {"suite": suite, "tasks": [s.name for s in splits], "placer": str(checkpoint or checkpoint_path()),
                "steps": steps_taken, "evaluations": evaluations, "seed": seed, "batch": batch, "lr": lr}

    def save(net: CostNet, rows: list[dict[str, float]], steps_taken: int) -> None:
        write_cost_run(out_dir, net, rows, meta(steps_taken))

    net, rows, taken = fit(splits, rng, steps=steps, batch=batch, lr=lr, seed=seed, progress=progress, stop=stop,
                           save=save, clock_start=start)
    scores = held_out_scores(net, splits)
    save(net, rows, taken)
    return CostTrainingResult(out_dir, taken, evaluations, time.perf_counter() - start, scores)


def fit(splits: Sequence[Split], rng: np.random.Generator, *, steps: int, batch: int = 64, lr: float = 1e-3,
        seed: int = 0, progress: bool = True, stop: threading.Event | None = None,
        save: Callable[[CostNet, list[dict[str, float]], int], None] | None = None,
        clock_start: float | None = None, log_every: int = LOG_EVERY) -> tuple[CostNet, list[dict[str, float]], int]:
    """A fresh cost model (torch seed ``seed``) trained on ``splits`` (the module docstring's steps, drawing
    tasks and placements from ``rng``); its log rows (every ``log_every`` steps and at the last) and the steps
    taken. ``save(net, rows, steps)`` is called every ``SAVE_EVERY`` steps."""
    start = time.perf_counter() if clock_start is None else clock_start
    torch.manual_seed(seed)
    net = CostNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    rows: list[dict[str, float]] = []
    losses: list[float] = []
    stop = stop or threading.Event()
    step = 0
    with tqdm(total=steps, desc="cost model", unit="step", disable=not progress) as bar:
        while step < steps and not stop.is_set():
            s = splits[int(rng.integers(len(splits)))]
            placements, targets = s.train
            pick = torch.from_numpy(rng.integers(0, len(placements), batch))
            value = loss(net, s.inputs, placements[pick], targets[pick])
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            losses.append(float(value.detach()))
            step += 1
            bar.update(1)
            if step % log_every == 0 or step == steps:
                scores = held_out_scores(net, splits)
                rows.append({"step": step, "seconds": time.perf_counter() - start, "loss": float(np.mean(losses)),
                             "held_out_spearman": float(np.mean([v[0] for v in scores.values()])),
                             "held_out_error": float(np.mean([v[1] for v in scores.values()]))})
                losses.clear()
                bar.set_postfix_str(f"held-out Spearman {rows[-1]['held_out_spearman']:.3f}")
            if save is not None and step % SAVE_EVERY == 0:
                save(net, rows, step)
    return net, rows, step


def save_dataset(path: Path, data: Dataset) -> None:
    """A task's data as a run folder's ``placements/<task>.npz``."""
    np.savez_compressed(path, placements=data.placements, runtime_s=data.runtime_s, ok=data.ok)


def load_dataset(path: Path) -> Dataset:
    """A task's data from a run folder's ``placements/<task>.npz``."""
    with np.load(path) as f:
        return Dataset(f["placements"], f["runtime_s"], f["ok"])


def write_cost_run(out_dir: Path, net: CostNet, rows: list[dict[str, float]], meta: dict) -> None:
    """The cost model, the log and the curve of the run so far."""
    save_cost_model(out_dir / COST_MODEL, net, meta)
    write_log(out_dir / LOG, rows, COLUMNS)
    plot_cost_training(out_dir / CURVE, rows)
