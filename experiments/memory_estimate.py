"""How close the static memory estimate is to the simulated peak: ``python -m experiments.memory_estimate``.

For every task of the generalisation suites (train, then test), five placements: the pre-trained GNN placer's
greedy placement (before any memory fitting), the single-GPU placement (every group that may go on GPU 0),
and three with a fifth of the greedy placement's groups moved to random GPUs. For each, and each GPU holding
more than 1 GiB by the estimate, it prints the simulated peak over ``pe.sequential_peak_bytes``. The largest
ratio over the train rows is the margin the zero-shot placer keeps (``agents/gnn_placer/memory_fit.py``); the
test rows show how it carries over to graphs that took no part in choosing it.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

GIB = 2**30


def _placements(problem, greedy: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """The greedy placement, the single-GPU one and three with a fifth of the groups moved to random GPUs."""
    n, devices = problem.graph.n_groups, problem.cluster.n_devices
    rows = np.arange(n)
    out = [greedy, np.where(problem.allowed[:, 1], 1, 0)]
    for _ in range(3):
        moved = greedy.copy()
        pick = rng.random(n) < 0.2
        moved[pick] = rng.integers(1, devices, int(pick.sum()))
        out.append(np.where(problem.allowed[rows, moved], moved, 0))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="for the moved groups (default: %(default)s)")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from agents.gnn_placer import Trainer, load_network, make_task
    from placement_env.harness.suites import load_suite

    net, config, _ = load_network(None)
    trainer = Trainer(net, config)
    rng = np.random.default_rng(args.seed)
    print("| split | task | simulated / estimated peak per GPU over 1 GiB (greedy; single GPU; 3 moved) | max |")
    print("|---|---|---|---|")
    for split in ("train", "test"):
        worst = 0.0
        for task in load_suite(f"generalisation-{split}"):
            graph, cluster = pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster)
            problem = pe.Problem.make(graph, cluster, seed=args.seed)
            placements = _placements(problem, trainer.log_probs(make_task(problem)).argmax(axis=1), rng)
            cells, row_worst = [], 0.0
            for placement, measured in zip(placements, problem.evaluator.batch(np.stack(placements))):
                estimate = pe.sequential_peak_bytes(graph, cluster, placement)
                gpus = np.flatnonzero((np.arange(cluster.n_devices) > 0) & (estimate > GIB))
                ratios = measured.peak_bytes[gpus] / estimate[gpus]
                row_worst = max(row_worst, float(ratios.max(initial=0.0)))
                cells.append(" ".join(f"{r:.2f}" for r in ratios) or "-")
            worst = max(worst, row_worst)
            print(f"| {split} | {task.name} | {'; '.join(cells)} | {row_worst:.2f} |")
        print(f"| {split} | all | | **{worst:.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
