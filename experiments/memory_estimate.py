"""How close the static memory estimate is to the simulated peak: ``python -m experiments.memory_estimate``.

For every task of the generalisation suites (train, then test), the five placements a memory margin is measured
on (``agents.gnn_placer.memory_fit.placements_to_check``: the pre-trained GNN placer's greedy placement before
any memory fitting, the single-GPU placement, and three with a fifth of the greedy placement's groups moved to
random GPUs). For each, and each GPU filled at least half by the estimate, it prints the simulated peak over
``pe.sequential_peak_bytes`` with the ops in earliest-start order (the estimate the zero-shot placer uses) and,
for comparison, in index order. The largest ratio over the train rows is the margin the zero-shot placer keeps
(the checkpoint carries it, measured the same way at the end of pre-training); the test rows show how it
carries over to graphs that took no part in choosing it. To store a margin measured again in a checkpoint, run
``python -m agents.gnn_placer.memory_margin --write CHECKPOINT``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="for the moved groups (default: %(default)s)")
    parser.add_argument("--checkpoint", default=None,
                        help="GNN placer checkpoint (default: $GNN_PLACER_CHECKPOINT or the committed one)")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from agents.gnn_placer import Trainer, load_network, make_task
    from agents.gnn_placer.checkpoint import checkpoint_path
    from agents.gnn_placer.memory_fit import peak_ratios, placements_to_check
    from placement_env.harness.suites import load_suite

    path = Path(args.checkpoint) if args.checkpoint else checkpoint_path()
    net, config, meta = load_network(path)
    trainer = Trainer(net, config)
    print("| split | task | simulated / estimated peak per GPU at least half full (greedy; single GPU; 3 moved) | max "
          "| max, index order |")
    print("|---|---|---|---|---|")
    for split in ("train", "test"):
        rng = np.random.default_rng(args.seed)
        worst = worst_index = 0.0
        for task in load_suite(f"generalisation-{split}"):
            graph, cluster = pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster)
            problem = pe.Problem.make(graph, cluster, seed=args.seed)
            greedy = trainer.greedy(make_task(problem))
            placements = placements_to_check(problem, greedy, rng)
            ratios = peak_ratios(problem, placements)
            row_worst = max(float(r.max(initial=0.0)) for r in ratios)
            row_index = max(float(r.max(initial=0.0)) for r in peak_ratios(problem, placements, order="index"))
            worst, worst_index = max(worst, row_worst), max(worst_index, row_index)
            cells = [" ".join(f"{x:.2f}" for x in r) or "-" for r in ratios]
            print(f"| {split} | {task.name} | {'; '.join(cells)} | {row_worst:.2f} | {row_index:.2f} |")
        print(f"| {split} | all | | **{worst:.2f}** | {worst_index:.2f} |")
    print(f"{path}: memory margin {meta.get('memory_margin', 'none')}, measured against the estimate "
          f"{meta.get('memory_estimate', 'sequential, index order')!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
