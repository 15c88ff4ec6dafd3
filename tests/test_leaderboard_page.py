"""``placement-env leaderboard``: the page, CSV and plots of results files (a tiny real run and hand-made rows), the
submissions' declared fields read strictly and tied to the rows, and clear errors for bad input."""
from __future__ import annotations

import csv
import json
import math
import os
import re

import pytest

from placement_env.cli import main
from placement_env.errors import OutputPathError, ResultsFormatError
from placement_env.harness import read_submission, run_suite, write_leaderboard
from placement_env.harness.leaderboard_page import plot_names, read_leaderboard_rows, ships_with_project
from placement_env.harness.results import read_rows
from placement_env.harness.suites import Task

from test_score import HEURISTICS, SEARCH, row

DECLARED = {"name": "My placer", "methods": ["mypkg.placer:place@steps=3"], "authors": "A. Author",
            "code": "https://example.org/placer", "open_source": True, "deterministic": False,
            "hardware": "2-core VM", "wall_time": "search only", "date": "2026-12-05",
            "description": "a search, again"}


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _write_json(path, data):
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Real rows: two tiny graphs on paper-2gpu, three heuristics and a search at budgets 0 and 10, seeds 0-1."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.jsonl"
    tasks = [Task("rnnlm-tiny@paper-2gpu", "rnnlm-tiny", "paper-2gpu"), Task("nmt-tiny@paper-2gpu", "nmt-tiny",
                                                                             "paper-2gpu")]
    run_suite("mine", ["single_gpu", "heft", "expert", "hill_climbing"], path, tasks=tasks, budget=[0, 10],
              seeds=[0, 1], progress=False)
    return path


def test_a_real_run_scores_as_its_rows_say(tiny_run, tmp_path):
    rows = read_rows(tiny_run)
    page = write_leaderboard([tiny_run], tmp_path / "board")
    best = {}
    for r in rows:
        if r["method"] in ("single_gpu", "heft", "expert") and r["ok"]:
            best[r["task"]] = min(best.get(r["task"], math.inf), r["runtime_s"])
    by_seed = {s: [best[r["task"]] / r["runtime_s"] for r in rows
                   if r["method"] == "hill_climbing" and r["budget"] == 10 and r["seed"] == s] for s in (0, 1)}
    expected = sum(math.sqrt(a * b) for a, b in by_seed.values()) / 2
    lines = {(r["suite"], r["budget"], r["method"]): r for r in csv.DictReader(open(tmp_path / "board" /
                                                                                    "leaderboard.csv"))}
    assert float(lines[("mine", "10", "hill_climbing")]["score"]) == pytest.approx(expected)
    assert float(lines[("mine", "0", "heft")]["score"]) == pytest.approx(  # heft is the reference of both tasks
        math.prod(best[t] / r["runtime_s"] for t in best for r in rows
                  if r["method"] == "heft" and r["seed"] == 0 and r["budget"] == 0 and r["task"] == t) ** 0.5)
    text = page.read_text()
    assert "### `mine`, budget 10" in text and "![score against budget, mine](mine.png)" in text
    assert (tmp_path / "board" / "mine.png").stat().st_size > 0
    assert lines[("mine", "0", "hill_climbing")]["submission"] == "built in"


def test_the_cli_writes_page_csv_and_plot_with_declared_fields(tmp_path, capsys):
    mine = [row(t, "mypkg.placer:place", s, 1.0, budget=10, evaluations=10, args={"steps": 3},
                anytime=[[5, 1.0, 0.1]]) for t in "ab" for s in (0, 1)]
    built_in = _write_rows(tmp_path / "built_in.jsonl", HEURISTICS + SEARCH)
    submitted = _write_rows(tmp_path / "mine.jsonl", mine)
    declared = _write_json(tmp_path / "mine.json", DECLARED)
    assert main(["leaderboard", str(built_in), str(submitted), "-o", str(tmp_path / "board"),
                 "--submission", str(declared)]) == 0
    page = (tmp_path / "board" / "leaderboard.md").read_text()
    assert capsys.readouterr().out == page + "\n"  # the command prints the page
    rank1 = next(line for line in page.splitlines() if line.startswith("| 1 | `mypkg.placer:place@steps=3`"))
    score = math.sqrt(2.0 / 1.0 * 4.0 / 1.0)
    assert f"{score:.3f} [{score:.3f}, {score:.3f}]" in rank1
    assert "5 (4 of 4 rows)" in rank1
    assert "My placer: open source / nondeterministic / [code](<https://example.org/placer>)" in rank1
    assert "## Submissions" in page and "| 2-core VM | search only | 2026-12-05 | a search, again |" in page
    assert "| `expert` |" in page and "built in |" in page
    table = list(csv.DictReader(open(tmp_path / "board" / "leaderboard.csv")))
    assert {(r["budget"], r["method"]) for r in table} == {("0", "expert"), ("0", "heft"), ("10", "hill_climbing"),
                                                           ("10", "mypkg.placer:place@steps=3")}
    ours = next(r for r in table if r["method"] == "mypkg.placer:place@steps=3")
    assert (ours["submission"], ours["open_source"], ours["deterministic"]) == ("My placer", "True", "False")


