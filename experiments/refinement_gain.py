"""What the cost-model refinement does to the zero-shot placements: ``python -m experiments.refinement_gain``.

For every task of a suite (default ``generalisation-train``, the graphs the placer learned from), the zero-shot
placement (``agents.gnn_placer.harness.zero_shot``, memory fit included) and the same placement refined on the cost
model (``agents.gnn_placer.refine.refine``, the checkpoint's memory margin), both simulated. It prints a row per
task, then how many refined placements are faster and slower than their start and the geometric mean of refined /
zero-shot. On the train tasks the refinement makes most placements slower (docs/findings.md): the placer's greedy
placement there is better than what the cost model can tell apart from it, so a repair of the refinement judged on
the train tasks is judged where the refinement does worst. ``--suite generalisation-test`` gives the test rows.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from agents.common.arguments import add_threads_argument

SAME = 1e-3  # relative change below which a refined runtime counts as the same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="generalisation-train", help="tasks to place (default: %(default)s)")
    parser.add_argument("--checkpoint", default=None,
                        help="GNN placer checkpoint (default: $GNN_PLACER_CHECKPOINT or the committed one)")
    parser.add_argument("--cost-model", default=None,
                        help="cost model checkpoint (default: $GNN_PLACER_COST_MODEL or the committed one)")
    add_threads_argument(parser, default=1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    from placement_env.errors import UnknownSuiteError
    from placement_env.harness.suites import load_suite

    try:
        load_suite(args.suite)
    except UnknownSuiteError as error:
        parser.error(f"--suite: {error}")
    import torch
    from tqdm import tqdm

    from agents.gnn_placer import Trainer, cost_input, load_cost_model, load_network
    from agents.gnn_placer.harness import memory_margin, zero_shot
    from agents.gnn_placer.refine import refine
    from agents.gnn_placer.training import suite_tasks

    torch.set_num_threads(args.threads)
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    net, config, meta = load_network(checkpoint)
    cost, _ = load_cost_model(Path(args.cost_model) if args.cost_model else None)
    margin = memory_margin(meta, checkpoint)
    trainer = Trainer(net, config)
    print("| task | zero-shot (s) | refined (s) | refined / zero-shot | moves |\n|---|---|---|---|---|")
    ratios = []
    for task in tqdm(suite_tasks(args.suite), desc="refining", unit="task", disable=args.no_progress, file=sys.stderr):
        start = zero_shot(trainer, task, margin)
        refined, moves = refine(task.problem, start, cost, cost_input(task.problem), margin=margin)
        before, after = task.problem.evaluate(start), task.problem.evaluate(refined)
        if not (before.ok and after.ok):
            print(f"| {task.name} | {before.runtime_s if before.ok else before.failure} | "
                  f"{after.runtime_s if after.ok else after.failure} | - | {moves} |")
            continue
        ratios.append(after.runtime_s / before.runtime_s)
        print(f"| {task.name} | {before.runtime_s:.4g} | {after.runtime_s:.4g} | {ratios[-1]:.3f} | {moves} |")
    r = np.array(ratios)
    if r.size:
        print(f"refined faster on {(r < 1 - SAME).sum()}, slower on {(r > 1 + SAME).sum()}, the same on "
              f"{(np.abs(r - 1) <= SAME).sum()} of {r.size} tasks that ran; geometric mean refined / zero-shot "
              f"{np.exp(np.log(r).mean()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
