"""Suites of one's own tasks: suite files (TOML and JSON) with benchmark names, saved OpGraph files, TF GraphDef
files and Keras model files, run by ``placement-env run`` and ``run_suite``, replayed by ``validate`` (a changed
graph file makes its rows stale); every malformed file is refused naming the file, the line and the field; and the
numbers a user gives (budgets, seeds, worker counts) are checked where they enter."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import placement_env as pe
from placement_env import ArgumentError, SuiteFileError
from placement_env.cli import main
from placement_env.harness import (SUITES, Task, load_suite, load_task_graph, read_rows, read_suite_file,
                                   register_suite, run_suite, validate)
from placement_env.harness.suite_file import json_lines, toml_lines

METHODS = ["single_gpu", "heft"]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """A folder with a saved OpGraph (rnnlm-tiny), a TF1 GraphDef (.pb), the same as text (.pbtxt), a Keras model
    file and a cluster JSON file, and a second OpGraph to change a file into."""
    import keras
    import tensorflow as tf

    folder = tmp_path_factory.mktemp("graphs")
    pe.load_benchmark("rnnlm-tiny").save(folder / "rnnlm.npz")
    pe.load_benchmark("synthetic-tiny").save(folder / "other.npz")
    graph = tf.Graph()
    with graph.as_default():
        x = tf.random.uniform([16, 32], name="x")
        w1 = tf.compat.v1.get_variable("w1", [32, 64])
        w2 = tf.compat.v1.get_variable("w2", [64, 8])
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)), name="loss")
        train = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, colocate_gradients_with_ops=True)
        tf.compat.v1.add_to_collection("train_op", train)
    (folder / "mlp.pb").write_bytes(graph.as_graph_def().SerializeToString())
    (folder / "mlp.pbtxt").write_text(str(graph.as_graph_def()))
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)],
                             name="dense")
    model.save(folder / "dense.keras")
    (folder / "machine.json").write_text(pe.load_cluster("paper-2gpu").to_json())
    return folder


TOML = """\
# my tasks: one of each kind of graph
name = "mine"
methods = ["single_gpu", "heft"]
budgets = [0]
seeds = [0, 1]

[[tasks]]
name = "bench"
benchmark = "rnnlm-tiny"
cluster = "paper-2gpu"
model = "RNNLM (tiny)"

[[tasks]]
name = "saved"
graph = "graphs/rnnlm.npz"
cluster = "graphs/machine.json"

[[tasks]]
name = "graphdef"
graph = "graphs/mlp.pb"
cluster = "paper-4gpu"
runtime = "sim"

