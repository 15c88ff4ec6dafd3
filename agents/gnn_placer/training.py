"""Pre-training across the graphs of a suite (default ``generalisation-train``), with its run folder:
``log.csv`` (one row per update), ``learning_curve.png`` and ``checkpoint.pt`` (written every ``SAVE_EVERY``
updates and at the end).

First the network imitates every task's best zero-budget heuristic (:mod:`.imitation`, up to
``imitation_steps`` steps). Then each REINFORCE update draws ``graphs_per_update`` tasks of the suite at
random and takes one :class:`Trainer` step on them (self-imitating each task's best placement so far, which
starts as its best heuristic's).

Each checkpoint written also carries its network's memory margin (:func:`.memory_fit.train_margin`: the
largest simulated / estimated peak over five placements per train task, greedy and around it; 80
evaluations for 16 tasks, outside the training budget), which ``place_zero_shot`` keeps.

Every ``GREEDY_EVERY`` updates (and at the end) the greedy placement of every task is measured against that
task's best zero-budget heuristic (``ZERO_BUDGET_HEURISTICS``, measured once at the start): the log's
``greedy_ratio`` is the geometric mean over tasks of min(greedy runtime / heuristic, ``RATIO_CAP``), a failed
placement counting ``RATIO_CAP``. Training stops at ``minutes`` of wall time or ``budget`` evaluations,
whichever comes first, or after the update in hand when ``stop`` is set (the command line sets it on Ctrl-C
and SIGTERM), with the checkpoint, log and curve written.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from agents.common.run_files import CURVE, LOG, write_log
from placement_env import Evaluator, Problem, ZERO_BUDGET_HEURISTICS, load_benchmark, load_cluster, solve
from placement_env.harness import load_suite

from .checkpoint import CHECKPOINT, load_network, save_checkpoint
from .curve import plot_training
from .imitation import imitate
from .memory_fit import ESTIMATE, train_margin
from .task import PlacementTask, make_task
from .trainer import Config, GraphStats, Trainer

GREEDY_EVERY = 25  # updates
SAVE_EVERY = 200  # updates
RATIO_CAP = 10.0
COLUMNS = ("update", "evaluations", "seconds", "mean_reward", "success_rate", "entropy", "greedy_ratio",
           "greedy_ok")


@dataclass(frozen=True)
class PretrainResult:
    out_dir: Path
    updates: int
    evaluations: int
    seconds: float
    greedy: dict[str, float]  # per task: greedy runtime / best heuristic (inf: failed)
    heuristics: dict[str, Reference]  # per task: its best zero-budget heuristic
    imitation: tuple[int, float]  # steps of the warm start and the lowest per-task accuracy reached


@dataclass(frozen=True)
class Reference:
    """A task's best zero-budget heuristic: its name, runtime and placement."""

    method: str
    runtime_s: float
    placement: np.ndarray


def load_tasks(suite: str, progress: bool = True) -> tuple[list[PlacementTask], dict[str, Reference]]:
    """A task per row of ``suite`` (unlimited budgets), and each task's best zero-budget heuristic."""
    tasks, heuristics = [], {}
    for row in tqdm(load_suite(suite), desc=f"loading {suite}", unit="task", leave=False,
                    disable=not progress):
        graph, cluster = load_benchmark(row.benchmark), load_cluster(row.cluster)
        evaluator = Evaluator(graph, cluster, row.runtime)
        task = make_task(Problem.make(graph, cluster, evaluator=evaluator, benchmark=row.benchmark), row.name)
        heuristics[row.name] = best_heuristic(evaluator, row.benchmark)
        task.problem.evaluate(heuristics[row.name].placement)  # the best so far that self-imitation starts from
        tasks.append(task)
    return tasks, heuristics


def best_heuristic(evaluator: Evaluator, benchmark: str) -> Reference:
    """The fastest of ``ZERO_BUDGET_HEURISTICS`` on ``evaluator``'s graph that runs (methods that raise, e.g. the
    expert on a model it has no rule for, are left out); the single CPU when none runs."""
    graph = evaluator.graph
    best = Reference("single_cpu", float(evaluator(np.zeros(graph.n_groups, np.int64)).runtime_s),
                     np.zeros(graph.n_groups, np.int64))
    for name in ZERO_BUDGET_HEURISTICS:
        problem = Problem.make(graph, evaluator.cluster, evaluator=evaluator, benchmark=benchmark, budget=0)
        try:
            placement = solve(name, problem).placement
        except Exception:  # noqa: BLE001 - a heuristic without an answer here is simply not a reference
            continue
        m = evaluator(placement)
        if m.ok and m.runtime_s < best.runtime_s:
            best = Reference(name, float(m.runtime_s), np.asarray(placement, np.int64))
    return best


def greedy_ratios(trainer: Trainer, tasks: list[PlacementTask], heuristics: dict[str, Reference]
                  ) -> dict[str, float]:
    """Per task: its greedy placement's runtime over its best heuristic's (inf if it fails); one evaluation each."""
    out = {}
    for task in tasks:
        m = task.problem.evaluate(trainer.greedy(task))
        out[task.name] = m.runtime_s / heuristics[task.name].runtime_s if m.ok else math.inf
    return out


