"""Methods with arguments: the command-line spelling ``name@key=value,...`` and the Python one ``pe.method(name,
key=value)``, their checks against the method's signature before any run, the presets that replaced the named
wrappers, and the rows, resumes, replays and reports of parameterised methods."""
import json
import math
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import placement_env as pe
from placement_env import MethodArgumentError, MethodSpec, UnknownMethodError
from placement_env.cli import main
from placement_env.errors import ResultsFormatError
from placement_env.harness import read_rows, run_suite, validate
from placement_env.harness.leaderboard import leaderboard_rows
from placement_env.harness.report import summarise
from placement_env.harness.results import method_label, read_results
from placement_env.harness.runner import _method_specs

DOCS = Path(__file__).resolve().parents[1] / "docs"
STORED = ("paper_results.jsonl", "paper_k80_results.jsonl", "dlrm_results.jsonl", "generalisation_results.jsonl")


@pytest.mark.parametrize("text", [
    "hill_climbing",
    "hill_climbing@max_groups=2,start=best_heuristic",
    'thirdparty_agent:place@flag=true,none=null,number=1.5,quoted="1,2",text=a/b.c,values=[1,"x",{"k":[2]}]',
    'm:f@s="true"', 'm:f@s=""', 'm:f@s="with space"', "m:f@e=1e-07,neg=-3", 'm:f@s="é@=,"', "m:f@s=-x",
])
def test_the_command_line_spelling_round_trips(text):
    spec = MethodSpec.parse(text)
    assert str(spec) == text and MethodSpec.parse(str(spec)) == spec and hash(MethodSpec.parse(text)) == hash(spec)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert MethodSpec(spec.name, dict(spec.args)) == spec


def test_values_are_json_or_bare_words_and_keys_are_sorted():
    spec = MethodSpec.parse('m:f@a=1,b=1.0,c=true,d=null,e=word,f="1",g=[1,2],h={"k":1},i=-x')
    assert dict(spec.args) == {"a": 1, "b": 1.0, "c": True, "d": None, "e": "word", "f": "1", "g": [1, 2],
                               "h": {"k": 1}, "i": "-x"}
    assert type(spec.args["a"]) is int and type(spec.args["b"]) is float and spec.args["f"] == "1"
    labels = {str(MethodSpec.parse(f"m:f@a={value}")) for value in ("1", "1.0", "true", '"1"')}
    assert len(labels) == 4  # 1, 1.0, true and "1" are four arguments (1 == 1.0 == True in Python)
    assert MethodSpec.parse("m:f@b=2,a=1") == MethodSpec.parse("m:f@a=1,b=2")


@pytest.mark.parametrize("text, message", [
    ("hill_climbing@", "nothing after '@'"),
    ("@start=scratch", "no name before '@'"),
    ("hill_climbing@start", "'start' has no '='; write key=value"),
    ("hill_climbing@1x=2", "argument name '1x'; expected a Python identifier"),
    ("hill_climbing@start=", 'start: no value; write key=value (an empty string: key="")'),
    ("hill_climbing@start=a,start=b", "start given more than once"),
    ("hill_climbing@x=[1,2", "unbalanced quotes or brackets"),
    ('hill_climbing@x="open', "unbalanced quotes or brackets"),
    ("hill_climbing@x={bad}", "x={bad}: not a JSON value nor a bare word"),
    ("hill_climbing@x=a b", "x=a b: not a JSON value nor a bare word"),
    ("hill_climbing@x=NaN", "x=nan; expected a finite number"),
    ("hill_climbing@x=1e999", "x=inf; expected a finite number"),
])
def test_a_malformed_spec_names_what_is_wrong(text, message):
    with pytest.raises(MethodArgumentError, match=re.escape(message)):
        MethodSpec.parse(text)


def test_the_python_spelling_makes_the_same_spec():
    spec = pe.method("hill_climbing", start="best_heuristic", max_groups=2)
    assert spec == MethodSpec.parse("hill_climbing@max_groups=2,start=best_heuristic")
    assert pe.method("hill_climbing@start=best_heuristic", max_groups=2) == spec == pe.method(spec)
    with pytest.raises(MethodArgumentError, match="max_groups given twice"):
        pe.method("hill_climbing@max_groups=2", max_groups=3)
    warm = pe.method("simulated_annealing", initial_temperature=1)  # as the annotation takes it: a float
    assert type(warm.args["initial_temperature"]) is float and str(warm) == "simulated_annealing@initial_temperature=1.0"
    assert str(pe.method("thirdparty_agent:open_ended", anything=[1, (2, 3)])) == "thirdparty_agent:open_ended@anything=[1,[2,3]]"
    with pytest.raises(AttributeError, match="immutable"):
        spec.name = "brkga"
    with pytest.raises(TypeError):
        spec.args["max_groups"] = 3
    with pytest.raises(MethodArgumentError, match="expected a JSON value"):
        MethodSpec("m:f", {"x": object()})
    assert str(MethodSpec("m:f", {"n": np.int64(3), "x": np.float32(0.5)})) == "m:f@n=3,x=0.5"
    with pytest.raises(UnknownMethodError, match="unknown method 'hill_climbin@start=scratch'"):
        pe.method("hill_climbin@start=scratch")


