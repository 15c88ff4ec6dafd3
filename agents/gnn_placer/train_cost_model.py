"""``python -m agents.gnn_placer.train_cost_model``: measure placements of a suite's tasks and train the cost model
that ``place_zero_shot_refined`` searches on; writes its run folder (see :mod:`.cost_training`). Bad flags exit 2
naming the flag, before anything is built.

The default suite is :data:`.cost_training.COST_MODEL_SUITE`, the train split plus eight random CNNs (no test
family), what the committed cost model learned from (docs/findings.md has why the random CNNs)."""
from __future__ import annotations

import argparse
import sys

from agents.common.arguments import add_threads_argument, non_negative_int, positive_float, positive_int

from .cli import prepare_suite_run
from .cost_training import DEFAULT_SUITE


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agents.gnn_placer.train_cost_model", description=(
        "Measure placements of every task of a suite (the placer's zero-shot answer and samples, random placements, "
        "contiguous splits, hill climbs on the simulator) and train the cost model on them; writes placements/, "
        "log.csv, learning_curve.png and cost_model.pt to --out-dir."))
    p.add_argument("--suite", default=DEFAULT_SUITE, help="the suite to train on (default: %(default)s)")
    p.add_argument("--checkpoint", default=None,
                   help="the placer whose placements are measured (default: $GNN_PLACER_CHECKPOINT or the committed one)")
    p.add_argument("--steps", type=positive_int, default=3000, help="training steps (default: %(default)s)")
    p.add_argument("--batch", type=positive_int, default=64, help="placements per step (default: %(default)s)")
    p.add_argument("--lr", type=positive_float, default=1e-3, help="Adam's learning rate (default: %(default)s)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="data and network seed (default: %(default)s)")
    p.add_argument("--out-dir", default=None, help="run folder (default: runs/gnn_cost_model/<suite>-seed<seed>)")
    add_threads_argument(p, default=1)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    out_dir, stop = prepare_suite_run(p, args, "gnn_cost_model")
    from .cost_training import train_cost_model

    result = train_cost_model(out_dir, suite=args.suite, checkpoint=args.checkpoint, steps=args.steps,
                              batch=args.batch, lr=args.lr, seed=args.seed, progress=not args.no_progress, stop=stop)
    print(f"{result.evaluations} evaluations, {result.steps} steps, {result.seconds:.0f} s; run folder {result.out_dir}")
    print("| task | held-out Spearman | mean abs. error (log) |\n|---|---|---|")
    for task, (rho, error) in result.held_out.items():
        print(f"| {task} | {rho:.3f} | {error:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