def test_no_score_and_one_seed_are_said_on_the_page(tmp_path):
    rows = HEURISTICS + SEARCH[:3] + [row("a", "m_topo", 0, 4.0), row("b", "m_topo", 0, 8.0)]
    page = write_leaderboard([_write_rows(tmp_path / "r.jsonl", rows)], tmp_path / "board").read_text()
    assert "no score: 1 task(s) missing (1 task-seed rows)" in page
    assert "(1 seed: no interval)" in page


def test_text_from_results_files_cannot_break_the_page(tmp_path):
    odd = "mypkg.placer:place"
    rows = HEURISTICS + [row(t, odd, s, 2.0, args={"mode": "a|b`c"}) for t in "ab" for s in (0, 1)]
    page = write_leaderboard([_write_rows(tmp_path / "r.jsonl", rows)], tmp_path / "board").read_text()
    line = next(line for line in page.splitlines() if "mode=" in line and line.startswith("|"))
    assert len(re.findall(r"(?<!\\)\|", line)) == 9  # eight cells: the label's | and ` are escaped
    assert "not declared" in line


def test_which_methods_ship_with_the_project():
    assert ships_with_project("hill_climbing@max_groups=2") and ships_with_project("expert_tf1")
    assert ships_with_project("agents.gnn_placer:place_zero_shot") and ships_with_project("agents.gnn_placer:place@x=1")
    assert not ships_with_project("mypkg.placer:place@steps=3") and not ships_with_project("agentsmith:place")


def test_plot_names_are_readable_and_distinct():
    assert plot_names(["placebench-v1/paper", "mine"]) == {"placebench-v1/paper": "placebench-v1_paper.png",
                                                            "mine": "mine.png"}
    assert plot_names(["a/b", "a_b"]) == {"a/b": "a~2fb.png", "a_b": "a_b.png"}  # both would be a_b.png


@pytest.mark.parametrize("change, message", [
    ({"open_source": "yes"}, "open_source = 'yes'; expected whether that code is open source (true or false)"),
    ({"methods": []}, "methods = []; expected the method labels"),
    ({"methods": ["m", "m"]}, "lists a method twice"),
    ({"licence": "MIT"}, "unknown field(s) 'licence'"),
    ({"date": "5 Dec 2026"}, "date = '5 Dec 2026'; expected when the rows were made, as YYYY-MM-DD"),
    ({"authors": " "}, "authors = ' '; expected who made it (a string, not empty)"),
    ({"code": "example.org/x"}, "code = 'example.org/x'; expected an http(s) link"),
    ({"code": ""}, "open_source is true but code is ''"),
])
def test_declared_fields_are_read_strictly(tmp_path, change, message):
    path = _write_json(tmp_path / "sub.json", {**DECLARED, **change})
    with pytest.raises(ResultsFormatError, match=re.escape(f"{path}: ") + ".*" + re.escape(message)):
        read_submission(path)


def test_a_declared_file_missing_fields_or_not_an_object(tmp_path):
    path = _write_json(tmp_path / "sub.json", {k: v for k, v in DECLARED.items() if k != "date"})
    with pytest.raises(ResultsFormatError, match=r"missing field\(s\) 'date'; a submission has exactly the fields"):
        read_submission(path)
    path.write_text("[1, 2]")
    with pytest.raises(ResultsFormatError, match="a JSON list; expected a JSON object"):
        read_submission(path)
    path.write_text("{")
    with pytest.raises(ResultsFormatError, match="not JSON"):
        read_submission(path)
    with pytest.raises(ResultsFormatError, match="nowhere.json: cannot read"):
        read_submission(tmp_path / "nowhere.json")
    assert read_submission(_write_json(tmp_path / "ok.json", DECLARED))["file"] == str(tmp_path / "ok.json")


