"""The zero-shot methods on graphs neither they nor the test split saw: ``python -m experiments.zero_shot_validation``.

For each pre-trained network with its own cost model (default: the committed pair and the five pairs in
``docs/generalisation_seeds/``) and each task of ``--suite`` (default ``generalisation-validation``: families in
neither split nor among the cost model's train graphs): the zero-shot placement
(``agents.gnn_placer.harness.zero_shot``, memory fit included), that placement refined on the cost model
(``place_zero_shot_refined``), MinCut's placement refined the same way, and the one of the two refined placements
predicted faster (``place_refined_best_start``), simulated and set against the task's best zero-budget heuristic.
It prints a row per (network, task), then per network and in all how many placements of each method come within
15% of the best heuristic (the issue's zero-shot target) and the geometric mean of their ratios to it, and writes
the rows (placements included) as JSON lines to ``--out`` when given. With ``--transfer-prior WEIGHT`` the zero-shot
start is ``place_zero_shot_smoothed``'s decoding at that weight (``agents.gnn_placer.transfer_prior``) instead.
Choices about the zero-shot method (its memory
repairs, its refinement) are judged on this split: the train tasks are a biased judge (the placer learned their
placements, and the refinement makes them slower: ``experiments.refinement_gain``), and the test tasks must not be
one.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agents.common.arguments import add_threads_argument

TARGET = 1.15  # the zero-shot target: within 15% of the best heuristic
SEEDS_DIR = Path(__file__).resolve().parents[1] / "docs" / "generalisation_seeds"
DEFAULT_PAIRS = {"committed": (None, None),
                 **{name: (SEEDS_DIR / name / "checkpoint.pt", SEEDS_DIR / name / "cost_model.pt")
                    for name in ("seed1", "seed2", "today-seed0", "today-seed1", "today-seed2")}}


def _pairs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, tuple[Path | None, Path | None]]:
    if not args.pair:
        return DEFAULT_PAIRS
    pairs = {}
    for name, checkpoint, cost_model in args.pair:
        for path in (checkpoint, cost_model):
            if not Path(path).is_file():
                parser.error(f"--pair {name}: {path!r} is not a file")
        pairs[name] = (Path(checkpoint), Path(cost_model))
    return pairs


METHODS = ("zero_shot", "refined", "mincut_refined", "best_start")  # row fields <method>_s, <method>_ratio, <method>


def _summary(label: str, rows: list[dict]) -> str:
    parts = []
    for kind in METHODS:
        ratios = np.array([row[f"{kind}_ratio"] for row in rows])
        parts.append(f"{kind.replace('_', '-')} {(ratios <= TARGET).sum()} of {ratios.size} within 15%, geometric "
                     f"mean {np.exp(np.log(ratios).mean()):.3f}")
    return f"{label}: " + "; ".join(parts)


def suite_tasks(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list, dict]:
    """The tasks of ``args.suite`` and each one's best zero-budget heuristic (``load_tasks``; a parser error for an
    unknown suite), with torch on ``args.threads`` threads."""
    from placement_env.errors import UnknownSuiteError
    from placement_env.harness.suites import load_suite

    try:
        load_suite(args.suite)
    except UnknownSuiteError as error:
        parser.error(f"--suite: {error}")
    import torch

    from agents.gnn_placer.training import load_tasks

    torch.set_num_threads(args.threads)
    return load_tasks(args.suite, progress=not args.no_progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="generalisation-validation", help="tasks to place (default: %(default)s)")
    parser.add_argument("--pair", nargs=3, action="append", metavar=("NAME", "CHECKPOINT", "COST_MODEL"),
                        help="a network and its cost model (repeatable; default: the committed pair and "
                             "docs/generalisation_seeds/*)")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines file for the rows")
    parser.add_argument("--transfer-prior", type=float, default=0.0, metavar="WEIGHT",
                        help="decode the zero-shot start with this transfer prior (agents.gnn_placer.transfer_prior; "
                             "default: %(default)s, the start of place_zero_shot)")
    add_threads_argument(parser, default=1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    pairs = _pairs(args, parser)
    if not args.transfer_prior >= 0:
        parser.error(f"--transfer-prior {args.transfer_prior}: must be >= 0")
    tasks, heuristics = suite_tasks(parser, args)
    from tqdm import tqdm

    from agents.gnn_placer import Trainer, load_cost_model, load_network
    from agents.gnn_placer.harness import best_start, memory_margin, refined_starts

    print("| network | task | best heuristic (s) | zero-shot (s) | refined (s) | MinCut refined (s) | best start (s) | "
          "start | zero-shot / best | refined / best | best start / best |\n" + "|---" * 11 + "|")
    rows = []
    with tqdm(total=len(pairs) * len(tasks), desc="placing", unit="task", disable=args.no_progress,
              file=sys.stderr) as bar:
        for name, (checkpoint, cost_model) in pairs.items():
            net, config, meta = load_network(checkpoint)
            cost, _ = load_cost_model(cost_model)
            margin = memory_margin(meta, checkpoint)
            trainer = Trainer(net, config)
            for task in tasks:
                best = heuristics[task.name]
                refined = refined_starts(trainer, task, cost, margin, args.transfer_prior)
                start = best_start(refined)
                placements = {"zero_shot": refined["zero-shot"].start, "refined": refined["zero-shot"].placement,
                              "mincut_refined": refined["mincut"].placement}
                row = {"network": name, "task": task.name, "best_heuristic": best.method,
                       "best_heuristic_s": best.runtime_s, "start": start, "moves": refined[start].moves}
                for kind, placement in placements.items():
                    m = task.problem.evaluate(placement)
                    row[f"{kind}_s"] = float(m.runtime_s) if m.ok else float("inf")
                    row[f"{kind}_ratio"] = row[f"{kind}_s"] / best.runtime_s
                    row[kind] = placement.tolist()
                chosen = "refined" if start == "zero-shot" else "mincut_refined"  # the best start, simulated above
                for field in ("", "_s", "_ratio"):
                    row[f"best_start{field}"] = row[f"{chosen}{field}"]
                rows.append(row)
                seconds = " | ".join(f"{row[f'{kind}_s']:.4g}" for kind in METHODS)
                ratios = " | ".join(f"{row[f'{kind}_ratio']:.3f}" for kind in ("zero_shot", "refined", "best_start"))
                print(f"| {name} | {task.name} | {best.method} {best.runtime_s:.4g} | {seconds} | {start} | {ratios} |",
                      flush=True)
                if args.out:
                    with args.out.open("a") as out:
                        out.write(json.dumps(row) + "\n")
                bar.update()
            print(_summary(name, [row for row in rows if row["network"] == name]), flush=True)
    print(_summary("all", rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
