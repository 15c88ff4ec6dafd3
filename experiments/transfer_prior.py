"""The transfer prior's weight for zero-shot decoding, chosen on the validation split:
``python -m experiments.transfer_prior`` (``--suite generalisation-test`` to place the test split with the chosen one).

For each pre-trained network (the committed one and the five in ``docs/generalisation_seeds/``, as
``experiments.zero_shot_validation``) and each task of ``--suite`` (default ``generalisation-validation``), the
zero-shot placement (``agents.gnn_placer.harness.zero_shot``: memory fit included, no evaluation) is made with each
of ``--weights`` as the transfer prior's weight (0: ``place_zero_shot`` as it is) and simulated against the task's
best zero-budget heuristic. It prints a row per (network, task) with the ratios, then per weight how many come
within 15% and the geometric mean, and the weight the rule picks: most within 15%, then the lowest geometric mean,
then the smallest weight.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from agents.common.arguments import add_threads_argument
from experiments.zero_shot_validation import DEFAULT_PAIRS, TARGET, suite_tasks

WEIGHTS = (0.0, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7)


def choose(ratios: dict[float, np.ndarray]) -> float:
    """The weight with the most ratios within ``TARGET``, then the lowest geometric mean, then the smallest."""
    return min(ratios, key=lambda w: (-int((ratios[w] <= TARGET).sum()), float(np.log(ratios[w]).mean()), w))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="generalisation-validation", help="tasks to place (default: %(default)s)")
    parser.add_argument("--weights", nargs="+", type=float, default=list(WEIGHTS), help="(default: %(default)s)")
    parser.add_argument("--networks", nargs="+", choices=list(DEFAULT_PAIRS), default=list(DEFAULT_PAIRS),
                        help="(default: all)")
    add_threads_argument(parser, default=1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if any(not w >= 0 for w in args.weights):
        parser.error(f"--weights {args.weights}: every weight must be >= 0")
    tasks, heuristics = suite_tasks(parser, args)
    from tqdm import tqdm

    from agents.gnn_placer import Trainer, load_network
    from agents.gnn_placer.harness import memory_margin, zero_shot

    print("| network | task | best heuristic (s) | " + " | ".join(f"weight {w:g}" for w in args.weights) + " |\n"
          + "|---" * (3 + len(args.weights)) + "|")
    ratios: dict[float, list[float]] = {w: [] for w in args.weights}
    with tqdm(total=len(args.networks) * len(tasks), desc="placing", unit="task", disable=args.no_progress,
              file=sys.stderr) as bar:
        for name in args.networks:
            checkpoint = DEFAULT_PAIRS[name][0]
            net, config, meta = load_network(checkpoint)
            trainer, margin = Trainer(net, config), memory_margin(meta, checkpoint)
            for task in tasks:
                best = heuristics[task.name].runtime_s
                cells = []
                for weight in args.weights:
                    m = task.problem.evaluate(zero_shot(trainer, task, margin, weight))
                    ratios[weight].append((m.runtime_s if m.ok else float("inf")) / best)
                    cells.append(f"{ratios[weight][-1]:.3f}")
                print(f"| {name} | {task.name} | {heuristics[task.name].method} {best:.4g} | " + " | ".join(cells)
                      + " |", flush=True)
                bar.update()
    arrays = {w: np.array(r) for w, r in ratios.items()}
    for weight, r in arrays.items():
        print(f"weight {weight:g}: {(r <= TARGET).sum()} of {r.size} within 15%, geometric mean "
              f"{np.exp(np.log(r).mean()):.3f}")
    print(f"the rule's pick on {args.suite}: weight {choose(arrays):g} (a weight is chosen on the validation split)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