def test_declared_methods_must_be_in_the_rows_and_declared_once(tmp_path):
    results = _write_rows(tmp_path / "r.jsonl", HEURISTICS)
    typo = _write_json(tmp_path / "typo.json", {**DECLARED, "methods": ["heft@x=1"]})
    with pytest.raises(ResultsFormatError, match=r"methods lists 'heft@x=1', which no row .* \(nearest: 'heft'"):
        write_leaderboard([results], tmp_path / "board", submissions=[typo])
    first = _write_json(tmp_path / "first.json", {**DECLARED, "methods": ["heft"]})
    second = _write_json(tmp_path / "second.json", {**DECLARED, "methods": ["heft", "expert"]})
    with pytest.raises(ResultsFormatError, match=f"{re.escape(str(second))}: method 'heft' is declared by "
                                                 f"{re.escape(str(first))} too"):
        write_leaderboard([results], tmp_path / "board", submissions=[first, second])
    assert not (tmp_path / "board").exists()  # inputs are checked before anything is written


def test_a_row_in_two_files_is_refused(tmp_path):
    one = _write_rows(tmp_path / "one.jsonl", HEURISTICS)
    two = _write_rows(tmp_path / "two.jsonl", HEURISTICS[:1])
    with pytest.raises(ResultsFormatError, match=r"two.jsonl: the row of suite 'mine', task 'a', method 'expert', "
                                                 r"seed 0, budget 0 is in .*one.jsonl too"):
        read_leaderboard_rows([one, two])
    with pytest.raises(ValueError, match="no results files given"):
        read_leaderboard_rows([])


def test_bad_input_gets_clear_errors_from_the_command(tmp_path, capsys):
    results = _write_rows(tmp_path / "r.jsonl", HEURISTICS)
    assert main(["leaderboard", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "b")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**HEURISTICS[0], "seed": "zero"}) + "\n")
    assert main(["leaderboard", str(bad), "-o", str(tmp_path / "b")]) == 2
    assert re.search(r"bad.jsonl:1: seed = 'zero'; expected", capsys.readouterr().err)
    (tmp_path / "afile").write_text("")
    assert main(["leaderboard", str(results), "-o", str(tmp_path / "afile")]) == 2
    assert "argument -o/--out-dir: " in capsys.readouterr().err
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert main(["leaderboard", str(results), "-o", str(locked / "board")]) == 2
        assert "is not writable" in capsys.readouterr().err
    os.symlink(tmp_path, tmp_path / "link")
    with pytest.raises(OutputPathError, match="symbolic link"):
        write_leaderboard([results], tmp_path / "link")


def test_a_table_measured_on_two_machines_says_so(tmp_path):
    from test_score import measured, on

    xeon = {"cpu": "Intel Xeon", "cpus": "2", "vector": "amx_tile"}
    rows = [on(measured(t, "single_cpu", s, 0.010, 0.010, placement=(0, 0))) for t in "ab" for s in (0, 1)]
    rows += [on(measured(t, "hill_climbing", s, 0.009, 0.010), digest="38a2bff2c755b4a9", host=xeon)
             for t in "ab" for s in (0, 1)]
    page = write_leaderboard([_write_rows(tmp_path / "r.jsonl", rows)], tmp_path / "board").read_text()
    assert "**Measured on more than one machine.**" in page
    assert "- `local:2 4ce531de`: `single_cpu`" in page
    assert "- `local:2 38a2bff2` (host: Intel Xeon, 2 cpus, amx_tile): `hill_climbing`" in page
    epyc = {"cpu": "AMD EPYC", "cpus": "2", "vector": "avx512f"}  # another host, same memory: same digest
    rows += [on(measured(t, "random_search", s, 0.009, 0.010), digest="38a2bff2c755b4a9", host=epyc)
             for t in "ab" for s in (0, 1)]
    rows += [on(measured(t, "brkga", s, 0.009, 0.010), digest="38a2bff2c755b4a9", host=(xeon, epyc)[s])
             for t in "ab" for s in (0, 1)]
    page = write_leaderboard([_write_rows(tmp_path / "r.jsonl", rows)], tmp_path / "board").read_text()
    assert "- `local:2 38a2bff2` (host: Intel Xeon, 2 cpus, amx_tile): `hill_climbing`\n" in page
    assert "- `local:2 38a2bff2` (host: AMD EPYC, 2 cpus, avx512f): `random_search`\n" in page
    assert ("- `local:2 38a2bff2` (rows from 2 hosts: AMD EPYC, 2 cpus, avx512f; Intel Xeon, 2 cpus, amx_tile): "
            "`brkga`\n") in page
    table = {r["method"]: r for r in csv.DictReader(open(tmp_path / "board" / "leaderboard.csv"))}
    assert table["single_cpu"]["machines"] == "local:2 4ce531de"
    one_machine = [r for r in rows if r["method"] == "single_cpu"]
    page = write_leaderboard([_write_rows(tmp_path / "one.jsonl", one_machine)], tmp_path / "one").read_text()
    assert "more than one machine" not in page
