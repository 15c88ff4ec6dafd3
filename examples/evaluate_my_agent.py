"""Evaluate your own placement method on a benchmark suite and get a leaderboard.

A placement method is any function ``method(problem) -> placement`` (one device index per co-location
group). ``problem`` carries the grouped graph, the cluster, a seeded ``rng``, ``problem.allowed`` (which
devices may run each group) and ``problem.evaluate(placement)``, the runtime oracle that counts every call
against ``problem.budget``. The harness finds a method by import path, ``"module:callable"``, exactly as
``placement-env run --methods my_module:place`` does; this script makes itself importable as
``evaluate_my_agent`` so that its ``greedy`` below is ``"evaluate_my_agent:greedy"``.

    python examples/evaluate_my_agent.py                          # suite "tiny", budget 100, ~20 s
    python examples/evaluate_my_agent.py --suite paper --out my-results/

Writes ``results.jsonl`` (one row per task, method and seed; a rerun resumes) and ``report/report.md``
(the paper-style table and the leaderboard at equal budgets, with plots) under ``--out``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from placement_env.harness import read_rows, run_suite, write_report
from placement_env.harness.leaderboard import leaderboard_rows


def greedy(problem):
    """Start on the fastest single device, then move one group at a time to the device that helps most."""
    allowed = problem.allowed  # [n_groups, n_devices] booleans
    best, best_s = None, np.inf
    for device in range(allowed.shape[1]):  # every group on one device (or the first device that can run it)
        placement = np.where(allowed[:, device], device, allowed.argmax(axis=1))
        m = problem.evaluate(placement)
        if m.ok and m.runtime_s < best_s:
            best, best_s = placement, m.runtime_s
    for group in problem.rng.permutation(len(allowed)):
        for device in np.flatnonzero(allowed[group]):
            if problem.budget_left <= 0:
                return best
            trial = best.copy()
            trial[group] = device
            m = problem.evaluate(trial)
            if m.ok and m.runtime_s < best_s:
                best, best_s = trial, m.runtime_s
    return best


def random_search(problem):
    """The best of as many random placements as the budget allows."""
    allowed = problem.allowed
    best, best_s = None, np.inf
    while problem.budget_left > 0:
        placement = np.array([problem.rng.choice(np.flatnonzero(row)) for row in allowed])
        m = problem.evaluate(placement)
        if m.ok and m.runtime_s < best_s:
            best, best_s = placement, m.runtime_s
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="tiny", help="a suite of placement_env.harness.SUITES")
    parser.add_argument("--budget", type=int, default=100, help="runtime evaluations per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", default=None, help="output folder (default: a new temp folder)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="evaluate_my_agent-"))
    out.mkdir(parents=True, exist_ok=True)

    # Make this file importable by its name, so the harness can resolve "evaluate_my_agent:greedy".
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    methods = ["evaluate_my_agent:greedy", "evaluate_my_agent:random_search",  # yours
               "single_gpu", "expert", "heft", "hill_climbing"]                 # built-in references
    results = out / "results.jsonl"
    run_suite(args.suite, methods, results, budget=args.budget, seeds=args.seeds, progress=False)
    report = write_report(results, out / "report", gantt=False)

    # The leaderboard: per task, the heuristics, then the searching methods, each fastest first (the mean over
    # seeds of each run's best runtime; "failed": no placement, e.g. the expert knows no synthetic graph).
    for entry in leaderboard_rows(read_rows(results)):
        runtime = "failed" if entry["mean"] is None else f"{entry['mean']:.4g} s"
        budget = entry["budget"] or "heuristic"  # a method that spent no evaluation
        print(f"{entry['task']:<24} {entry['method']:<34} budget {budget!s:<9} {runtime}")
    print(f"results: {results}\nreport: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
