"""The benchmark harness: run, resume, validate, report, third-party methods, bad input."""
import json
import re

import numpy as np
import pytest

import placement_env as pe
from placement_env.errors import UnknownMethodError
from placement_env import harness
from placement_env.cli import main
from placement_env.cluster import load_cluster
from placement_env.harness import ResultsFormatError, UnknownSuiteError, read_rows, run_suite, validate
from placement_env.runtime.simulated import SIMULATOR_VERSION

METHODS = ["single_cpu", "single_gpu", "random_search", "thirdparty_agent:place"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    path = tmp_path_factory.mktemp("harness") / "results.jsonl"
    rows = run_suite("tiny", METHODS, path, budget=10, seeds=[0, 1], progress=False)
    assert len(rows) == 3 * len(METHODS) * 2
    return path


def test_rows_have_every_column_and_reproducible_numbers(results):
    rows = read_rows(results)
    assert all(set(harness.COLUMNS) <= set(row) for row in rows)
    search = [r for r in rows if r["method"] == "random_search"]
    assert all(r["evaluations"] == 10 and r["ok"] and r["runtime_s"] > 0 for r in search)
    single = [r for r in rows if r["method"] == "single_cpu"]
    assert all(r["evaluations"] == 0 and r["runtime_s"] >= r["lower_bound_s"] for r in single)
    assert rows[0]["versions"]["numpy"]
    assert validate(results, progress=False) == (len(rows), [])


def test_rerun_resumes_without_redoing(results):
    before = results.read_text()
    assert run_suite("tiny", METHODS, results, budget=10, seeds=[0, 1], progress=False) == []
    assert results.read_text() == before


def test_interrupted_run_resumes_and_loses_nothing(tmp_path):
    path = tmp_path / "r.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_suite("tiny", ["thirdparty_agent:interrupted_after_two"], path, budget=5, progress=False)
    kept = read_rows(path)
    assert len(kept) == 2
    with open(path, "a") as handle:
        handle.write('{"suite": "tiny", "task": "torn')  # killed mid-write
    with pytest.raises(ResultsFormatError, match=f"{re.escape(str(path))}:3: the last line is cut short"):
        read_rows(path)  # validate and report name it; only a resumed run cuts it
    with pytest.warns(UserWarning, match=f"{re.escape(str(path))}:3: cut a last line without a newline"):
        rows = run_suite("tiny", ["thirdparty_agent:interrupted_after_two"], path, budget=5, progress=False)
    assert len(rows) == 1 and rows[0]["task"] == "synthetic-tiny-2gpu"
    final = read_rows(path)
    assert final[:2] == kept and len(final) == 3


def test_validate_catches_a_tampered_runtime(results, tmp_path):
    lines = results.read_text().splitlines()
    row = json.loads(lines[5])
    row["runtime_s"] *= 0.9
    lines[5] = json.dumps(row)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n")
    checked, mismatches = validate(tampered, progress=False)
    assert checked == len(lines) and [m.line for m in mismatches] == [6]
    assert "the replay gives" in mismatches[0].reason
    assert main(["validate", str(tampered)]) == 1
    assert main(["validate", str(results)]) == 0



def test_report_gives_the_agent_at_one_budget_and_names_the_baseline_it_is_compared_with():
    def row(method, budget, evaluations, runtime_s, seed):
        return {"task": "t-2gpu", "method": method, "budget": budget, "evaluations": evaluations, "ok": True,
                "runtime_s": runtime_s, "failure": "", "lower_bound_s": 1.0, "cluster": "c", "benchmark": "b",
                "seed": seed}
    rows = [row("mincut", 0, 0, 5.0, 0), row("simulated_annealing_warm", 1000, 1000, 4.0, 0),
            row("mine:place", 100, 100, 4.4, 0), row("mine:place", 100, 100, 4.6, 1),
            row("mine:place", 1000, 1000, 3.8, 0), row("mine:place", 1000, 1000, 4.2, 1)]
    table = harness.markdown_table(rows)
    assert "| 3.8 (mine:place @ 1,000 evaluations); mean 4 over 2 seeds |" in table  # not over the 100-budget rows
    assert "| +5.0% (vs simulated_annealing_warm @ 1,000 evaluations, 4) |" in table
    zero_shot = harness.markdown_table([row("mincut", 0, 0, 5.0, 0), row("mine:place", 0, 0, 4.5, 0)])
    assert "| 4.5 (mine:place) |" in zero_shot and "| +10.0% (vs mincut, 5) |" in zero_shot

def test_report_table_and_plots(results, tmp_path):
    path = harness.write_report(results, tmp_path / "report")
    text = path.read_text()
    assert ("| task | 1 CPU | 1 GPU | Random search | best agent | lower bound | best found vs bound | agent vs best "
            "baseline |") in text
    rows = [r for r in read_rows(results) if r["method"] == "thirdparty_agent:place" and r["task"] == "synthetic-tiny-2gpu"]
    mean = sum(r["runtime_s"] for r in rows) / 2
    assert f"{min(r['runtime_s'] for r in rows):.3g} (thirdparty_agent:place @ 10 evaluations); mean {mean:.3g} over 2 seeds" in text
    assert (tmp_path / "report" / "bars.png").stat().st_size > 10_000
    assert len(list((tmp_path / "report").glob("gantt-*.png"))) == 3
    assert "## Methods at equal budgets" in text and "| random_search | 10 | 2 |" in text
    assert (tmp_path / "report" / "anytime.png").stat().st_size > 10_000


def test_rows_keep_the_anytime_record_of_searching_methods(results):
    for row in read_rows(results):
        trace = row["anytime"]
        if row["evaluations"] == 0:
            assert trace == []
            continue
        evaluations, runtimes = [t[0] for t in trace], [t[1] for t in trace]
        assert evaluations == sorted(evaluations) and evaluations[-1] <= row["evaluations"] <= row["budget"]
        assert runtimes == sorted(runtimes, reverse=True)  # each entry is an improvement
        if row["ok"]:
            assert runtimes[-1] <= row["runtime_s"] * (1 + 1e-12) or row["method"] == "thirdparty_agent:place"


def test_leaderboard_groups_by_budget_and_counts_evaluations_to_beat_the_expert():
    from placement_env.harness.leaderboard import budget_pivot, evaluations_to_beat, leaderboard_table

    def row(method, seed, budget, runtime, evaluations, anytime):
        return {"task": "t", "method": method, "seed": seed, "budget": budget, "runtime_s": runtime, "ok": True,
                "evaluations": evaluations, "wall_s": 1.0, "lower_bound_s": 0.5, "anytime": anytime}

    rows = [row("expert", 0, 100, 2.0, 0, []),
            row("sa", 0, 100, 1.5, 100, [[1, 3.0, 0.1], [40, 1.9, 0.5], [90, 1.5, 0.9]]),
            row("sa", 1, 100, 1.7, 100, [[1, 3.0, 0.1], [60, 1.7, 0.6]]),
            row("sa", 0, 1000, 1.2, 1000, [[1, 3.0, 0.1], [10, 1.2, 0.2]])]
    assert evaluations_to_beat(rows[1], 2.0) == 40 and evaluations_to_beat(rows[1], 1.0) is None
    table = leaderboard_table(rows)
    assert "| t | expert | heuristic | 1 | 2 (2-2) | +0.0% |" in table
    assert "| t | sa | 100 | 2 | 1.6 (1.5-1.7) | +20.0% | 100 | 1 | 50 (2/2) |" in table
    assert "| t | sa | 1,000 | 1 | 1.2 (1.2-1.2) | +40.0% | 1,000 | 1 | 10 (1/1) |" in table
    pivot = budget_pivot(rows, ["sa"], [100, 1000])
    assert "| t | 2 | 1.6 (2) | **1.2 (1)** |" in pivot


def test_method_errors_are_recorded_and_the_run_goes_on(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = run_suite("tiny", ["thirdparty_agent:broken", "single_gpu"], path, budget=3, progress=False)
    broken = [r for r in rows if r["method"] == "thirdparty_agent:broken"]
    assert len(broken) == 3 and all(r["failure"] == "method_error" and "always fails" in r["message"] for r in broken)
    assert all(r["ok"] for r in rows if r["method"] == "single_gpu")
    assert validate(path, progress=False)[1] == []


def test_infrastructure_failures_are_recorded_apart_and_redone_by_a_resumed_run(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = run_suite("tiny", ["thirdparty_agent:machinery_fails_once"], path, budget=3, progress=False)
    failed = [r for r in rows if not r["ok"]]
    assert len(failed) == 1 and failed[0]["failure"] == "infrastructure" and "pid 4242" in failed[0]["message"]
    assert "nothing was charged" in failed[0]["message"]
    again = run_suite("tiny", ["thirdparty_agent:machinery_fails_once"], path, budget=3, progress=False)
    assert [(r["task"], r["ok"]) for r in again] == [(failed[0]["task"], True)]  # only that one is redone
    assert run_suite("tiny", ["thirdparty_agent:machinery_fails_once"], path, budget=3, progress=False) == []


def test_problem_charges_nothing_for_an_infrastructure_failure(tiny, paper2):
    from placement_env.placement import Measurement

    class Broken:  # a runtime whose machinery fails (what the measured runtime returns after its retries)
        def __call__(self, placement):
            return Measurement(runtime_s=float("nan"), ok=False, failure="infrastructure", message="driver hung")

        def batch(self, placements):
            return [self(p) for p in placements]

    problem = pe.Problem(graph=tiny, cluster=paper2, evaluator=Broken(), budget=5)
    placement = np.zeros(tiny.n_groups, dtype=int)
    with pytest.raises(pe.InfrastructureError, match="machinery failed, not the placement: driver hung") as error:
        problem.evaluate(placement)
    assert error.value.measurement.failure == "infrastructure"
    with pytest.raises(pe.InfrastructureError):
        problem.evaluate_batch([placement, placement])
    assert problem.evaluations == 0 and problem.best is None


def test_unknown_suite_and_method(tmp_path):
    with pytest.raises(UnknownSuiteError, match="unknown suite 'papers'; expected one of 'paper', 'paper-k80', 'tiny'"):
        run_suite("papers", ["single_gpu"], tmp_path / "r.jsonl")
    with pytest.raises(UnknownMethodError, match="unknown method 'scotsh'"):
        run_suite("tiny", ["scotsh"], tmp_path / "r.jsonl")
    with pytest.raises(UnknownMethodError, match="cannot import nosuchpackage:place"):
        run_suite("tiny", ["nosuchpackage:place"], tmp_path / "r.jsonl")
    assert not (tmp_path / "r.jsonl").exists()
    assert main(["run", "--suite", "papers", "-o", str(tmp_path / "r.jsonl")]) == 2


def test_bad_results_files_are_specific_errors_and_untouched(results, tmp_path):
    rows = results.read_text().splitlines()
    row = json.loads(rows[0])
    del row["seed"]
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps(row) + "\n")
    before = missing.read_text()
    with pytest.raises(ResultsFormatError, match="missing column\\(s\\) seed"):
        run_suite("tiny", ["single_gpu"], missing, progress=False)
    with pytest.raises(ResultsFormatError, match="missing column"):
        validate(missing, progress=False)
    assert missing.read_text() == before
    row = json.loads(rows[0])
    row["placement"] = row["placement"][:-1]
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps(row) + "\n")
    with pytest.raises(ResultsFormatError, match="short.jsonl:1: the row of task .*placement has shape"):
        validate(short, progress=False)
    assert short.read_text() == json.dumps(row) + "\n"


def test_fabricated_rows_and_unreadable_files_are_refused(results, tmp_path, capsys):
    good = json.loads(results.read_text().splitlines()[0])
    cases = {
        "no placement": ({"placement": [], "ok": True, "runtime_s": 1e-6}, "ok is true but the row has no placement"),
        "over budget": ({"evaluations": good["budget"] + 1}, "exceeds the budget"),
        "float seed": ({"seed": 0.5}, "seed = 0.5; expected a non-negative integer"),
        "unknown runtime": ({"runtime": "oracle"}, "runtime = 'oracle'; expected one of sim"),
        "string ok": ({"ok": "yes"}, "ok = 'yes'; expected true or false"),
    }
    for name, (change, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps({**good, **change}) + "\n")
        with pytest.raises(ResultsFormatError, match=re.escape(message)):
            validate(path, progress=False)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(256)))
    for path, message in ((tmp_path / "absent.jsonl", ": no such results file"),
                          (empty, ": the results file has no rows"), (binary, ":1: not a results file (binary")):
        assert main(["validate", str(path)]) == 2
        assert f"{path}{message}" in capsys.readouterr().err
        assert main(["report", str(path), "-o", str(tmp_path / "out")]) == 2
        assert f"{path}{message}" in capsys.readouterr().err