[[tasks]]
name = "keras"
graph = "graphs/dense.keras"
input_shape = [8, 16]
cluster = "paper-2gpu"
"""


def _suite_folder(tmp_path: Path, graphs: Path) -> Path:
    """A folder with the graph files under graphs/ (copied, so a test may change them)."""
    shutil.copytree(graphs, tmp_path / "graphs")
    return tmp_path


def _json_suite() -> dict:
    """The TOML suite as JSON."""
    import tomllib

    return tomllib.loads(TOML)


def test_a_toml_suite_runs_through_the_command_line_and_validates(tmp_path, graphs, capsys):
    folder = _suite_folder(tmp_path, graphs)
    (folder / "mine.toml").write_text(TOML)
    results = folder / "results.jsonl"
    assert main(["run", "--suite", str(folder / "mine.toml"), "-o", str(results)]) == 0
    rows = read_rows(results)
    # the file's methods, budgets and seeds: 4 tasks x 2 methods x 2 seeds at budget 0
    assert len(rows) == 16 and {r["suite"] for r in rows} == {"mine"}
    assert {r["method"] for r in rows} == set(METHODS) and {r["seed"] for r in rows} == {0, 1}
    assert {r["budget"] for r in rows} == {0} and all(r["ok"] for r in rows)
    by_task = {r["task"]: r for r in rows}
    assert by_task["bench"]["benchmark"] == "rnnlm-tiny" and "graph" not in by_task["bench"]["versions"]
    assert by_task["saved"]["benchmark"] == str(folder / "graphs" / "rnnlm.npz")
    assert by_task["saved"]["cluster"] == str(folder / "graphs" / "machine.json")
    assert by_task["keras"]["graph_options"] == {"input_shape": [8, 16]}
    for task in ("saved", "graphdef", "keras"):
        assert re.fullmatch(r"[0-9a-f]{16}", by_task[task]["versions"]["graph"]), task
    # the saved OpGraph is the benchmark's graph, so its rows on the same machine are the benchmark's
    assert by_task["saved"]["placement"] == by_task["bench"]["placement"]
    capsys.readouterr()
    assert main(["validate", str(results)]) == 0
    assert "16 placements replayed, 0 do not reproduce" in capsys.readouterr().out


def test_the_command_line_overrides_the_files_methods_budgets_and_seeds(tmp_path, graphs):
    folder = _suite_folder(tmp_path, graphs)
    (folder / "mine.toml").write_text(TOML)
    results = folder / "results.jsonl"
    assert main(["run", "--suite", str(folder / "mine.toml"), "--methods", "single_gpu", "--budget", "2",
                 "--seeds", "3", "-o", str(results)]) == 0
    rows = read_rows(results)
    assert len(rows) == 4 and {(r["method"], r["seed"], r["budget"]) for r in rows} == {("single_gpu", 3, 2)}


def test_a_json_suite_runs_through_run_suite_and_a_changed_graph_file_makes_its_rows_stale(tmp_path, graphs, capsys):
    folder = _suite_folder(tmp_path, graphs)
    suite = _json_suite()
    del suite["name"]  # the name is the file's stem
    suite["tasks"][2]["graph"] = "graphs/mlp.pbtxt"
    (folder / "theirs.json").write_text(json.dumps(suite, indent=2))
    results = folder / "results.jsonl"
    rows = run_suite(str(folder / "theirs.json"), ["single_gpu", "random_search"], results, budget=[0, 3],
                     seeds=[0], progress=False)
    assert {r["suite"] for r in rows} == {"theirs"} and len(rows) == 4 * 2 * 2
    assert {r["task"] for r in rows if r["ok"]} == {"bench", "saved", "graphdef", "keras"}
    assert load_suite(str(folder / "theirs.json")) == read_suite_file(folder / "theirs.json").tasks
    placed = len([r for r in rows if r["placement"]])  # random_search at budget 0 has none (method_error)
    assert validate(results, progress=False) == (placed, [])
    # the saved graph and the GraphDef change: their rows are stale, not mismatches; the others still replay
    shutil.copy(folder / "graphs" / "other.npz", folder / "graphs" / "rnnlm.npz")
    (folder / "graphs" / "mlp.pbtxt").write_text((folder / "graphs" / "mlp.pbtxt").read_text() + "\n")
    checked, mismatches = validate(results, progress=False)
    assert {m.row["task"] for m in mismatches} == {"saved", "graphdef"}
    assert all(m.stale and not m.failed for m in mismatches) and checked == placed - len(mismatches)
    assert "the file has changed since" in mismatches[0].reason
    assert main(["validate", str(results)]) == 0
    assert "stale, not replayed: made on graph file" in capsys.readouterr().out
    # a graph file that is gone: its rows are skipped, with the reason
    (folder / "graphs" / "dense.keras").unlink()
    _, mismatches = validate(results, progress=False)
    gone = [m for m in mismatches if m.row["task"] == "keras"]
    assert gone and all(m.skipped for m in gone) and "no such graph file" in gone[0].reason


def test_a_registered_suite_runs_by_name_and_a_clash_with_a_built_in_name_is_refused(tmp_path, graphs):
    tasks = [Task("bench", "rnnlm-tiny", "paper-2gpu"),
             Task("saved", str(graphs / "rnnlm.npz"), "paper-2gpu")]
    pe.register_suite("my-registered", tasks)
    assert pe.register_suite is register_suite
    assert load_suite("my-registered") == tuple(tasks)
    rows = run_suite("my-registered", ["single_gpu"], tmp_path / "r.jsonl", budget=0, progress=False)
    assert [r["suite"] for r in rows] == ["my-registered"] * 2 and "graph" in rows[1]["versions"]
    for name in ("tiny", *SUITES, "placebench-v1/paper"):
        with pytest.raises(ArgumentError, match=re.escape(f"name={name!r}; expected a name other than the built-in")):
            register_suite(name, tasks)
    for name in ("mine.toml", "a:b", "", " x"):
        with pytest.raises(ArgumentError, match="name="):
            register_suite(name, tasks)
    with pytest.raises(ArgumentError, match="a .keras file needs the import option input_shape"):
        register_suite("bad", [Task("k", str(graphs / "dense.keras"), "paper-2gpu")])


def test_load_task_graph_loads_each_kind_of_file_and_checks_its_options(graphs):
    saved = load_task_graph(str(graphs / "rnnlm.npz"))
    assert saved.digest == pe.load_benchmark("rnnlm-tiny").digest and len(saved.meta["file_digest"]) == 16
    assert load_task_graph(str(graphs / "mlp.pb")).digest == load_task_graph(str(graphs / "mlp.pbtxt")).digest
    assert load_task_graph(str(graphs / "dense.keras"), {"input_shape": [8, 16]}).n_ops > 0
    assert "file_digest" not in load_task_graph("rnnlm-tiny").meta
    for benchmark, options, message in [
        ("rnnlm-tiny", {"unknown_dim": 2}, "import options are for a TF or Keras graph file"),
        (str(graphs / "rnnlm.npz"), {"fetches": ["a"]}, "a .npz file takes no import options"),
        (str(graphs / "mlp.pb"), {"input_shape": [8]}, "a .pb file takes fetches, unknown_dim"),
        (str(graphs / "mlp.pb"), {"unknown_dim": 0}, "unknown_dim=0; expected an integer >= 1"),
        (str(graphs / "dense.keras"), {}, "needs the import option input_shape"),
        (str(graphs / "dense.keras"), {"input_shape": [8, 1.5]}, "input_shape=[8, 1.5]; expected a non-empty list"),
        (str(graphs / "dense.keras"), {"input_shape": [8, 16], "input_dtype": "float8"}, "input_dtype='float8'"),
    ]:
        with pytest.raises(ArgumentError, match=re.escape(message)):
            load_task_graph(benchmark, options)
    with pytest.raises(pe.GraphFormatError, match="no such graph file"):
        load_task_graph(str(graphs / "absent.npz"))


# ---- malformed files: each names the file, the line and the field ----

def _toml(*task_lines: str, head: str = 'budgets = [0]') -> str:
    """A TOML suite: ``head`` (lines 1-), then one task whose lines follow its [[tasks]] header."""
    return head + "\n\n[[tasks]]\n" + "\n".join(task_lines) + "\n"


GOOD = ('name = "a"', 'benchmark = "rnnlm-tiny"', 'cluster = "paper-2gpu"')  # lines 4-6 of _toml(*GOOD)


@pytest.mark.parametrize("text, line, message", [
    ('name = "a\n', 1, "not valid TOML"),
    (_toml(*GOOD, head='budget = [0]'), 1, 'budget: unknown field (did you mean "budgets"?); a suite file has the '
                                          'fields name, methods, budgets, seeds, tasks'),
    ('budgets = [0]\n', 1, "missing field tasks"),
    ('tasks = []\n', 1, "tasks: []; expected a non-empty list of tasks"),
    (_toml(*GOOD, head='budgets = [0, -5]'), 1, "budgets[1]: -5; expected an integer >= 0"),
    (_toml(*GOOD, head='budgets = [\n  0,\n  1.5,\n]'), 3, "budgets[1]: 1.5; expected an integer >= 0"),
    (_toml(*GOOD, head='seeds = [true]'), 1, "seeds[0]: true; expected an integer >= 0"),
    (_toml(*GOOD, head='seeds = [1, 1]'), 1, "seeds[1]: 1 is given twice"),
    (_toml(*GOOD, head='seeds = 3'), 1, "seeds: 3; expected a non-empty list of seeds"),
    (_toml(*GOOD, head='name = 3'), 1, "name: 3; expected a non-empty line of text without surrounding spaces"),
    (_toml(*GOOD, head='name = "tiny"'), 1, 'name: "tiny" is a built-in suite\'s name'),
    (_toml(*GOOD, head='methods = ["heft", "no_such_method"]'), 1, "methods[1]: unknown method 'no_such_method'"),
    (_toml(*GOOD, head='methods = ["hill_climbing@max_groups=-2"]'), 1, "methods[0]: method"),
    (_toml('name = "a"', 'benchmark = "rnnlm-tiny"'), 3, "tasks[0] (task 'a'): missing field cluster"),
    (_toml(*GOOD, 'clustr = "x"'), 7, 'tasks[0].clustr (task \'a\'): unknown field (did you mean "cluster"?)'),
    (_toml("name = 7", 'benchmark = "rnnlm-tiny"', 'cluster = "paper-2gpu"'), 4,
     "tasks[0].name: 7; expected a non-empty line of text"),
    (_toml('name = "a"', 'cluster = "paper-2gpu"'), 3, "tasks[0] (task 'a'): no graph; give one of benchmark"),
    (_toml(*GOOD, 'graph = "x.npz"'), 7, "tasks[0].graph (task 'a'): both benchmark and graph"),
    (_toml('name = "a"', 'benchmark = "rnnlm-huge"', 'cluster = "paper-2gpu"'), 5,
     "tasks[0].benchmark (task 'a'): unknown benchmark 'rnnlm-huge'"),
    (_toml('name = "a"', 'benchmark = "x.npz"', 'cluster = "paper-2gpu"'), 5, 'is a graph file; give it as graph'),
    (_toml('name = "a"', 'graph = "absent.npz"', 'cluster = "paper-2gpu"'), 5,
     'tasks[0].graph (task \'a\'): "absent.npz": no such file'),
    (_toml('name = "a"', 'graph = "model.onnx"', 'cluster = "paper-2gpu"'), 5,
     'tasks[0].graph (task \'a\'): "model.onnx"; expected the path of a graph file: .npz, a saved OpGraph'),
    (_toml('name = "a"', 'benchmark = "rnnlm-tiny"', 'cluster = "paper-3gpu"'), 6,
     'tasks[0].cluster (task \'a\'): "paper-3gpu": no cluster preset of that name (did you mean "paper-4gpu"?)'),
    (_toml('name = "a"', 'benchmark = "rnnlm-tiny"', 'cluster = "local:0"'), 6, 'cluster = "local:0"'),
    (_toml('name = "a"', 'benchmark = "rnnlm-tiny"', 'cluster = "graphs/rnnlm.npz"'), 6, "tasks[0].cluster"),
    (_toml(*GOOD, 'runtime = "simulated"'), 7, 'tasks[0].runtime (task \'a\'): "simulated"; expected one of sim'),
    (_toml(*GOOD, 'unknown_dim = 4'), 7, "tasks[0].unknown_dim (task 'a'): import options are for a graph file"),
    (_toml('name = "a"', 'graph = "graphs/rnnlm.npz"', 'cluster = "paper-2gpu"', 'fetches = ["x"]'), 7,
     "a .npz file takes no import options"),
    (_toml('name = "a"', 'graph = "graphs/mlp.pb"', 'cluster = "paper-2gpu"', 'fetches = []'), 7,
     "tasks[0].fetches (task 'a'): fetches=[]; expected a non-empty list of op names"),
    (_toml('name = "a"', 'graph = "graphs/dense.keras"', 'cluster = "paper-2gpu"'), 5,
     "tasks[0] (task 'a'): graph '"),
    (_toml('name = "a"', 'graph = "graphs/dense.keras"', 'cluster = "paper-2gpu"', 'input_shape = [8, 0]'), 7,
     "tasks[0].input_shape (task 'a'): input_shape=[8, 0]"),
    (_toml(*GOOD, 'model = ""'), 7, "tasks[0].model (task 'a'): \"\"; expected a non-empty line of text"),
    (_toml(*GOOD) + "\n[[tasks]]\n" + "\n".join(GOOD) + "\n", 9, "tasks[1].name (task 'a'): \"a\" is the name of "
                                                                 "an earlier task too (line 4)"),
    # a list of inline tables: the line of the table the field is in
    ('tasks = [\n  {name = "a", benchmark = "rnnlm-tiny", cluster = "paper-2gpu"},\n'
     '  {name = "b", benchmark = "rnnlm-tiny", cluster = "paper-5gpu"},\n]\n', 3, "tasks[1].cluster (task 'b')"),
    ('tasks = [\n  "rnnlm-tiny",\n]\n', 2, 'tasks[0]: "rnnlm-tiny"; expected a task'),
    # quoted keys, dotted keys, brackets in strings and comments do not throw the lines off
    ('# a comment [[tasks]]\n"name" = "x # [[tasks]]"\nseeds = [0, # ]\n  1]\n\n[[tasks]]\nname = \'a\'\n'
     'benchmark = "rnnlm-tiny"\ncluster = "paper-2gpu"\nmodel.x = 1\n', 10, "tasks[0].model (task 'a'): {\"x\": 1}"),
    (_toml(*GOOD, 'model = "two\\nlines"'), 7, "tasks[0].model (task 'a'): \"two\\nlines\"; expected a non-empty line"),
])
def test_a_malformed_toml_file_names_its_line_and_field(tmp_path, graphs, text, line, message):
    folder = _suite_folder(tmp_path, graphs)
    path = folder / "bad.toml"
    path.write_text(text)
    with pytest.raises(SuiteFileError) as caught:
        read_suite_file(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert message in str(caught.value)
    assert main(["run", "--suite", str(path), "-o", str(folder / "r.jsonl")]) == 2
    assert not (folder / "r.jsonl").exists()


@pytest.mark.parametrize("text, line, message", [
    ('{\n  "budgets": [0],\n  "tasks": [\n}\n', 4, "not valid JSON"),
    ('[1, 2]\n', 1, "a JSON list at the top"),
    ('{\n  "seeds": [0],\n  "seeds": [1],\n  "tasks": []\n}\n', 3, "seeds is given twice in one object (first on "
                                                                    "line 2)"),
    ('{\n  "budgets": [\n    NaN\n  ],\n  "tasks": []\n}\n', 3, "budgets[0] = NaN: not a number"),
    ('{\n  "budgets": [0, 1.0],\n  "tasks": []\n}\n', 2, "budgets[1]: 1.0; expected an integer >= 0"),
    ('{"tasks": [\n  {"name": "a", "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu"},\n  {"name": "b",\n'
     '   "benchmark": "rnnlm-tiny"}\n]}\n', 3, "tasks[1] (task 'b'): missing field cluster"),
    ('{"tasks": [\n  {"name": "a",\n   "benchmark": "rnnlm-tiny",\n   "cluster": "paper-2gpu",\n'
     '   "runtime": null}\n]}\n', 5, "tasks[0].runtime (task 'a'): null; expected one of sim"),
    ('{"tasks": [{"name": "a", "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "gpus": 2}]}', 1,
     "tasks[0].gpus (task 'a'): unknown field"),
])
def test_a_malformed_json_file_names_its_line_and_field(tmp_path, text, line, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SuiteFileError) as caught:
        read_suite_file(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert message in str(caught.value)


def test_a_file_that_is_no_suite_file_is_named(tmp_path):
    with pytest.raises(SuiteFileError, match="no such suite file"):
        read_suite_file(tmp_path / "absent.toml")
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(SuiteFileError, match="a folder, not a suite file"):
        read_suite_file(tmp_path / "folder.toml")
    (tmp_path / "binary.toml").write_bytes(b'name = "a"\nseeds = [0]\n\xff\xfe')
    with pytest.raises(SuiteFileError, match=re.escape(f"{tmp_path / 'binary.toml'}:3: not UTF-8 text")):
        read_suite_file(tmp_path / "binary.toml")
    with pytest.raises(pe.UnknownSuiteError, match="a suite file \\(.toml or .json\\)"):
        load_suite(str(tmp_path / "tasks.yaml"))


def test_the_line_scanners_find_every_key_and_item():
    toml = ('a = 1\n[t]\nb = [\n  1,\n  {c = "]"},\n]\n[[u]]\nd = \'\'\'x\n\'\'\'\n[[u]]\n"e.f" = 2\n'
            'g = """a \\""" b\n"""\nh = 3\n')
    assert toml_lines(toml) == {("a",): 1, ("t",): 2, ("t", "b"): 3, ("t", "b", 0): 4, ("t", "b", 1): 5,
                                ("t", "b", 1, "c"): 5, ("u",): 7, ("u", 0): 7, ("u", 0, "d"): 8, ("u", 1): 10,
                                ("u", 1, "e.f"): 11, ("u", 1, "g"): 12, ("u", 1, "h"): 14}
    text = '{"a": [1,\n {"b": "x\\"y"}],\n "c": {}}'
    assert json_lines(text) == {("a",): 1, ("a", 0): 1, ("a", 1): 2, ("a", 1, "b"): 2, ("c",): 3}