def summary_ratio(ratios: dict[str, float]) -> float:
    """Geometric mean of the ratios, each capped at RATIO_CAP (a failure counts RATIO_CAP)."""
    return float(np.exp(np.mean([math.log(min(r, RATIO_CAP)) for r in ratios.values()])))


def pretrain(out_dir: Path, *, suite: str = "generalisation-train", minutes: float = 12.0,
             budget: int | None = None, seed: int = 0, config: Config | None = None, imitation_steps: int = 500,
             progress: bool = True, stop: threading.Event | None = None) -> PretrainResult:
    """Train a fresh network across ``suite``'s tasks; write the run folder ``out_dir``."""
    config = config or Config()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks, heuristics = load_tasks(suite, progress)
    start = time.perf_counter()
    torch.manual_seed(seed)
    trainer = Trainer(config.network(tasks[0].inputs.features.shape[1]), config, seed=seed)
    imitation = imitate(trainer, tasks, [t.canonical(heuristics[t.name].placement) for t in tasks],
                        steps=imitation_steps, progress=progress)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float]] = []
    evaluations, limit = 0, math.inf if budget is None else budget
    per_update = config.samples * min(config.graphs_per_update, len(tasks))
    bar = tqdm(total=int(minutes * 60), desc="gnn_placer", unit="s", disable=not progress)
    ratios: dict[str, float] = {}
    stop = stop or threading.Event()

    def meta() -> dict[str, Any]:
        return {"suite": suite, "tasks": [t.name for t in tasks], "updates": len(rows), "evaluations": evaluations,
                "imitation_steps": imitation[0], "seconds": round(time.perf_counter() - start, 1), "seed": seed}

    try:
        while (evaluations + per_update <= limit and time.perf_counter() - start < minutes * 60
               and not stop.is_set()):
            chosen = rng.choice(len(tasks), size=min(config.graphs_per_update, len(tasks)), replace=False)
            row = update_row(trainer.update([tasks[i] for i in chosen]), len(rows) + 1)
            evaluations += per_update
            if len(rows) % GREEDY_EVERY == 0:
                ratios = greedy_ratios(trainer, tasks, heuristics)
                evaluations += len(tasks)
                row.update(greedy_ratio=summary_ratio(ratios),
                           greedy_ok=sum(math.isfinite(r) for r in ratios.values()) / len(ratios))
            rows.append({**row, "evaluations": evaluations, "seconds": time.perf_counter() - start})
            if len(rows) % SAVE_EVERY == 0:
                write_run(out_dir, trainer, rows, meta(), suite, tasks)
            bar.n = min(int(rows[-1]["seconds"]), bar.total)
            bar.set_postfix_str(f"update {len(rows)} reward {row['mean_reward']:.2f} "
                                f"greedy/heuristic {summary_ratio(ratios) if ratios else math.nan:.2f}")
    finally:
        bar.close()
    ratios = greedy_ratios(trainer, tasks, heuristics)
    evaluations += len(tasks)
    write_run(out_dir, trainer, rows, meta(), suite, tasks)
    return PretrainResult(out_dir, len(rows), evaluations, time.perf_counter() - start, ratios, heuristics, imitation)


def update_row(stats: list[GraphStats], update: int) -> dict[str, float]:
    """The log row of one update (the greedy columns NaN until measured)."""
    return {"update": update, "mean_reward": float(np.mean([s.mean_reward for s in stats])),
            "success_rate": float(np.mean([s.success_rate for s in stats])),
            "entropy": float(np.mean([s.entropy for s in stats])), "greedy_ratio": math.nan, "greedy_ok": math.nan}


def remeasure_margin(path: Path) -> float:
    """Measure the memory margin of the checkpoint at ``path`` again on the suite it was trained on, as
    pre-training does when it writes one (e.g. after the memory estimate changed), and store it there."""
    net, config, meta = load_network(path)
    trainer = Trainer(net, config)
    tasks = suite_tasks(meta["suite"])
    margin = train_margin([t.problem for t in tasks], [trainer.greedy(t) for t in tasks], seed=int(meta["seed"]))
    save_checkpoint(path, net, config, {**meta, "memory_margin": margin, "memory_estimate": ESTIMATE})
    return margin


def suite_tasks(suite: str) -> list[PlacementTask]:
    """A task per row of ``suite``, each with an unlimited counted problem of its own."""
    tasks = []
    for row in load_suite(suite):
        graph, cluster = load_benchmark(row.benchmark), load_cluster(row.cluster)
        problem = Problem.make(graph, cluster, evaluator=Evaluator(graph, cluster, row.runtime), benchmark=row.benchmark)
        tasks.append(make_task(problem, row.name))
    return tasks


def write_run(out_dir: Path, trainer: Trainer, rows: list[dict[str, float]], meta: dict[str, Any], suite: str,
              tasks: list[PlacementTask]) -> None:
    """The checkpoint (with the network's memory margin on ``tasks``), the log and the learning curve of the run
    so far."""
    margin = train_margin([t.problem for t in tasks], [trainer.greedy(t) for t in tasks], seed=int(meta["seed"]))
    save_checkpoint(out_dir / CHECKPOINT, trainer.net, trainer.config, {**meta, "memory_margin": margin,
                                                                         "memory_estimate": ESTIMATE})
    write_log(out_dir / LOG, rows, COLUMNS)
    plot_training(out_dir / CURVE, rows, title=f"GNN placer on {suite}")