def test_run_refuses_a_file_that_is_not_a_results_file_and_leaves_it_whole(tmp_path, capsys):
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4 + b"\x00\xff no newline at the end")
    text = tmp_path / "notes.txt"
    text.write_text("my notes, no newline at the end")
    for path, message in ((binary, "model.bin:1: not a results file (binary"), (text, "notes.txt:1: not JSON")):
        before = path.read_bytes()
        with pytest.raises(ResultsFormatError, match=re.escape(message)):
            run_suite("tiny", ["single_gpu"], path, progress=False)
        assert main(["run", "--suite", "tiny", "--methods", "single_gpu", "-o", str(path)]) == 2
        assert message in capsys.readouterr().err
        assert path.read_bytes() == before


def test_report_file_names_stay_in_the_report_folder(results, tmp_path):
    from placement_env.output_paths import file_name_part

    assert file_name_part("x/../../escaped") == "x~2f..~2f..~2fescaped" and file_name_part("a/b") == "a~2fb"
    assert file_name_part("../..") == "~2e.~2f.." and file_name_part(".hidden") == "~2ehidden"
    assert file_name_part("") == "~" and file_name_part("rnnlm-tiny-2gpu") == "rnnlm-tiny-2gpu"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps({**row, "task": "x/../../escaped"}) + "\n" for row in rows
                                if row["task"] == "rnnlm-tiny-2gpu"))
    out = tmp_path / "deep" / "report"
    harness.write_report(tampered, out)
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    assert all(str(p).startswith(("deep/report/", "tampered")) for p in written), written


