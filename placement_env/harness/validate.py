"""Replay every placement of a results file and flag rows whose runtime does not reproduce.

Simulated and grappler runtimes are deterministic, so they must reproduce exactly; measured
runtimes must lie within ``tolerance`` (relative). This is how third-party results are checked.

A row records the simulator's model version and the digest of its cluster's definition (see
``results.versions``). A row from another simulator version, or made on a cluster of the same name
that is now defined differently (a preset that was recalibrated), is not replayed: it is reported
as *stale*, with both versions, instead of as a mismatch. Rows from before versions were recorded
are replayed.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from ..benchmarks import load_benchmark
from ..cluster import load_cluster
from ..errors import InvalidPlacementError, ResultsFormatError
from ..evaluation import Evaluator
from ..runtime.simulated import SIMULATOR_VERSION
from .results import read_rows

DEFAULT_MEASURED_TOLERANCE = 0.2


@dataclass(frozen=True)
class Mismatch:
    line: int  # 1-based row number among the file's rows
    row: dict[str, Any]
    reason: str
    stale: bool = False  # made by another simulator version or cluster definition: not replayed


def _stale_reason(row: dict[str, Any], evaluator: Evaluator) -> str:
    """Why ``row`` cannot be replayed here ("" when it can)."""
    made = row["versions"] if isinstance(row.get("versions"), dict) else {}
    simulator = made.get("simulator")
    if row["runtime"] == "sim" and simulator is not None and simulator != str(SIMULATOR_VERSION):
        return f"made by simulator version {simulator}; this is version {SIMULATOR_VERSION}"
    digest = made.get("cluster")
    if digest is not None and digest != evaluator.cluster.digest:
        return (f"made on cluster {row['cluster']!r} as defined then (digest {digest}); it is now defined "
                f"differently (digest {evaluator.cluster.digest})")
    return ""


def validate(results: str | os.PathLike, *, tolerance: float = DEFAULT_MEASURED_TOLERANCE,
             progress: bool = True) -> tuple[int, list[Mismatch]]:
    """(rows checked, rows that do not reproduce or are stale). Rows without a placement (method
    errors) are skipped; stale rows (``Mismatch.stale``) are reported, not replayed.
    A missing, empty or unreadable file, or a row that cannot be a real result (an ok row without a
    placement, a placement of the wrong length, more evaluations than its budget), is a ResultsFormatError."""
    rows = read_rows(results, must_exist=True)
    evaluators: dict[tuple, Evaluator] = {}
    mismatches: list[Mismatch] = []
    checked = 0
    for number, row in enumerate(tqdm(rows, desc="validate", unit="row", disable=not progress), 1):
        if not row["placement"]:
            continue
        key = (row["benchmark"], row["cluster"], row["runtime"])
        if key not in evaluators:
            evaluators[key] = Evaluator(load_benchmark(row["benchmark"]), load_cluster(row["cluster"]), row["runtime"])
        evaluator = evaluators[key]
        stale = _stale_reason(row, evaluator)
        if stale:
            mismatches.append(Mismatch(number, row, stale, stale=True))
            continue
        try:
            m = evaluator(row["placement"])
        except InvalidPlacementError as error:
            raise ResultsFormatError(f"{results}: row {number} ({row['task']}, {row['method']}): {error}") from None
        checked += 1
        claimed = row["runtime_s"]
        if bool(row["ok"]) != m.ok:
            mismatches.append(Mismatch(number, row, f"ok={row['ok']} but the replay says ok={m.ok} ({m.failure})"))
        elif m.ok and not isinstance(claimed, (int, float)):
            mismatches.append(Mismatch(number, row, f"runtime_s={claimed!r} is not a number"))
        elif m.ok and row["runtime"] in ("sim", "grappler") and claimed != m.runtime_s:
            mismatches.append(Mismatch(number, row, f"runtime_s={claimed!r} but the replay gives {m.runtime_s!r}"))
        elif m.ok and row["runtime"] == "measured" and not math.isclose(claimed, m.runtime_s, rel_tol=tolerance):
            mismatches.append(Mismatch(number, row, f"runtime_s={claimed:.6g} but the replay measures "
                                                    f"{m.runtime_s:.6g} (tolerance {tolerance:.0%})"))
    for evaluator in evaluators.values():
        evaluator.close()
    return checked, mismatches
