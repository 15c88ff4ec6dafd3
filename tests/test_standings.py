"""Scores per track and budget (geometric mean of reference / step time, failures charged, t intervals), the
leaderboard page and the submissions' declared fields, on hand-made rows."""
from __future__ import annotations

import csv
import json
import math

import pytest

from placement_env.cli import main
from placement_env.errors import ResultsFormatError
from placement_env.harness.standings import read_submission, standings, write_leaderboard


def _row(task, method, seed, runtime, *, budget=0, evaluations=0, ok=True, suite="mine", anytime=()):
    return {"suite": suite, "task": task, "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "runtime": "sim",
            "method": method, "method_args": {}, "seed": seed, "budget": budget, "placement": [0] if ok else [],
            "runtime_s": runtime if ok else None, "ok": ok, "failure": "" if ok else "oom", "message": "",
            "evaluations": evaluations, "wall_s": 1.0, "lower_bound_s": 0.1, "versions": {}, "anytime": list(anytime)}


ROWS = [
    # references: the best built-in heuristic at zero budget, per task: a 2.0 (expert), b 4.0 (heft)
    *(_row("a", "expert", s, 2.0) for s in (0, 1)), *(_row("a", "heft", s, 3.0) for s in (0, 1)),
    *(_row("b", "expert", s, 5.0) for s in (0, 1)), *(_row("b", "heft", s, 4.0) for s in (0, 1)),
    # a search at budget 10: seed 0 gets 1.0 and 2.0, seed 1 gets 2.0 and fails on b
    _row("a", "hill_climbing", 0, 1.0, budget=10, evaluations=10, anytime=[[1, 3.0, 0.1], [4, 1.0, 0.2]]),
    _row("b", "hill_climbing", 0, 2.0, budget=10, evaluations=10, anytime=[[2, 2.0, 0.1]]),
    _row("a", "hill_climbing", 1, 2.0, budget=10, evaluations=10, anytime=[[1, 2.0, 0.1]]),
    _row("b", "hill_climbing", 1, None, budget=10, evaluations=10, ok=False),
    # a method missing task b for its one seed
    _row("a", "random_search", 0, 1.5, budget=10, evaluations=10),
]


def _by(table, method, budget):
    return next(s for s in table if s.method == method and s.budget == budget)


def test_scores_are_geometric_means_of_reference_over_step_time_with_failures_charged():
    table = standings(ROWS)
    expert = _by(table, "expert", 0)
    assert expert.score == pytest.approx(math.sqrt(2.0 / 2.0 * 4.0 / 5.0))
    assert expert.interval == pytest.approx((expert.score, expert.score))  # the same on both seeds
    search = _by(table, "hill_climbing", 10)
    seed0, seed1 = math.sqrt(2.0 / 1.0 * 4.0 / 2.0), math.sqrt(2.0 / 2.0 * 4.0 / 100.0)  # failed: 100 s
    assert search.per_seed == pytest.approx([seed0, seed1])
    assert search.score == pytest.approx((seed0 + seed1) / 2)
    half = 12.706204736 * abs(seed0 - seed1) / math.sqrt(2) / math.sqrt(2)  # t(0.975, 1) * sd / sqrt(n)
    assert search.interval == pytest.approx((search.score - half, search.score + half))
    assert search.failures == 1
    assert (search.to_beat, search.beat) == (3, 2)  # seed 0 beat a (2.0) after 4 evaluations and b (4.0) after 2
    missing = _by(table, "random_search", 10)
    assert missing.score is None and missing.missing == 1


def test_the_order_is_by_score_within_each_budget():
    table = standings(ROWS)
    zero = [s.method for s in table if s.budget == 0]
    assert zero == ["expert", "heft"]  # heft: sqrt(2/3 * 4/4) = 0.816 < expert's 0.894
    assert [s.method for s in table if s.budget == 10] == ["hill_climbing", "random_search"]


def test_the_page_csv_and_plot(tmp_path):
    results = tmp_path / "rows.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    declared = tmp_path / "mine.json"
    declared.write_text(json.dumps({
        "name": "My placer", "methods": ["hill_climbing"], "authors": "me", "code": "https://example.org/code",
        "open_source": True, "deterministic": True, "hardware": "2-core VM", "wall_time": "search only",
        "date": "2026-12-05", "description": "hill climbing, again"}))
    assert main(["leaderboard", str(results), "-o", str(tmp_path / "board"), "--submission", str(declared)]) == 0
    page = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "## `mine`, budget 10" in page and "My placer: open source, deterministic" in page
    assert "incomplete (1 task-seed pairs missing)" in page
    lines = list(csv.DictReader(open(tmp_path / "board" / "leaderboard.csv")))
    assert {(r["budget"], r["method"]) for r in lines} == {("0", "expert"), ("0", "heft"), ("10", "hill_climbing"),
                                                           ("10", "random_search")}
    assert (tmp_path / "board" / "mine.png").stat().st_size > 0


@pytest.mark.parametrize("change, message", [
    ({"open_source": "yes"}, "open_source = 'yes'; expected whether that code is open source (bool)"),
    ({"methods": []}, "methods = []; expected the method labels"),
    ({"licence": "MIT"}, "unknown field(s) 'licence'"),
])
def test_declared_fields_are_read_strictly(tmp_path, change, message):
    fields = {"name": "x", "methods": ["m"], "authors": "a", "code": "", "open_source": False, "deterministic": True,
              "hardware": "h", "wall_time": "w", "date": "2026-12-05", "description": "d"}
    path = tmp_path / "sub.json"
    path.write_text(json.dumps({**fields, **change}))
    with pytest.raises(ResultsFormatError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        read_submission(path)
    path.write_text(json.dumps({k: v for k, v in fields.items() if k != "date"}))
    with pytest.raises(ResultsFormatError, match="missing field\\(s\\) 'date'"):
        read_submission(path)
