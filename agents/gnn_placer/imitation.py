"""The supervised warm start of pre-training: the network first learns to output each train graph's best
zero-budget heuristic placement (cross-entropy per group; with the sequential decoder, each group given the
target's devices for the groups before it), so that REINFORCE starts from a decisive policy
whose greedy placement already runs, and searches around it. (REINFORCE from a uniform policy can learn
per-group distributions whose samples fit in memory while their mode, the greedy placement that is the
zero-shot answer, does not: docs/findings.md.)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch.nn import functional
from tqdm import tqdm

from .task import PlacementTask
from .trainer import Trainer


def imitate(trainer: Trainer, tasks: Sequence[PlacementTask], targets: Sequence[np.ndarray], *, steps: int,
            accuracy: float = 0.98, progress: bool = False) -> tuple[int, float]:
    """Up to ``steps`` Adam steps on the summed cross-entropy of every task's logits with its target placement,
    until the greedy placement (decoded freely, not given the target's earlier devices) matches the target on
    ``accuracy`` of every task's groups; returns (steps taken, the lowest per-task accuracy). ``progress``: a
    progress bar (a step passes over every task: seconds for a few hundred tasks)."""
    if len(tasks) != len(targets):
        raise ValueError(f"{len(tasks)} tasks but {len(targets)} target placements")
    labels = [torch.tensor(np.asarray(t), dtype=torch.int64) for t in targets]
    worst, taken = 0.0, 0
    bar = tqdm(total=steps, desc="imitation", unit="step", disable=not progress, leave=False)
    for taken in range(1, steps + 1):
        trainer.optimizer.zero_grad()
        matched = []
        for task, label in zip(tasks, labels):
            encoding = trainer.net(task.inputs)
            log_probs = trainer.net.group_log_probs(encoding, label[None])[0]
            (functional.nll_loss(log_probs, label) / len(tasks)).backward()
            matched.append(float((trainer.net.draw(encoding, 1, greedy=True)[0] == label).float().mean()))
        torch.nn.utils.clip_grad_norm_(trainer.net.parameters(), trainer.config.grad_clip)
        trainer.optimizer.step()
        worst = min(matched)
        bar.update()
        bar.set_postfix_str(f"lowest task accuracy {worst:.2f} (until {accuracy:g})")
        if worst >= accuracy:
            break
    bar.close()
    return taken, worst