# ---- strict numbers where a user gives them ----

@pytest.fixture(scope="module")
def tiny_problem_parts():
    return pe.load_benchmark("rnnlm-tiny"), pe.load_cluster("paper-2gpu")


@pytest.mark.parametrize("keyword, value, message", [
    ("budget", -1, "budget=-1; expected None (unlimited) or an integer >= 0"),
    ("budget", 2.5, "budget=2.5; expected None (unlimited) or an integer >= 0"),
    ("seed", -3, "seed=-3; expected an integer >= 0"),
    ("seed", 1.0, "seed=1.0; expected an integer >= 0"),
])
def test_a_problem_from_an_env_refuses_negative_or_fractional_budgets_and_seeds(tiny_problem_parts, keyword, value,
                                                                                message):
    graph, cluster = tiny_problem_parts
    env = pe.DevicePlacementEnv("rnnlm-tiny", "paper-2gpu")
    for make in (lambda: pe.Problem.from_env(env, **{keyword: value}),
                 lambda: pe.Problem.make(graph, cluster, **{keyword: value})):
        with pytest.raises(ArgumentError, match=re.escape(message)):
            make()


@pytest.mark.parametrize("keyword, value, message", [
    ("workers", 0, "workers=0; expected a positive integer"),
    ("workers", 1.5, "workers=1.5; expected a positive integer"),
    ("workers", True, "workers=True; expected a positive integer"),
    ("max_retries", -1, "max_retries=-1; expected a non-negative integer"),
    ("timeout_s", "600", "timeout_s='600'; expected a positive number of seconds or None"),
    ("timeout_s", float("nan"), "timeout_s=nan; expected a positive number of seconds or None"),
    ("start_timeout_s", -1, "start_timeout_s=-1; expected a positive number of seconds"),
    ("connect_timeout_s", 0, "connect_timeout_s=0; expected a positive number of seconds"),
])
def test_the_parallel_evaluator_refuses_bad_worker_counts_and_limits_before_starting(keyword, value, message):
    with pytest.raises(ArgumentError, match=re.escape(message)):
        pe.ParallelEvaluator("rnnlm-tiny", "paper-2gpu", **{keyword: value})


