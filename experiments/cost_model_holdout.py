"""Which graphs the cost model should learn from, decided on the train split alone:
``python -m experiments.cost_model_holdout --data runs/gnn_cost_model/<run>/placements``.

Leave one family out. For each family of ``generalisation-train`` (RNNLM, NMT, Inception-V3, GPT-2; every batch
size and both presets of the family go together), two cost models are trained on the other families' tasks, one
on them alone (``train``) and one with the eight random CNNs of the cost model's suite beside them
(``train+cnn``), with the same steps, batch, learning rate and seed. Both learn from the placements and simulated
runtimes a ``python -m agents.gnn_placer.train_cost_model`` run (its default suite) measured
(its ``placements/`` folder; no evaluation here), 10% of each task's held out as that command does. Each is then
scored on the left-out family's tasks, which it has not seen: Spearman's rank correlation of prediction and
simulated runtime on up to ``--score`` of each task's placements that ran, and on up to ``--score`` of its good
ones (within 25% of the fastest measured: random placements are easy to tell from good ones, and the refinement's
choices are among good ones); and, where both ran, on the placer's zero-shot placement and MinCut's (the first
two of each task's data): whether the one it predicts faster is the one the simulator finds faster, and how much
slower its pick runs than the faster one (the question a search that refines both and keeps the one predicted
faster would rest on; the placer learned from the left-out family, so its placement there is the good one).

The choice between the two training sets rests on the mean Spearman on good placements over the four left-out
families, a rule stated before the first run. Rows are appended to ``--out`` as JSON lines; ``--families`` runs
some of the families (e.g. in two processes), and ``--summarise FILE...`` prints a table per seed and the means
of the rows in those files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agents.common.arguments import add_threads_argument, non_negative_int, positive_int

TRAIN_SUITE = "generalisation-train"
CNN_SUITE = "agents.gnn_placer.cost_training:COST_MODEL_SUITE"  # the train split + 8 random CNNs
CHOICES = ("train", "train+cnn")
FAMILIES = ("rnnlm", "nmt", "inception_v3", "gpt2")
GOOD = 1.25  # "good" placements run within 25% of the fastest one measured for the task


def family(benchmark: str) -> str:
    """A benchmark's family: its name without a batch-size suffix or a random graph's seed."""
    return benchmark.split(":")[0].split("-batch")[0]


def score(net, split_inputs, data, limit: int, rng: np.random.Generator) -> dict:
    """Spearman on up to ``limit`` of ``data``'s placements that ran and on up to ``limit`` of the good ones
    (within ``GOOD`` of the fastest measured), and the zero-shot / MinCut pair's order."""
    from scipy.stats import spearmanr

    ran = np.flatnonzero(data.ok)
    good = ran[data.runtime_s[ran] <= GOOD * data.runtime_s[ran].min()]
    row = {}
    for key, rows in (("all", ran), ("good", good)):
        pick = rows if rows.size <= limit else np.sort(rng.choice(rows, limit, replace=False))
        predicted = net.predict(split_inputs, data.placements[pick])
        row[f"spearman_{key}"] = float(spearmanr(predicted, data.runtime_s[pick])[0])
        row[f"placements_{key}"] = int(pick.size)
    if data.ok[0] and data.ok[1]:
        pair = net.predict(split_inputs, data.placements[:2])
        chosen = int(np.argmin(pair))
        runtimes = data.runtime_s[:2]
        row.update(pair_right=bool(chosen == int(np.argmin(runtimes))),
                   pair_regret=float(runtimes[chosen] / runtimes.min() - 1.0))
    return row


