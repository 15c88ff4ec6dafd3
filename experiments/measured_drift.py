"""How far measured step times drift between two runs, in seconds and over the anchor placement:
``python -m experiments.measured_drift NEW.jsonl [--against docs/placebench/measured.jsonl]``.

``NEW.jsonl`` holds zero-budget rows measured now with their anchors (``anchor_s``, e.g. ``placement-env run --suite
placebench-v1/measured --methods single_cpu metis scotch m_topo --budget 0 --seeds 0 -o NEW.jsonl``); the file
``--against`` holds the same methods' rows of an earlier run. For every (task, method) in both it prints:

* the step time now over then, in seconds (what a score in seconds would see of the machine's drift);
* then: the method's mean over the earlier run's ``single_cpu`` mean (that run's one-worker placement);
* now: the method over the anchor measured beside it, and its change against then.

and the median and largest change of each kind (the ``single_cpu`` rows against their own anchors included).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from placement_env.harness import read_rows

ONE_WORKER = "single_cpu"


def zero_budget_times(path: Path) -> dict[tuple[str, str], list[dict]]:
    """(task, method) -> the successful zero-budget rows of a results file."""
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in read_rows(path):
        if row["budget"] == 0 and row["ok"]:
            rows[(row["task"], row["method"])].append(row)
    return rows


def mean(rows: list[dict], key=lambda row: row["runtime_s"]) -> float:
    return statistics.fmean(key(row) for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.measured_drift", description=__doc__.split("\n")[0])
    parser.add_argument("new", type=Path, help="zero-budget measured rows with anchors, made now")
    parser.add_argument("--against", type=Path, default=Path("docs/placebench/measured.jsonl"),
                        help="the earlier rows (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in (args.new, args.against):
        if not path.is_file():
            parser.error(f"{path}: no such file")
    now, then = zero_budget_times(args.new), zero_budget_times(args.against)
    anchored = {key: rows for key, rows in now.items() if all(row.get("anchor_s") for row in rows)}
    pairs = sorted(key for key in anchored if key in then and (key[0], ONE_WORKER) in then)
    if not pairs:
        parser.error(f"no (task, method) has anchored rows in {args.new} and rows in {args.against} beside "
                     f"{ONE_WORKER}'s")
    print("| task | method | now / then (s) | then, over one worker | now, over its anchor | change |")
    print("|---|---|---|---|---|---|")
    in_seconds, over_anchor = [], []
    for task, method in pairs:
        seconds = mean(anchored[(task, method)]) / mean(then[(task, method)])
        before = mean(then[(task, method)]) / mean(then[(task, ONE_WORKER)])
        after = mean(anchored[(task, method)], key=lambda row: row["runtime_s"] / row["anchor_s"])
        over_anchor.append(abs(math.log(after / before)))
        if method != ONE_WORKER:
            in_seconds.append(abs(math.log(seconds)))
        print(f"| {task} | {method} | {seconds:.2f} | {before:.3f} | {after:.3f} | {after / before - 1:+.1%} |")

    def spread(changes: list[float]) -> str:
        if not changes:
            return "none"
        return f"median {math.exp(statistics.median(changes)) - 1:.0%}, largest {math.exp(max(changes)) - 1:.0%}"

    print(f"\nin seconds (other methods than {ONE_WORKER}): {spread(in_seconds)} off the earlier rows")
    print(f"over the anchor measured beside each row: {spread(over_anchor)} off the earlier ratios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
