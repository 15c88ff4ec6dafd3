"""experiments/measured_drift.py on hand-made rows: the drift in seconds and over the anchor, by hand."""
from __future__ import annotations

import json

import pytest

from experiments.measured_drift import main


def row(method, runtime, anchor=None):
    out = {"suite": "placebench-v1/measured", "task": "t@local:2", "benchmark": "rnnlm-tiny", "cluster": "local:2",
           "runtime": "measured", "method": method, "method_args": {}, "seed": 0, "budget": 0,
           "placement": [0, 0] if method == "single_cpu" else [0, 1], "runtime_s": runtime, "ok": True,
           "failure": "", "message": "", "evaluations": 0, "wall_s": 1.0, "lower_bound_s": 0.001, "versions": {},
           "anytime": []}
    return out if anchor is None else {**out, "anchor_s": anchor}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_drift_in_seconds_and_over_the_anchor(tmp_path, capsys):
    then = write(tmp_path / "then.jsonl", [row("single_cpu", 0.010), row("metis", 0.015)])
    # twice as slow now; METIS's ratio to one worker 1.5 then, 1.65 now (+10%)
    now = write(tmp_path / "now.jsonl", [row("single_cpu", 0.020, 0.020), row("metis", 0.033, 0.020)])
    assert main([str(now), "--against", str(then)]) == 0
    out = capsys.readouterr().out
    assert "| t@local:2 | metis | 2.20 | 1.500 | 1.650 | +10.0% |" in out
    assert "| t@local:2 | single_cpu | 2.00 | 1.000 | 1.000 | +0.0% |" in out
    assert "in seconds (other methods than single_cpu): median 120%, largest 120%" in out
    assert "over the anchor measured beside each row: median 5%, largest 10%" in out


def test_rows_without_anchors_or_files_are_refused(tmp_path, capsys):
    then = write(tmp_path / "then.jsonl", [row("single_cpu", 0.010)])
    now = write(tmp_path / "now.jsonl", [row("single_cpu", 0.020)])
    for argv, message in (([str(now), "--against", str(then)], "no (task, method) has anchored rows"),
                          ([str(tmp_path / "absent.jsonl")], "absent.jsonl: no such file")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err