def test_a_second_run_on_the_same_results_file_is_refused_not_duplicated(tmp_path):
    from placement_env.errors import ResultsBusyError
    from placement_env.harness.results import results_lock

    path = tmp_path / "r.jsonl"
    with results_lock(path):
        with pytest.raises(ResultsBusyError, match=f"{path}: another run \\(pid \\d+\\) is writing"):
            run_suite("tiny", ["single_gpu"], path, progress=False)
    assert not path.exists()
    assert len(run_suite("tiny", ["single_gpu"], path, progress=False)) == 3  # the lock went with the first holder


def test_measured_options_are_checked_when_the_env_is_made():
    import gymnasium as gym

    with pytest.raises(ValueError, match="measured_options are for runtime='measured', not 'sim'"):
        gym.make("DevicePlacement-Tiny-v0", measured_options={"steps": 3})
    with pytest.raises(ValueError, match="unknown key\\(s\\) 'stepz'; accepted: steps, warmup"):
        gym.make("DevicePlacement-Measured-v0", measured_options={"stepz": 3})


def test_validate_reports_rows_from_another_simulator_or_cluster_definition_as_stale(results, tmp_path, capsys):
    lines = results.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["versions"]["simulator"] == str(SIMULATOR_VERSION)
    assert rows[0]["versions"]["cluster"] == load_cluster(rows[0]["cluster"]).digest
    rows[1]["versions"]["simulator"] = "1"
    rows[2]["versions"]["cluster"] = "0123456789abcdef"
    rows[2]["runtime_s"] *= 2  # a stale row is not replayed, so its runtime is not judged
    del rows[3]["versions"]["simulator"], rows[3]["versions"]["cluster"]  # from before versions: replayed
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked, mismatches = validate(old, progress=False)
    assert checked == len(rows) - 2 and [(m.line, m.stale) for m in mismatches] == [(2, True), (3, True)]
    assert "simulator version 1; this is version" in mismatches[0].reason
    assert "now defined differently" in mismatches[1].reason
    assert main(["validate", str(old)]) == 0
    assert "2 rows come from another simulator version or cluster definition" in capsys.readouterr().out


