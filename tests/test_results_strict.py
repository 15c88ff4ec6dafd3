"""The one results reader is strict: every bad row, torn line, duplicate or oversized file is a ResultsFormatError
naming the file and line; numeric flags of the command line are checked before any work; a method that cannot
run as configured gives a row that a rerun does again."""
import json
import math
import os
import re
import time

import pytest

from placement_env.cli import main
from placement_env.errors import MethodConfigError, ResultsFormatError
from placement_env.harness import read_rows, run_suite
from placement_env.harness import results as results_module
from placement_env.harness.results import ResultsWriter, read_results

GOOD = {"suite": "tiny", "task": "t-2gpu", "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "runtime": "sim",
        "method": "single_gpu", "seed": 0, "budget": 10, "placement": [1, 1], "runtime_s": 0.5, "ok": True,
        "failure": "", "message": "", "evaluations": 0, "wall_s": 0.1, "lower_bound_s": 0.2, "versions": {},
        "anytime": []}


def write_rows(path, *rows, end="\n"):
    path.write_text("\n".join(json.dumps(row) for row in rows) + end)
    return path


def one_line_error(capsys):
    err = capsys.readouterr().err
    assert err.startswith("placement-env: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_good_rows_load_and_failed_rows_may_have_no_runtime(tmp_path):
    failed = [{**GOOD, "seed": k, "ok": False, "failure": "oom", "runtime_s": value}
              for k, value in enumerate((None, math.nan, 3.5), 1)]
    path = write_rows(tmp_path / "r.jsonl", GOOD, *failed)
    found = read_results(path, must_exist=True)
    assert found.lines == [1, 2, 3, 4] and found.rows[0] == GOOD and found.torn_tail is None
    assert found.rows[1]["runtime_s"] is None and math.isnan(found.rows[2]["runtime_s"])


@pytest.mark.parametrize("runtime_s", [-1, 0, math.nan, math.inf, -math.inf, 1e300, 2e6, "1.0", True, None, 10**400])
def test_an_ok_row_needs_a_finite_positive_runtime_of_sane_size(tmp_path, capsys, runtime_s):
    path = write_rows(tmp_path / "r.jsonl", GOOD, {**GOOD, "seed": 1, "runtime_s": runtime_s})
    message = f"{path}:2: runtime_s = "
    with pytest.raises(ResultsFormatError, match=re.escape(message) + ".*expected a finite number > 0 and <= 1e\\+06"):
        read_rows(path)
    for command in (["validate", str(path)], ["report", str(path), "-o", str(tmp_path / "report")]):
        assert main(command) == 2
        assert message in one_line_error(capsys)
    assert not (tmp_path / "report" / "report.md").exists()


@pytest.mark.parametrize("change, message", [
    ({"method": ""}, "method = ''; expected a non-empty string"),
    ({"method": 3}, "method = 3; expected a non-empty string"),
    ({"task": None}, "task = None; expected a non-empty string"),
    ({"suite": ["tiny"]}, "suite = ['tiny']; expected a non-empty string"),
    ({"task": "\ud800"}, "task = '\\ud800' holds a lone surrogate"),
    ({"message": 1}, "message = 1; expected a string"),
    ({"seed": -1}, "seed = -1; expected a non-negative integer"),
    ({"seed": 1.0}, "seed = 1.0; expected a non-negative integer"),
    ({"budget": True}, "budget = True; expected a non-negative integer"),
    ({"placement": [0, -1]}, "placement = [0, -1]; expected a list of device indices"),
    ({"placement": "01"}, "placement = '01'; expected a list of device indices"),
    ({"lower_bound_s": math.nan}, "lower_bound_s = nan; expected a finite number >= 0 and <= 1e+06"),
    ({"lower_bound_s": -1.0}, "lower_bound_s = -1.0; expected a finite number >= 0"),
    ({"wall_s": math.inf}, "wall_s = inf; expected a finite number >= 0"),
    ({"versions": []}, "versions = []; expected a JSON object"),
    ({"cluster": ""}, "cluster = ''; expected a non-empty string"),
    ({"anytime": {}}, "anytime = {}; expected a list of [evaluations, runtime s, wall s]"),
    ({"anytime": [[1, 0.5]]}, "anytime[0] = [1, 0.5]; expected [evaluations, runtime s, wall s]"),
    ({"anytime": [[1, -0.5, 0.1]]}, "anytime[0][1] (runtime s) = -0.5; expected a finite number > 0"),
    ({"anytime": [[1.5, 0.5, 0.1]]}, "anytime[0][0] (evaluations) = 1.5; expected a non-negative integer"),
    ({"ok": False, "runtime_s": -1}, "runtime_s = -1; a row with ok false has null, NaN or a number >= 0"),
    ({"host": "xeon"}, "host = 'xeon'; expected a JSON object of names to strings"),
    ({"host": {"cpus": 2}}, "host = {'cpus': 2}; expected a JSON object of names to strings"),
    ({"ok": False, "runtime_s": "slow"}, "runtime_s = 'slow'; a row with ok false"),
])
def test_each_bad_value_is_named_with_its_file_and_line(tmp_path, change, message):
    path = write_rows(tmp_path / "r.jsonl", GOOD, {**GOOD, "seed": 1, **change})
    with pytest.raises(ResultsFormatError, match=re.escape(f"{path}:2: {message}")):
        read_rows(path)


def test_a_torn_last_line_is_named_by_validate_and_report_and_cut_only_by_a_resumed_run(tmp_path, capsys):
    path = write_rows(tmp_path / "r.jsonl", GOOD, {**GOOD, "seed": 1})
    with open(path, "a") as handle:
        handle.write('{"suite": "tiny", "task": "t-2gp')
    for command in (["validate", str(path)], ["report", str(path), "-o", str(tmp_path / "report")]):
        assert main(command) == 2
        assert f"{path}:3: the last line is cut short (no newline, not complete JSON)" in one_line_error(capsys)
    offset = sum(len(line) for line in path.read_bytes().splitlines(True)[:2])
    assert read_results(path, allow_torn_tail=True).torn_tail == (3, offset)
    with pytest.warns(UserWarning, match=re.escape(f"{path}:3: cut a last line")):
        ResultsWriter(path).close()
    assert path.read_text().count("\n") == 2 and len(read_rows(path)) == 2
    other = tmp_path / "notes.jsonl"  # a last line that is not the start of a row is not a torn row: not JSON
    other.write_text(json.dumps(GOOD) + "\nnot a row")
    with pytest.raises(ResultsFormatError, match=re.escape(f"{other}:2: not JSON")):
        read_results(other, allow_torn_tail=True)


def test_a_last_row_without_its_newline_is_read_and_appended_after(tmp_path):
    path = write_rows(tmp_path / "r.jsonl", GOOD, end="")
    assert read_rows(path) == [GOOD]
    with ResultsWriter(path) as writer:
        writer.append({**GOOD, "seed": 1})
    assert [row["seed"] for row in read_rows(path)] == [0, 1] and path.read_text().count("\n") == 2


def test_duplicate_rows_are_refused_at_read_and_at_write(tmp_path):
    path = write_rows(tmp_path / "r.jsonl", GOOD, {**GOOD, "seed": 1}, {**GOOD, "runtime_s": 0.4})
    with pytest.raises(ResultsFormatError, match=re.escape(
            f"{path}:3: a second row for suite 'tiny', task 't-2gpu', method 'single_gpu', seed 0, budget 10 (the "
            "first is on line 1)")):
        read_rows(path)
    # a row after an unfinished one of its key is its rerun: it takes the earlier one's place
    infra = {**GOOD, "ok": False, "failure": "infrastructure", "runtime_s": None, "placement": []}
    config = {**infra, "failure": "configuration"}
    rerun = write_rows(tmp_path / "rerun.jsonl", infra, {**GOOD, "seed": 1}, config, GOOD)
    found = read_results(rerun)
    assert found.lines == [2, 4] and found.rows == [{**GOOD, "seed": 1}, GOOD]
    with ResultsWriter(rerun) as writer:
        with pytest.raises(ResultsFormatError, match=re.escape(f"{rerun}: a row for suite 'tiny', task 't-2gpu', "
                                                               "method 'single_gpu', seed 0, budget 10 is already "
                                                               "there (line 4)")):
            writer.append(GOOD)
        writer.append({**config, "seed": 2})
        writer.append({**GOOD, "seed": 2})  # the rerun of an unfinished row
        with pytest.raises(ResultsFormatError, match="seed 2, budget 10 is already there .written by this run"):
            writer.append({**GOOD, "seed": 2})
    assert [row["seed"] for row in read_rows(rerun)] == [1, 0, 2]


def test_repeated_seeds_and_methods_are_refused_before_any_work(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    assert main(["run", "--suite", "tiny", "--methods", "single_gpu", "--seeds", "0", "0", "-o", str(path)]) == 2
    assert "--seeds 0 given more than once: give each once" in one_line_error(capsys)
    assert main(["run", "--suite", "tiny", "--methods", "single_gpu", "single_gpu", "-o", str(path)]) == 2
    assert "--methods single_gpu given more than once" in one_line_error(capsys)
    with pytest.raises(ValueError, match=re.escape("seeds=[0, 0]: 0 given more than once")):
        run_suite("tiny", ["single_gpu"], path, seeds=[0, 0], progress=False)
    with pytest.raises(ValueError, match=re.escape("methods=['heft', 'heft']: heft given more than once")):
        run_suite("tiny", ["heft", "heft"], path, progress=False)
    with pytest.raises(ValueError, match=re.escape("seeds=[-1]: seed -1; expected a non-negative integer")):
        run_suite("tiny", ["single_gpu"], path, seeds=[-1], progress=False)
    assert not path.exists()


def test_oversized_input_is_an_error_naming_the_file_not_a_memory_error(tmp_path, capsys, monkeypatch):
    start = time.monotonic()
    with pytest.raises(ResultsFormatError, match="/dev/zero:1: a line longer than 67,108,864 bytes"):
        read_rows("/dev/zero")
    assert main(["validate", "/dev/zero"]) == 2
    assert "/dev/zero:1: a line longer than" in one_line_error(capsys)
    assert time.monotonic() - start < 20
    sparse = tmp_path / "huge.jsonl"
    with open(sparse, "wb") as handle:
        handle.truncate(2**30 + 1)  # takes no disk
    with pytest.raises(ResultsFormatError, match=re.escape(f"{sparse}: 1,073,741,825 bytes; a results file is read "
                                                           "up to 1,073,741,824 bytes")):
        read_rows(sparse)
    monkeypatch.setattr(results_module, "MAX_FILE_BYTES", 100)  # a stream (a pipe) is counted as it is read
    read_end, write_end = os.pipe()
    os.write(write_end, b"\n" * 300)
    os.close(write_end)
    try:
        with pytest.raises(ResultsFormatError, match=f"/dev/fd/{read_end}: more than 100 bytes"):
            read_rows(f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
    with pytest.raises(ResultsFormatError, match=f"{tmp_path}: a folder, not a results file"):
        read_rows(tmp_path)


@pytest.mark.parametrize("argv, message", [
    (["validate", "r.jsonl", "--tolerance", "-1"], "--tolerance -1.0: expected a finite number >= 0"),
    (["validate", "r.jsonl", "--tolerance", "nan"], "--tolerance nan: expected a finite number >= 0"),
    (["validate", "r.jsonl", "--tolerance", "inf"], "--tolerance inf: expected a finite number >= 0"),
    (["validate", "r.jsonl", "--row-timeout", "0"], "--row-timeout 0.0: expected a finite number > 0"),
    (["validate", "r.jsonl", "--row-timeout", "nan"], "--row-timeout nan: expected a finite number > 0"),
    (["info", "rnnlm-tiny", "--top", "-5"], "--top -5: expected a non-negative integer"),
    (["info", "rnnlm-tiny", "--max-groups", "0"], "--max-groups 0: expected an integer >= 1"),
    (["run", "--seeds", "-1"], "--seeds -1: expected a non-negative integer"),
    (["run", "--seeds", "0", "-1"], "--seeds -1: expected a non-negative integer"),
    (["run", "--budget", "-1"], "--budget -1: expected a non-negative integer"),
    (["calibrate", "rnnlm-tiny", "-n", "3"], "-n/--placements 3: expected an integer >= 4"),
    (["calibrate", "rnnlm-tiny", "--seed", "-2"], "--seed -2: expected a non-negative integer"),
    (["fit-paper-machine", "--starts", "0"], "--starts 0: expected an integer >= 1"),
])
def test_numeric_flags_out_of_range_are_one_line_naming_the_flag_before_any_work(tmp_path, capsys, monkeypatch,
                                                                                 argv, message):
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    assert main(argv) == 2
    assert message in one_line_error(capsys)
    assert time.monotonic() - start < 30 and list(tmp_path.iterdir()) == []


def misconfigured(problem):
    """A harness method whose configuration ($MISCONFIGURED) is broken until it is unset."""
    from baselines.simple import single_gpu

    if os.environ.get("MISCONFIGURED"):
        raise MethodConfigError(f"$MISCONFIGURED={os.environ['MISCONFIGURED']}: not a setting")
    return single_gpu(problem)


def test_a_method_that_cannot_run_as_configured_is_redone_by_a_rerun(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    monkeypatch.setenv("MISCONFIGURED", "yes")
    rows = run_suite("tiny", ["test_results_strict:misconfigured"], path, budget=0, progress=False)
    assert len(rows) == 3 and all(r["failure"] == "configuration" and "$MISCONFIGURED=yes" in r["message"]
                                  for r in rows)
    assert run_suite("tiny", ["test_results_strict:misconfigured"], path, budget=0, progress=False) != []
    monkeypatch.delenv("MISCONFIGURED")
    fixed = run_suite("tiny", ["test_results_strict:misconfigured"], path, budget=0, progress=False)
    assert len(fixed) == 3 and all(r["ok"] for r in fixed)
    assert [r["ok"] for r in read_rows(path)] == [True] * 3  # the reruns took the unfinished rows' places
    assert run_suite("tiny", ["test_results_strict:misconfigured"], path, budget=0, progress=False) == []


def test_a_bad_gnn_placer_checkpoint_is_a_configuration_failure_a_rerun_redoes(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from agents.gnn_placer import CHECKPOINT_ENV

    path = tmp_path / "r.jsonl"
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    for checkpoint, message in ((tmp_path / "absent.pt", "no checkpoint at"), (corrupt, "is not a readable")):
        monkeypatch.setenv(CHECKPOINT_ENV, str(checkpoint))
        rows = run_suite("tiny", ["agents.gnn_placer:place_zero_shot"], path, budget=0, progress=False)
        assert len(rows) == 3 and all(r["failure"] == "configuration" and message in r["message"]
                                      and str(checkpoint) in r["message"] for r in rows), rows
    monkeypatch.delenv(CHECKPOINT_ENV)
    rows = run_suite("tiny", ["agents.gnn_placer:place_zero_shot"], path, budget=0, progress=False)
    assert len(rows) == 3 and all(r["failure"] != "configuration" and r["placement"] for r in rows)
    assert len(read_rows(path)) == 3
