"""The GNN placer's learned cost model (agents/gnn_placer/cost_model.py), its training and the local search on it
that refines a zero-shot placement without evaluations."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import placement_env as pe
from agents.gnn_placer import (COST_MODEL_ENV, PRETRAINED_COST_MODEL, CostNet, cost_input, load_cost_model,
                               load_network, place, save_checkpoint,
                               save_cost_model)
from agents.gnn_placer.cost_data import contiguous_splits
from agents.gnn_placer.cost_training import load_dataset
from agents.gnn_placer.refine import one_move_neighbours, refine
from agents.gnn_placer.train_cost_model import main
from agents.gnn_placer.trainer import Config
from placement_env import sequential_peak_bytes
from placement_env.cluster.symmetry import device_symmetries
from placement_env.errors import CheckpointMismatchError
from placement_env.harness import run_suite


ONE_TASK = "tiny-rnnlm"  # the tiny suite's RNNLM task alone: the commands' plumbing on one task, as on three
ONE_TASK_NAME = "rnnlm-tiny-2gpu"


@pytest.fixture(scope="module")
def one_task():
    """The suite ``ONE_TASK``, registered in this process (the refinement spends most of these tests' time, and
    RNNLM-tiny's least)."""
    from placement_env.harness.suites import load_suite

    pe.register_suite(ONE_TASK, [task for task in load_suite("tiny") if task.name == ONE_TASK_NAME])
    return ONE_TASK


@pytest.fixture(scope="module")
def cost_run(tmp_path_factory, one_task):
    """A cost model trained briefly on one task by the command line, and what it printed."""
    import io
    from contextlib import redirect_stdout

    out = tmp_path_factory.mktemp("cost") / "run"
    printed = io.StringIO()
    with redirect_stdout(printed):
        # batches of 8 placements, not the default 64: 12 s instead of 65, and still a rank correlation of 0.89
        assert main(["--suite", one_task, "--steps", "250", "--batch", "8", "--out-dir", str(out), "--no-progress"]) == 0
    return out, printed.getvalue()


def random_placements(problem, k, seed=0):
    return pe.random_placements(problem.graph, problem.cluster, k, seed)


def test_prediction_is_the_same_for_every_labelling_of_alike_devices(tiny):
    problem = pe.Problem.make(tiny, pe.load_cluster("k80-4gpu"))
    torch.manual_seed(0)
    net, inputs = CostNet(hidden=16, layers=2), cost_input(problem)
    symmetries = device_symmetries(problem.cluster)
    assert len(symmetries) > 1
    placements = random_placements(problem, 6)
    predicted = [net.predict(inputs, s[placements]) for s in symmetries]
    for p in predicted[1:]:
        np.testing.assert_allclose(p, predicted[0], atol=1e-5)
    assert np.ptp(predicted[0]) > 0  # and the placements themselves are told apart


def test_predictions_do_not_depend_on_the_chunk_size(tiny, paper2):
    problem = pe.Problem.make(tiny, paper2)
    torch.manual_seed(0)
    net, inputs = CostNet(hidden=16, layers=2), cost_input(problem)
    placements = random_placements(problem, 37)
    default = net.predict(inputs, placements)
    for chunk in (1, 5, 64):
        np.testing.assert_allclose(net.predict(inputs, placements, chunk=chunk), default, rtol=0, atol=1e-6)


def test_cost_input_times_transfers_by_the_clusters_links(tiny, paper2):
    problem = pe.Problem.make(tiny, paper2)
    inputs = cost_input(problem)
    n, d = tiny.n_groups, paper2.n_devices
    assert inputs.seconds.shape == (n, d) and inputs.transfer.shape == (inputs.src.numel(), d, d)
    lower = problem.lower_bound()
    bandwidth, latency = np.asarray(paper2.bandwidth), np.asarray(paper2.latency)
    moved = inputs.transfer.numpy().astype(np.float64) * lower - latency[None]  # bytes / bandwidth
    volume = moved[:, 1, 2] * bandwidth[1, 2]
    large = volume > 1e3  # float32 keeps a few bytes of the small edges' time under their latency
    assert large.any()
    np.testing.assert_allclose(moved[large, 0, 1] * bandwidth[0, 1], volume[large], rtol=1e-2)
    with pytest.raises(ValueError, match="expected \\[B, "):
        CostNet(hidden=8, layers=1)(inputs, torch.zeros((2, n + 1), dtype=torch.int64))


def test_one_move_neighbours_move_exactly_one_group_to_an_allowed_device(tiny, paper2):
    problem = pe.Problem.make(tiny, paper2)
    allowed = np.asarray(problem.allowed, bool)
    start = random_placements(problem, 1)[0]
    neighbours = one_move_neighbours(start, allowed)
    assert len(neighbours) == allowed.sum() - tiny.n_groups
    assert ((neighbours != start).sum(axis=1) == 1).all()
    assert allowed[np.arange(tiny.n_groups)[None], neighbours].all()
    assert len({tuple(p) for p in neighbours}) == len(neighbours)


def test_refinement_lowers_the_prediction_and_keeps_memory_under_the_limit(tiny):
    problem = pe.Problem.make(tiny, pe.load_cluster("k80-2gpu"), budget=0)
    torch.manual_seed(1)
    net, inputs = CostNet(hidden=16, layers=2), cost_input(problem)
    start = np.where(problem.allowed[:, 1], 1, 0)
    refined, moves = refine(problem, start, net, inputs, margin=1.05)
    assert moves > 0 and problem.evaluations == 0
    assert net.predict(inputs, refined[None])[0] < net.predict(inputs, start[None])[0]
    limit = np.array([d.memory_bytes for d in problem.cluster.devices]) / 1.05
    assert (sequential_peak_bytes(tiny, problem.cluster, refined, problem.costs.seconds) <= limit).all()
    again, none = refine(problem, refined, net, inputs, margin=1.05)  # a local optimum stays
    assert none == 0 and (again == refined).all()
    few, taken = refine(problem, start, net, inputs, margin=1.05, max_moves=1)
    assert taken == 1 and (few != start).sum() == 1
    with pytest.raises(ValueError, match="margin=0.5"):
        refine(problem, start, net, inputs, margin=0.5)


def test_contiguous_splits_are_segments_along_the_group_order(tiny, paper2):
    allowed = np.asarray(pe.Problem.make(tiny, paper2).allowed, bool)
    splits = contiguous_splits(allowed, 20, np.random.default_rng(0))
    assert allowed[np.arange(tiny.n_groups)[None], splits].all()
    free = allowed.all(axis=1)  # groups every device runs keep their segment's device
    changes = (np.diff(splits[:, free], axis=1) != 0).sum(axis=1)
    assert changes.max() <= 11 and len({tuple(s) for s in splits}) > 1


def test_cost_model_checkpoint_round_trip_and_bad_files(tmp_path, tiny, paper2):
    problem = pe.Problem.make(tiny, paper2)
    torch.manual_seed(0)
    net, inputs = CostNet(hidden=8, layers=1), cost_input(problem)
    path = tmp_path / "cost_model.pt"
    save_cost_model(path, net, {"suite": "tiny"})
    loaded, meta = load_cost_model(path)
    placements = random_placements(problem, 3)
    assert meta == {"suite": "tiny"} and (loaded.hidden, loaded.layers) == (8, 1)
    np.testing.assert_array_equal(loaded.predict(inputs, placements), net.predict(inputs, placements))
    with pytest.raises(FileNotFoundError, match=f"no cost model checkpoint at .*missing.pt; set \\${COST_MODEL_ENV}"):
        load_cost_model(tmp_path / "missing.pt")
    config = Config(hidden=8, layers=1, heads=2)
    save_checkpoint(tmp_path / "placer.pt", config.network(4), config, {})
    with pytest.raises(CheckpointMismatchError, match="placer.pt is not a cost model checkpoint .*found kind None"):
        load_cost_model(tmp_path / "placer.pt")
    (tmp_path / "corrupt.pt").write_bytes(b"no")
    with pytest.raises(CheckpointMismatchError, match="corrupt.pt is not a readable cost model checkpoint"):
        load_cost_model(tmp_path / "corrupt.pt")


@pytest.mark.parametrize("argv, message", [
    (["--steps", "0"], "--steps"), (["--batch", "-1"], "--batch"), (["--lr", "0"], "--lr"), (["--seed", "-1"], "--seed"),
    (["--suite", "nope"], "unknown suite 'nope'"),
])
def test_cli_bad_values(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_cli_measures_trains_and_writes_its_run_folder(cost_run):
    out, printed = cost_run
    assert {p.name for p in out.iterdir()} >= {"cost_model.pt", "log.csv", "learning_curve.png", "placements"}
    data = load_dataset(out / "placements" / f"{ONE_TASK_NAME}.npz")
    assert data.placements.shape[0] == data.runtime_s.shape[0] > 1000 and data.ok.mean() > 0.5
    net, meta = load_cost_model(out / "cost_model.pt")
    assert meta["steps"] == 250 and meta["suite"] == ONE_TASK and meta["tasks"] == [ONE_TASK_NAME]
    # held-out placements of the graph it trained on are ranked far better than by chance
    rows = [line.split("|") for line in printed.splitlines() if line.startswith("| ") and "tiny" in line]
    assert len(rows) == 1 and float(rows[0][2]) > 0.5


def test_refined_zero_shot_through_run_suite_spends_no_evaluation(cost_run, tmp_path, monkeypatch):
    monkeypatch.setenv(COST_MODEL_ENV, str(cost_run[0] / "cost_model.pt"))
    rows = run_suite(ONE_TASK, ["agents.gnn_placer:place_zero_shot_refined"], tmp_path / "results.jsonl", budget=0,
                     progress=False)
    assert len(rows) == 1 and all(row["evaluations"] == 0 and row["ok"] for row in rows)
    monkeypatch.setenv(COST_MODEL_ENV, str(tmp_path / "absent.pt"))
    with pytest.raises(FileNotFoundError, match=COST_MODEL_ENV):
        place(pe.Problem.make(pe.load_benchmark("synthetic-tiny"), pe.load_cluster("k80-4gpu"), budget=0),
              refine="zero_shot")


def test_the_committed_cost_model_is_small_and_refines_an_unseen_graph(synth):
    assert PRETRAINED_COST_MODEL.stat().st_size < 2**20
    cluster = pe.load_cluster("k80-4gpu")
    problem = pe.Problem.make(synth, cluster, budget=0)
    placement = place(problem, refine="zero_shot")
    assert placement.shape == (synth.n_groups,) and problem.evaluations == 0
    assert pe.evaluate(synth, cluster, placement).ok
    assert pe.evaluate(synth, cluster, placement).runtime_s <= pe.evaluate(synth, cluster, place(problem)).runtime_s


def test_the_best_start_is_the_refined_start_predicted_faster_without_evaluations(synth):
    from agents.gnn_placer import Trainer, make_task
    from agents.gnn_placer.harness import best_start, memory_margin, mincut_start, refined_starts
    from baselines.partition import mincut

    cluster = pe.load_cluster("k80-2gpu")
    problem = pe.Problem.make(synth, cluster, budget=0)
    net, config, meta = load_network(None)
    cost, _ = load_cost_model(None)
    margin = memory_margin(meta, None)
    refined = refined_starts(Trainer(net, config), make_task(problem), cost, margin)
    assert list(refined) == ["zero-shot", "mincut"] and problem.evaluations == 0
    np.testing.assert_array_equal(refined["zero-shot"].start, place(problem))
    np.testing.assert_array_equal(refined["mincut"].start, mincut_start(problem, margin))
    inputs = cost_input(problem)
    placement, moves = refine(problem, refined["mincut"].start, cost, inputs, margin=margin)  # as refine() refines it
    np.testing.assert_array_equal(refined["mincut"].placement, placement)
    assert refined["mincut"].moves == moves
    for start in refined.values():  # each refined placement's prediction
        assert start.predicted == pytest.approx(float(cost.predict(inputs, start.placement[None])[0]), abs=1e-6)
    chosen = best_start(refined)
    assert refined[chosen].predicted == min(r.predicted for r in refined.values())
    np.testing.assert_array_equal(place(problem, refine="best_start"), refined[chosen].placement)
    assert problem.evaluations == 0 and pe.evaluate(synth, cluster, refined[chosen].placement).ok
    np.testing.assert_array_equal(refined["mincut"].start, mincut(problem))  # the small graph fits as MinCut places it


@pytest.mark.parametrize("folder, seed", [("seed1", 1), ("seed2", 2), ("today-seed0", 0), ("today-seed1", 1),
                                          ("today-seed2", 2)])
def test_the_pre_training_seeds_behind_the_readme_load_and_place_an_unseen_graph(synth, folder, seed):
    """docs/generalisation_seeds/<folder>/ holds a network and its cost model behind the README's three-seed tables."""
    folder = Path(__file__).resolve().parents[1] / "docs" / "generalisation_seeds" / folder
    assert load_network(folder / "checkpoint.pt")[2]["seed"] == seed
    assert load_cost_model(folder / "cost_model.pt")[1]["seed"] == seed
    problem = pe.Problem.make(synth, pe.load_cluster("k80-4gpu"), budget=0)
    placement = place(problem, checkpoint=folder / "checkpoint.pt")
    assert problem.evaluations == 0 and pe.evaluate(synth, problem.cluster, placement).ok


def test_a_stop_request_ends_training_with_its_files_written(one_task, tmp_path):
    import threading

    from agents.gnn_placer.cost_training import train_cost_model

    stop = threading.Event()
    stop.set()
    result = train_cost_model(tmp_path, suite=one_task, steps=100, progress=False, stop=stop)
    assert result.steps == 0 and result.evaluations > 1000
    assert {p.name for p in tmp_path.iterdir()} >= {"cost_model.pt", "log.csv", "learning_curve.png", "placements"}
    assert load_cost_model(tmp_path / "cost_model.pt")[1]["steps"] == 0


def test_holdout_experiment_groups_families_and_summarises_its_rows(tmp_path, capsys):
    import json

    from experiments.cost_model_holdout import family, main as holdout

    assert [family(b) for b in ("inception_v3-batch192", "gpt2", "random_cnn:3", "nmt")] == [
        "inception_v3", "gpt2", "random_cnn", "nmt"]
    rows = [{"left_out": "nmt", "choice": choice, "task": f"nmt-k80-{k}gpu", "seed": seed, "spearman_all": 0.9,
             "spearman_good": good + seed / 10, "pair_right": right, "pair_regret": 0.0 if right else 0.2}
            for choice, good, right in (("train", 0.5, False), ("train+cnn", 0.7, True)) for k in (2, 4)
            for seed in (0, 1)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert holdout(["--summarise", str(path)]) == 0
    printed = capsys.readouterr().out
    seed_0, rest = printed.split("seed 0:")[1].split("seed 1:")
    seed_1, both = rest.split("seeds 0, 1:")
    assert "| nmt | nmt-k80-2gpu | 0.900 | 0.900 | 0.500 | 0.700 | wrong (+20%) | right |" in seed_0
    assert "| nmt | nmt-k80-2gpu | 0.900 | 0.900 | 0.600 | 0.800 | wrong (+20%) | right |" in seed_1
    assert "train+cnn: over 1 left-out families, mean Spearman on good placements 0.700" in seed_0
    assert "train+cnn: over 1 left-out families, mean Spearman on good placements 0.750" in both
    assert "ordered right on 2 of 2 tasks" in seed_0 and "ordered right on 4 of 4 tasks" in both
    for argv, message in ((["--steps", "0"], "--steps: expected a positive integer"), ([], "--data is required"),
                          (["--summarise", str(tmp_path / "absent.jsonl")], "no such file")):
        with pytest.raises(SystemExit) as exit_:
            holdout(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_refinement_gain_experiment_prints_a_row_per_task_and_the_counts(one_task, capsys):
    from experiments.refinement_gain import main as gain

    assert gain(["--suite", one_task, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    rows = [line.split("|") for line in printed.splitlines() if line.startswith("| ") and "tiny" in line]
    assert len(rows) == 1 and all(float(r[3]) / float(r[2]) == pytest.approx(float(r[4]), rel=2e-3) for r in rows)
    assert "of 1 tasks that ran; geometric mean refined / zero-shot" in printed
    with pytest.raises(SystemExit) as exit_info:
        gain(["--suite", "nope"])
    assert exit_info.value.code == 2 and "--suite: unknown suite 'nope'" in capsys.readouterr().err


def test_zero_shot_validation_rows_set_placements_against_the_best_heuristic(one_task, tmp_path, capsys):
    import json

    from agents.gnn_placer.checkpoint import PRETRAINED
    from experiments.zero_shot_validation import main as validate
    from placement_env.harness.suites import load_suite

    out = tmp_path / "rows.jsonl"
    pair = ["--pair", "committed", str(PRETRAINED), str(PRETRAINED_COST_MODEL)]
    assert validate(["--suite", one_task, *pair, "--out", str(out), "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task"] for r in rows] == [t.name for t in load_suite(one_task)] == [ONE_TASK_NAME]
    for r in rows:
        assert r["zero_shot_ratio"] == pytest.approx(r["zero_shot_s"] / r["best_heuristic_s"])
        assert r["refined_ratio"] == pytest.approx(r["refined_s"] / r["best_heuristic_s"])
        assert len(r["zero_shot"]) == len(r["refined"]) and r["moves"] >= 0
        assert r["best_start"] == r["refined" if r["start"] == "zero-shot" else "mincut_refined"]
    within = {kind: sum(r[f"{kind}_ratio"] <= 1.15 for r in rows) for kind in ("zero_shot", "refined")}
    assert (f"all: zero-shot {within['zero_shot']} of 1 within 15%" in capsys.readouterr().out)
    with pytest.raises(SystemExit) as exit_info:
        validate(["--pair", "x", str(tmp_path / "none.pt"), str(PRETRAINED_COST_MODEL)])
    assert exit_info.value.code == 2 and "none.pt' is not a file" in capsys.readouterr().err
