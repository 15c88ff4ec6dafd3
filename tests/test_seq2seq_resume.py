"""Resuming the seq2seq agent from a tampered but loadable checkpoint: each field is checked before anything in
the run folder is written, the stored best placement must re-evaluate to its runtime, and every refusal is a
CheckpointMismatchError (a CheckpointFieldError naming the field, its value and what is accepted) that leaves
the run folder, best_placement.json included, byte for byte as it was."""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import shutil
import tempfile

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agents.reinforce_seq2seq import CHECKPOINT, Config, main, train
from agents.common.run_files import BEST_JSON
from placement_env import CheckpointFieldError, CheckpointMismatchError

BENCHMARK = "rnnlm-tiny"
SAMPLES, SPENT = 4, 12  # the trained run: 3 updates of 4 samples
# small, with local moves and self-imitation, so that every field of the checkpoint is in use
CONFIG = Config(samples=SAMPLES, hidden=16, local_moves=1, self_imitation=1.0, elites=2, explore=1.0)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> pathlib.Path:
    """A run folder with a real checkpoint, trained once for the module."""
    out = tmp_path_factory.mktemp("trained")
    train(BENCHMARK, budget=SPENT, samples=SAMPLES, out_dir=out, progress=False, config=CONFIG, checkpoint_every=1)
    return out


def tampered(run: pathlib.Path, out: pathlib.Path, change) -> pathlib.Path:
    """A copy of ``run`` at ``out`` whose checkpoint ``change`` (a function of the loaded state) has edited."""
    shutil.copytree(run, out)
    state = torch.load(out / CHECKPOINT, weights_only=True)
    change(state)
    torch.save(state, out / CHECKPOINT)
    return out