def test_random_placements_refuse_a_bad_count_or_seed(tiny_problem_parts):
    graph, cluster = tiny_problem_parts
    for n, rng, message in [(-1, 0, "n=-1; expected an integer >= 0"), (1.5, 0, "n=1.5; expected an integer >= 0"),
                            (2, -1, "rng=-1; expected a numpy.random.Generator or a seed"),
                            (2, 0.5, "rng=0.5; expected a numpy.random.Generator or a seed")]:
        with pytest.raises(ArgumentError, match=re.escape(message)):
            pe.random_placements(graph, cluster, n, rng)
    same = pe.random_placements(graph, cluster, np.int64(3), np.random.default_rng(4))
    assert np.array_equal(same, pe.random_placements(graph, cluster, 3, 4))


def test_run_suite_refuses_negative_or_fractional_budgets_and_seeds_before_any_work(tmp_path):
    for keywords, message in [({"budget": -1}, "budget=-1; expected a number of runtime evaluations >= 0"),
                              ({"budget": [0, 2.5]}, "budget=2.5"),
                              ({"seeds": [0, -2]}, "seed -2; expected a non-negative integer")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            run_suite("tiny", ["single_gpu"], tmp_path / "r.jsonl", progress=False, **keywords)
    assert not (tmp_path / "r.jsonl").exists()


def test_a_rows_graph_options_are_checked_and_a_graph_that_does_not_load_is_skipped(tmp_path, graphs):
    keras_file = str(graphs / "dense.keras")
    tasks = [Task("keras", keras_file, "paper-2gpu", graph_options={"input_shape": [8, 16]})]
    results = tmp_path / "r.jsonl"
    rows = run_suite("keras-only", ["single_gpu"], results, tasks=tasks, budget=0, progress=False)
    assert rows[0]["graph_options"] == {"input_shape": [8, 16]} and validate(results, progress=False) == (1, [])
    for options, message in [({"input_shape": [8, -16]}, "input_shape=[8, -16]; expected a non-empty list"),
                             ({"fetches": ["a"]}, "a .keras file takes input_shape, input_dtype"),
                             ([8, 16], "expected a JSON object of import option to value")]:
        results.write_text(json.dumps({**rows[0], "graph_options": options}) + "\n")
        with pytest.raises(pe.ResultsFormatError, match=re.escape(f"{results}:1: graph_options = ")) as caught:
            validate(results, progress=False)
        assert message in str(caught.value)
    results.write_text(json.dumps({**rows[0], "graph_options": {}}) + "\n")  # the file's input_shape is missing
    checked, mismatches = validate(results, progress=False)
    assert checked == 0 and mismatches[0].skipped and "needs the import option input_shape" in mismatches[0].reason


def test_a_file_named_neither_toml_nor_json_is_refused(tmp_path):
    (tmp_path / "tasks.yaml").write_text("tasks: []\n")
    with pytest.raises(SuiteFileError, match=re.escape(f"{tmp_path / 'tasks.yaml'}: not a suite file by its name")):
        read_suite_file(tmp_path / "tasks.yaml")