def run(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    from agents.gnn_placer.cost_model import cost_input
    from agents.gnn_placer.cost_training import fit, load_dataset, split
    from agents.gnn_placer.training import suite_tasks
    from placement_env.harness.suites import load_suite

    data_dir = Path(args.data)
    rows = {row.name: row for row in load_suite(CNN_SUITE)}
    train_names = {row.name for row in load_suite(TRAIN_SUITE)}
    missing = sorted(name for name in rows if not (data_dir / f"{name}.npz").exists())
    if missing:
        raise SystemExit(f"--data {data_dir}: no measured placements for {', '.join(missing)}; expected the "
                         f"placements/ folder of a train_cost_model run on {CNN_SUITE}")
    tasks = {task.name: task for task in tqdm(suite_tasks(CNN_SUITE), desc="loading tasks", unit="task")}
    inputs = {name: cost_input(task.problem) for name, task in tasks.items()}
    data = {name: load_dataset(data_dir / f"{name}.npz") for name in tasks}
    out = Path(args.out)
    for left_out in tqdm(args.families, desc="left-out families", unit="family"):
        held = [name for name in train_names if family(rows[name].benchmark) == left_out]
        for choice in CHOICES:
            learn = [name for name in rows if name not in held
                     and (name in train_names or choice == "train+cnn")]
            rng = np.random.default_rng(args.seed)
            splits = [split(name, inputs[name], data[name], rng) for name in sorted(learn)]
            net, _, _ = fit(splits, rng, steps=args.steps, seed=args.seed, log_every=args.steps)
            score_rng = np.random.default_rng(args.seed)
            for name in sorted(held):
                record = {"left_out": left_out, "choice": choice, "task": name, "steps": args.steps,
                          "seed": args.seed, "learned_from": len(learn),
                          **score(net, inputs[name], data[name], args.score, score_rng)}
                with out.open("a") as f:
                    f.write(json.dumps(record) + "\n")


def summarise(paths: list[str]) -> None:
    """A table per seed of the rows in ``paths``, each choice's means under it, and over all seeds if several."""
    records = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines() if line.strip()]
    seeds = sorted({r["seed"] for r in records})
    for seed in seeds:
        print(f"seed {seed}:")
        print_table([r for r in records if r["seed"] == seed])
    if len(seeds) > 1:
        print(f"seeds {', '.join(map(str, seeds))}:")
        print_means(records)


def print_table(records: list[dict]) -> None:
    cells = {(r["task"], r["choice"]): r for r in records}

    def cell(task: str, choice: str, key: str) -> str:
        r = cells.get((task, choice))
        return "-" if r is None else f"{r[key]:.3f}"

    def pair(task: str, choice: str) -> str:
        r = cells.get((task, choice))
        if r is None or "pair_right" not in r:
            return "-"
        return "right" if r["pair_right"] else f"wrong (+{r['pair_regret']:.0%})"

    print("| left-out family | task | Spearman all, train | train+cnn | Spearman good, train | train+cnn "
          "| zero-shot / MinCut, train | train+cnn |")
    print("|---|---|---|---|---|---|---|---|")
    for task in sorted({r["task"] for r in records}):
        left_out = next(r["left_out"] for r in records if r["task"] == task)
        row = [cell(task, choice, key) for key in ("spearman_all", "spearman_good") for choice in CHOICES]
        print(f"| {left_out} | {task} | {' | '.join(row)} | {' | '.join(pair(task, c) for c in CHOICES)} |")
    print_means(records)


def print_means(records: list[dict]) -> None:
    """Per choice: the mean over left-out families of each family's mean Spearman (all rows of all seeds), and
    how often the zero-shot / MinCut pair was ordered right."""
    for choice in CHOICES:
        mine = [r for r in records if r["choice"] == choice]
        families = sorted({r["left_out"] for r in mine})

        def mean_over_families(key: str) -> float:
            return float(np.mean([np.mean([r[key] for r in mine if r["left_out"] == f]) for f in families]))
        pairs = [r for r in mine if "pair_right" in r]
        print(f"{choice}: over {len(families)} left-out families, mean Spearman on good placements "
              f"{mean_over_families('spearman_good'):.3f}, on all {mean_over_families('spearman_all'):.3f}; "
              f"zero-shot / MinCut ordered right on {sum(r['pair_right'] for r in pairs)} of {len(pairs)} tasks, "
              f"mean regret of the pick {np.mean([r['pair_regret'] for r in pairs]):.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help=f"a train_cost_model run's placements/ folder ({CNN_SUITE})")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES),
                        help="the families to leave out in turn (default: all four)")
    parser.add_argument("--steps", type=positive_int, default=1500,
                        help="training steps per cost model (default: %(default)s, half the command's 3,000, for time)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="split, data order and network seed (default: %(default)s)")
    parser.add_argument("--score", type=positive_int, default=2000,
                        help="placements scored per left-out task (default: %(default)s)")
    parser.add_argument("--out", default="cost_model_holdout.jsonl", help="rows appended here (default: %(default)s)")
    add_threads_argument(parser, default=1)
    parser.add_argument("--summarise", nargs="+", metavar="FILE", help="print the tables of these row files and stop")
    args = parser.parse_args(argv)
    if args.summarise:
        absent = [path for path in args.summarise if not Path(path).is_file()]
        if absent:
            parser.error(f"--summarise: no such file {', '.join(absent)}")
        summarise(args.summarise)
        return 0
    if not args.data:
        parser.error("--data is required unless --summarise is given")
    import torch

    torch.set_num_threads(args.threads)
    run(args)
    summarise([args.out])
    return 0


if __name__ == "__main__":
    sys.exit(main())