def test_a_row_is_stale_only_if_a_later_simulator_change_concerns_its_cluster(monkeypatch):
    from placement_env.runtime import simulated

    assert max(simulated.VERSION_CHANGES) == SIMULATOR_VERSION
    paper, local = load_cluster("paper-2gpu"), load_cluster("local:2")
    assert not simulated.model_changed_since(str(SIMULATOR_VERSION), local)
    # a next version that changes only host-transfer clusters leaves the other rows replayable
    monkeypatch.setattr(simulated, "SIMULATOR_VERSION", SIMULATOR_VERSION + 1)
    monkeypatch.setitem(simulated.VERSION_CHANGES, SIMULATOR_VERSION + 1, "host_transfer")
    current = str(SIMULATOR_VERSION)
    assert not simulated.model_changed_since(current, paper) and simulated.model_changed_since(current, local)
    for version in ("1", "0", str(SIMULATOR_VERSION + 2), "two"):  # 2 changed every cluster; unknown: stale
        assert simulated.model_changed_since(version, paper), version


def test_validate_skips_rows_it_cannot_replay_locally_and_says_why(results, tmp_path, capsys):
    """A results file is third-party input: a row measured on a remote TF cluster is not replayed
    (nothing connects out), nor one on a cluster without local workers or one that cannot be loaded."""
    import time

    remote = json.loads(load_cluster("paper-2gpu").to_json())
    remote.update(name="theirs", remote_target="grpc://10.255.0.1:2222", remote_jobs={"worker": ["10.255.0.1:2222"]})
    remote_path = tmp_path / "theirs.json"
    remote_path.write_text(json.dumps(remote))
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    rows[1].update(cluster=str(remote_path), runtime="measured", versions={})
    rows[2].update(cluster="paper-2gpu", runtime="measured")
    rows[3].update(cluster=str(tmp_path / "absent.json"), versions={})
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    start = time.monotonic()
    checked, mismatches = validate(path, progress=False)
    assert time.monotonic() - start < 60  # before: a connection attempt about once a second, for minutes
    assert checked == len(rows) - 3 and [(m.line, m.skipped, m.failed) for m in mismatches] == [
        (2, True, False), (3, True, False), (4, True, False)]
    assert "remote TF cluster at grpc://10.255.0.1:2222" in mismatches[0].reason
    assert "has no local TF workers" in mismatches[1].reason
    assert "cannot be loaded here: unknown cluster" in mismatches[2].reason
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "line 2 (task '" in out and "skipped, not replayed: measured on the remote TF cluster" in out
    assert "3 rows skipped (not replayable here, see above)" in out
    with pytest.raises(ValueError, match="row_timeout_s = 0; expected a finite number > 0 \\(seconds\\) or None"):
        validate(path, row_timeout_s=0, progress=False)