def files(directory: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def resume(out: pathlib.Path, budget: int = SPENT + SAMPLES):
    return train(BENCHMARK, budget=budget, out_dir=out, progress=False, resume=True)


def refused(run: pathlib.Path, out: pathlib.Path, change) -> CheckpointMismatchError:
    """The error resuming a copy of ``run`` tampered by ``change`` raises; the folder stays as it was."""
    tampered(run, out, change)
    before = files(out)
    with pytest.raises(CheckpointMismatchError) as info:
        resume(out)
    assert files(out) == before
    return info.value


def setter(field, value):
    def change(state):
        state[field] = value
    return change


def test_an_untouched_checkpoint_resumes(run, tmp_path):
    result = resume(tampered(run, tmp_path / "run", lambda state: None))
    assert result.evaluations == SPENT + SAMPLES and result.updates == 4


def test_a_missing_policy_tensor_is_refused(run, tmp_path):
    error = refused(run, tmp_path / "run", lambda state: state["policy"].pop("head.weight"))
    assert isinstance(error, CheckpointFieldError) and error.field == "policy"
    assert "without 'head.weight'" in str(error) and "the model of hidden size 16" in str(error)


def test_a_policy_tensor_of_another_shape_is_refused(run, tmp_path):
    error = refused(run, tmp_path / "run", lambda state: state["policy"].__setitem__("head.weight", torch.zeros(5, 32)))
    assert error.field == "policy['head.weight']" and "shape (5, 32)" in str(error) and "shape (3, 32)" in str(error)


@pytest.mark.parametrize("history, field", [
    ("abc", "history"),
    ([{"update": 1}], "history"),  # 1 row for 3 updates
])
def test_a_malformed_history_is_refused(run, tmp_path, history, field):
    error = refused(run, tmp_path / "run", setter("history", history))
    assert error.field == field and "a list of the log rows of the 3 updates" in str(error)


def test_a_history_row_with_a_bad_number_is_refused(run, tmp_path):
    error = refused(run, tmp_path / "run", lambda state: state["history"][1].__setitem__("mean_reward", math.nan))
    assert error.field == "history[1].mean_reward" and "=nan; expected a finite number" in str(error)


@pytest.mark.parametrize("name, value, accepted", [
    ("hidden", -5, "an even integer from 2 to 4096"),
    ("hidden", 7, "an even integer from 2 to 4096"),
    ("hidden", 10 ** 9, "an even integer from 2 to 4096"),
    ("lr", "fast", "a finite number > 0 and <= 10"),
    ("warm_start", "oracle", "None, 'best' or a method"),
])
def test_a_config_field_out_of_range_is_refused(run, tmp_path, name, value, accepted):
    error = refused(run, tmp_path / "run", lambda state: state["config"].__setitem__(name, value))
    assert error.field == f"config.{name}" and f"config.{name}={value!r}; expected {accepted}" in str(error)


def test_a_config_of_another_hidden_size_does_not_fit_the_weights(run, tmp_path):
    error = refused(run, tmp_path / "run", lambda state: state["config"].__setitem__("hidden", 64))
    assert error.field == "policy['embed.0.weight']" and "hidden size 64" in str(error)


@pytest.mark.parametrize("elites, field", [
    ("many", "elites"),
    ([(1.0,)], "elites[0]"),
    ([[math.nan, [0]]], "elites[0] runtime"),
    ([[1e-9, [0]]], "elites[0] runtime"),  # faster than the best
    ([[1.0, [0, 1]]], "elites[0] placement"),
    ([[1.0, None], [2.0, None], [3.0, None]], "elites"),  # more than Config.elites
])
def test_malformed_elites_are_refused(run, tmp_path, elites, field):
    assert refused(run, tmp_path / "run", setter("elites", elites)).field == field


def test_a_best_placement_on_a_device_the_cluster_lacks_is_refused(run, tmp_path):
    error = refused(run, tmp_path / "run", lambda state: state["best_placement"].__setitem__(0, 99))
    assert error.field == "best_placement" and "placement uses device 99" in str(error)


@pytest.mark.parametrize("value, accepted", [(-1.0, "a finite number > 0"), (math.nan, "a finite number > 0"),
                                             ("fast", "a finite number > 0")])
def test_a_best_runtime_that_is_no_runtime_is_refused(run, tmp_path, value, accepted):
    error = refused(run, tmp_path / "run", setter("best_runtime_s", value))
    assert error.field == "best_runtime_s" and f"best_runtime_s={value!r}; expected {accepted}" in str(error)


def test_a_best_runtime_the_placement_does_not_re_evaluate_to_is_refused(run, tmp_path):
    recorded = torch.load(run / CHECKPOINT, weights_only=True)["best_runtime_s"]
    error = refused(run, tmp_path / "run", setter("best_runtime_s", recorded / 2))
    assert error.field == "best_runtime_s"
    assert f"best_runtime_s={recorded / 2!r}" in str(error) and f"re-evaluates to on the sim runtime, {recorded!r} s" \
        in str(error)


@pytest.mark.parametrize("value", [1e12, 10 ** 12, SPENT - 1, True])
def test_evaluations_out_of_range_are_refused(run, tmp_path, value):
    error = refused(run, tmp_path / "run", setter("evaluations", value))
    assert error.field == "evaluations" and f"from {SPENT} (the history's last count) to {SPENT + SAMPLES} (the " \
        "budget)" in str(error)


def adam(name, value):
    def change(state):
        state["optimizer"]["state"][0][name] = value
    return change


@pytest.mark.parametrize("change, field", [
    (adam("exp_avg", torch.zeros(2)), "optimizer.state[0]['exp_avg']"),
    (lambda state: state["optimizer"]["state"][0]["exp_avg_sq"].fill_(-1.0), "optimizer.state[0]['exp_avg_sq']"),
    (adam("step", torch.tensor(1e6)), "optimizer.state[0]['step']"),
    (lambda state: state["optimizer"].__setitem__("state", [1, 2]), "optimizer"),
    (setter("torch_rng", torch.zeros(3, dtype=torch.uint8)), "torch_rng"),
    (setter("generator", "seed"), "generator"),
    (lambda state: state["generator"].zero_(), "generator"),  # the right size, but no generator's state
    (setter("updates", -1), "updates"),
    (setter("wall_s", math.inf), "wall_s"),
    (setter("baseline", "x"), "baseline"),
    (setter("spread", -1.0), "spread"),
    (setter("moved_from", [0]), "moved_from"),
    (setter("tried", [b"short"]), "tried"),
    (lambda state: state.pop("elites"), "elites"),
])
def test_other_fields_out_of_range_are_refused(run, tmp_path, change, field):
    assert refused(run, tmp_path / "run", change).field == field


@pytest.mark.parametrize("change, message", [
    (setter("format", torch.tensor([])), "has checkpoint format a float32 tensor of shape (0,)"),
    (lambda state: state["meta"].__setitem__("benchmark", torch.zeros(2, 1)),
     "belongs to benchmark=a float32 tensor of shape (2, 1) cluster='k80-2gpu'"),
    (setter("meta", "rnnlm-tiny"), "belongs to meta='rnnlm-tiny', not benchmark='rnnlm-tiny'"),
])
def test_a_tampered_format_or_task_is_refused_in_one_line(run, tmp_path, change, message):
    error = refused(run, tmp_path / "run", change)
    assert message in str(error) and "\n" not in str(error)


class _RunsCode:
    """Unpickling this calls ``touch`` on a marker file: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("content", [None, b"", b"not a checkpoint", b"PK\x03\x04 truncated"])
def test_an_unreadable_checkpoint_is_refused_in_our_words(run, tmp_path, content):
    """Never torch's hint to load with weights_only=False, which would run the file's code."""
    out, marker = tmp_path / "run", tmp_path / "pwned"
    shutil.copytree(run, out)
    if content is None:
        torch.save({"format": 3, "payload": _RunsCode(marker)}, out / CHECKPOINT)
    else:
        (out / CHECKPOINT).write_bytes(content)
    before = files(out)
    with pytest.raises(CheckpointMismatchError, match="is not a readable checkpoint") as info:
        resume(out)
    assert "weights_only" not in str(info.value) and "\n" not in str(info.value)
    assert not marker.exists() and files(out) == before


@pytest.mark.parametrize("change", [
    lambda state: state["policy"].pop("head.weight"),
    setter("history", "abc"),
    lambda state: state["config"].__setitem__("hidden", -5),
    setter("elites", [(1.0,)]),
    lambda state: state["best_placement"].__setitem__(0, 99),
    setter("best_runtime_s", -1.0),
    setter("best_runtime_s", math.nan),
    setter("evaluations", 1e12),
])
def test_the_command_line_refuses_a_tampered_checkpoint_in_one_line(run, tmp_path, capsys, change):
    out = tampered(run, tmp_path / "run", change)
    before = files(out)
    assert main(["--benchmark", BENCHMARK, "--budget", str(SPENT + SAMPLES), "--out-dir", str(out), "--resume",
                 "--no-progress", "--no-baselines", "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: resume: {out / CHECKPOINT} has ") and err.count("\n") == 1, err
    assert files(out) == before


# the checkpoint's scalars and every config field (Config's ranges keep training finite)
SCALARS = ("format", "updates", "evaluations", "wall_s", "baseline", "spread", "best_runtime_s",
           *(f"config.{field.name}" for field in dataclasses.fields(Config)))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 13, 10 ** 13),
                   st.floats(allow_subnormal=False),  # the trainer flushes denormals to zero
                   st.text(max_size=3),
                   st.floats(0.5, 2.0, allow_subnormal=False))  # the last: multiples of the value there


@settings(max_examples=12, deadline=None)
@given(field=st.sampled_from(SCALARS), value=VALUES)
def test_tampered_scalars_resume_or_are_refused(run, field, value):
    """A scalar field set to anything either resumes to a sound run or is refused with the project's error."""
    state = torch.load(run / CHECKPOINT, weights_only=True)
    holder, key = (state["config"], field.split(".")[1]) if field.startswith("config.") else (state, field)
    if isinstance(value, float) and 0.5 <= value <= 2.0 and isinstance(holder[key], (int, float)):
        value = type(holder[key])(holder[key] * value)
    with tempfile.TemporaryDirectory() as folder:
        out = tampered(run, pathlib.Path(folder) / "run", lambda state: (
            state["config"] if field.startswith("config.") else state).__setitem__(key, value))
        before = files(out)
        try:
            result = resume(out)
        except CheckpointMismatchError:
            event("refused")
            assert files(out) == before
            return
        event("resumed")
        assert result.updates >= state["updates"] and result.evaluations <= SPENT + SAMPLES
        assert json.loads((out / BEST_JSON).read_text())["runtime_s"] == result.best_runtime_s < math.inf


def _better_placement(run: pathlib.Path) -> tuple[list[int], float]:
    """A placement faster than the checkpoint's best, and its simulated runtime: the best with one group moved."""
    import placement_env as pe

    graph, cluster = pe.load_benchmark(BENCHMARK), pe.load_cluster("k80-2gpu")
    best = torch.load(run / CHECKPOINT, weights_only=True)["best_placement"]
    recorded = json.loads((run / BEST_JSON).read_text())["runtime_s"]
    for group in range(graph.n_groups):
        for device in range(cluster.n_devices):
            candidate = list(best)
            candidate[group] = device
            m = pe.evaluate(graph, cluster, candidate)
            if m.ok and m.runtime_s < recorded:
                return candidate, m.runtime_s
    pytest.skip("the checkpoint's best has no faster neighbour")


def test_a_better_best_written_after_the_checkpoint_is_kept(run, tmp_path):
    """A run killed between checkpoints wrote its newest best to best_placement.json only: a resume keeps it."""
    out = tampered(run, tmp_path / "run", lambda state: None)
    placement, runtime_s = _better_placement(run)
    record = json.loads((out / BEST_JSON).read_text())
    (out / BEST_JSON).write_text(json.dumps({**record, "placement": placement, "runtime_s": runtime_s}))
    result = resume(out, budget=SPENT)  # no update: the best can only come from the file
    assert result.best_runtime_s == runtime_s and result.best_placement.tolist() == placement
    assert json.loads((out / BEST_JSON).read_text())["runtime_s"] == runtime_s


def test_a_best_file_that_does_not_re_evaluate_to_its_runtime_is_replaced(run, tmp_path):
    out = tampered(run, tmp_path / "run", lambda state: None)
    record = json.loads((out / BEST_JSON).read_text())
    (out / BEST_JSON).write_text(json.dumps({**record, "runtime_s": record["runtime_s"] / 2}))  # a claim, not a result
    result = resume(out)
    kept = json.loads((out / BEST_JSON).read_text())
    assert kept["runtime_s"] == result.best_runtime_s > record["runtime_s"] / 2