@pytest.mark.parametrize("spec, message", [
    ("thirdparty_agent:best_of@tries=x", "tries=x; thirdparty_agent:best_of accepts an integer"),
    ("thirdparty_agent:best_of@spread=even", "spread=even; thirdparty_agent:best_of accepts one of uniform, dirichlet"),
    ("thirdparty_agent:best_of@sprad=even", "thirdparty_agent:best_of has no argument 'sprad'; it takes tries (an "
                                            "integer), spread (one of uniform, dirichlet)"),
    ("thirdparty_agent:place@tries=3", "thirdparty_agent:place has no argument 'tries'; it takes no arguments"),
    ("thirdparty_agent:pinned", "thirdparty_agent:pinned needs device= (an integer)"),
    ("agents.gnn_placer:place@refine=yes", "refine=yes; agents.gnn_placer:place accepts one of none, zero_shot, "
                                           "best_start"),
    ("agents.gnn_placer:place@smooth=1", "smooth=1; agents.gnn_placer:place accepts true or false"),
    ("agents.gnn_placer:place@samples=0", "samples=0; agents.gnn_placer:place accepts an integer >= 1"),
    ("agents.reinforce_seq2seq:place@warm_start=oracle", "warm_start=oracle; agents.reinforce_seq2seq:place accepts "
                                                         "one of best, single_cpu, single_gpu"),
    ("agents.sb3_harness:place@algorithm=DQN", "algorithm=DQN; agents.sb3_harness:place accepts one of PPO, A2C"),
    ("agents.reinforce_seq2seq:place_warm_start@warm_start=expert",
     "the preset agents.reinforce_seq2seq:place_warm_start is agents.reinforce_seq2seq:place@warm_start=best and sets "
     "warm_start itself"),
])
def test_a_bad_key_or_value_is_named_with_what_is_accepted_before_any_run(spec, message, tmp_path, capsys):
    with pytest.raises(MethodArgumentError, match=re.escape(message)):
        pe.method(spec)
    path = tmp_path / "r.jsonl"
    assert main(["run", "--suite", "tiny", "--methods", "single_gpu", spec, "-o", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placement-env: error: ") and message in err and err.count("\n") == 1
    assert not path.exists()


def test_every_preset_is_its_method_with_its_arguments():
    for name, preset in pe.PRESETS.items():
        assert name not in pe.METHODS and preset.name not in pe.PRESETS
        assert pe.method(name) == MethodSpec(name)
        bound, target = pe.resolve_method(name), pe.resolve_method(preset.name)
        assert getattr(bound, "func", bound) is target and getattr(bound, "keywords", {}) == dict(preset.args)
    assert pe.resolve_method("agents.reinforce_seq2seq:place_warm_start").keywords == {"warm_start": "best"}
    assert pe.resolve_method("agents.gnn_placer:place_fine_tune").keywords == {"fine_tune": True}
    assert pe.resolve_method("agents.sb3_harness:place_a2c").keywords == {"algorithm": "A2C"}


def test_all_is_the_built_in_methods_then_their_presets():
    assert [str(spec) for spec in _method_specs(["all"])] == [
        "single_cpu", "single_gpu", "random_search", "expert", "scotch", "mincut", "metis", "heft", "m_topo", "m_etf",
        "hill_climbing", "simulated_annealing", "cross_entropy", "brkga", "cp_sat", "hill_climbing_warm",
        "simulated_annealing_warm", "cross_entropy_warm", "brkga_warm", "expert_tf1"]
    assert [str(s) for s in _method_specs(["all", "thirdparty_agent:best_of@tries=2"])][-1] == \
        "thirdparty_agent:best_of@tries=2"
    with pytest.raises(ValueError, match="hill_climbing_warm given more than once"):
        _method_specs(["all", "hill_climbing_warm"])


def test_every_method_of_the_stored_results_still_resolves():
    names = {method_label(row) for name in STORED for row in read_rows(DOCS / name, must_exist=True)}
    assert {"hill_climbing_warm", "agents.reinforce_seq2seq:place_warm_start", "agents.gnn_placer:place_zero_shot_smoothed",
            "agents.sb3_harness:place_ppo"} <= names
    for name in names:
        assert pe.method(name) == MethodSpec(name)


def test_rows_record_the_arguments_and_each_parameterisation_is_a_method_of_its_own(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    methods = ["thirdparty_agent:best_of", "thirdparty_agent:best_of@tries=2",
               pe.method("thirdparty_agent:best_of", spread="dirichlet", tries=3)]
    rows = run_suite("tiny", methods, path, budget=10, progress=False)
    assert [(row["method"], row["method_args"], row["evaluations"]) for row in rows[:3]] == [
        ("thirdparty_agent:best_of", {}, 5), ("thirdparty_agent:best_of", {"tries": 2}, 2),
        ("thirdparty_agent:best_of", {"spread": "dirichlet", "tries": 3}, 3)]
    more = run_suite("tiny", [*methods, "thirdparty_agent:best_of@tries=4"], path, budget=10, progress=False)
    assert len(more) == 3 and {method_label(row) for row in more} == {"thirdparty_agent:best_of@tries=4"}
    labels = {"thirdparty_agent:best_of", "thirdparty_agent:best_of@tries=2", "thirdparty_agent:best_of@tries=4",
              "thirdparty_agent:best_of@spread=dirichlet,tries=3"}
    rows = read_rows(path)
    assert {entry["method"] for entry in leaderboard_rows(rows)} == labels
    assert all(set(task["best"]) == labels for task in summarise(rows).values())
    assert validate(path, progress=False) == (12, [])
    lines = path.read_text().splitlines()
    tampered = [json.loads(line) for line in lines]
    tampered[1]["runtime_s"] *= 2
    path.write_text("".join(json.dumps(row) + "\n" for row in tampered))
    assert main(["validate", str(path)]) == 1
    assert "method 'thirdparty_agent:best_of@tries=2', seed 0): runtime_s=" in capsys.readouterr().out


def test_a_preset_with_arguments_of_its_own_runs_from_the_command_line_and_its_row_replays(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    assert main(["run", "--suite", "tiny", "--methods", "hill_climbing_warm@max_groups=2", "--budget", "20",
                 "-o", str(path)]) == 0
    capsys.readouterr()
    rows = read_rows(path)
    assert len(rows) == 3 and all(row["method"] == "hill_climbing_warm" and row["method_args"] == {"max_groups": 2}
                                  for row in rows)
    assert main(["validate", str(path)]) == 0
    assert "3 placements replayed, 0 do not reproduce" in capsys.readouterr().out
    row = rows[0]  # the row's method and arguments, run again on its task and seed, give its placement
    problem = pe.Problem.make(pe.load_benchmark(row["benchmark"]), pe.load_cluster(row["cluster"]),
                              benchmark=row["benchmark"], budget=row["budget"], seed=row["seed"])
    assert pe.solve(method_label(row), problem).placement.tolist() == row["placement"]
    assert main(["report", str(path), "-o", str(tmp_path / "report")]) == 0
    assert "| hill_climbing_warm@max_groups=2 | 20 |" in (tmp_path / "report" / "report.md").read_text()


GOOD = {"suite": "tiny", "task": "t-2gpu", "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "runtime": "sim",
        "method": "single_gpu", "seed": 0, "budget": 10, "placement": [1, 1], "runtime_s": 0.5, "ok": True,
        "failure": "", "message": "", "evaluations": 0, "wall_s": 0.1, "lower_bound_s": 0.2, "versions": {}}


@pytest.mark.parametrize("change, message", [
    ({"method_args": []}, "method_args = []; expected a JSON object"),
    ({"method_args": None}, "method_args = None; expected a JSON object"),
    ({"method_args": {"1x": 1}}, "argument name '1x'; expected a Python identifier"),
    ({"method_args": {"x": math.nan}}, "x=nan; expected a finite number"),
    ({"method_args": {"x": "\ud800"}}, "holds a lone surrogate; expected Unicode text"),
    ({"method_args": {"x": json.loads("[" * 18 + "1" + "]" * 18)}}, "nested more than 16 deep"),
    ({"method": "single_gpu@x=1"}, "expected a non-empty name without '@'"),
    ({"method": " single_gpu"}, "expected a non-empty name without '@' or surrounding spaces"),
])
def test_the_reader_checks_the_method_arguments_strictly(tmp_path, change, message):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "seed": 1, **change}) + "\n")
    with pytest.raises(ResultsFormatError, match=f"{re.escape(str(path))}:2: .*{re.escape(message)}"):
        read_rows(path)


def test_rows_without_arguments_are_rows_with_none(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "method_args": {"x": 1}}) + "\n")
    assert [method_label(row) for row in read_results(path).rows] == ["single_gpu", "single_gpu@x=1"]
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "method_args": {}}) + "\n")
    with pytest.raises(ResultsFormatError, match=":2: a second row for suite 'tiny', task 't-2gpu', method 'single_gpu'"):
        read_rows(path)