@pytest.mark.slow
def test_validate_limits_each_measured_replay(tmp_path):
    """A measured replay on local workers past the per-row limit is skipped, named, not judged."""
    from placement_env import load_benchmark
    from placement_env.harness.results import versions

    row = {"suite": "x", "task": "rnnlm-tiny-local1", "benchmark": "rnnlm-tiny", "cluster": "local:1",
           "runtime": "measured", "method": "single_cpu", "seed": 0, "budget": 1,
           "placement": [0] * load_benchmark("rnnlm-tiny").n_groups, "runtime_s": 0.01, "ok": True, "failure": "",
           "message": "", "evaluations": 0, "wall_s": 0.0, "lower_bound_s": 0.0,
           "versions": versions(load_cluster("local:1"))}
    path = tmp_path / "measured.jsonl"
    path.write_text(json.dumps(row) + "\n")
    checked, mismatches = validate(path, row_timeout_s=1e-3, progress=False)
    assert checked == 0 and len(mismatches) == 1 and mismatches[0].skipped, mismatches
    assert "the replay ran past its time limit of 0.001 s" in mismatches[0].reason


def test_validate_skips_rows_that_record_a_failure_of_the_machinery(results, tmp_path):
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    rows[0].update(ok=False, failure="infrastructure", runtime_s=None, message="worker died")
    path = tmp_path / "infra.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked, mismatches = validate(path, progress=False)
    assert checked == len(rows) - 1 and [(m.line, m.skipped) for m in mismatches] == [(1, True)]
    assert "measuring machinery" in mismatches[0].reason


def test_paper_k80_suite_is_the_paper_tasks_on_the_machine_as_built():
    from placement_env.harness import load_suite
    paper, k80 = load_suite("paper"), load_suite("paper-k80")
    assert [(t.benchmark, t.gpus) for t in k80] == [(t.benchmark, t.gpus) for t in paper]
    assert {t.cluster for t in k80} == {"k80-2gpu", "k80-4gpu"}
    assert all(t.cluster == f"k80-{t.gpus}gpu" and t.name == f"{t.benchmark}-k80-{t.gpus}gpu" for t in k80)
    assert [(t.name, t.cluster) for t in load_suite("dlrm")] == [("dlrm-k80-2gpu", "k80-2gpu"),
                                                                  ("dlrm-k80-4gpu", "k80-4gpu")]
