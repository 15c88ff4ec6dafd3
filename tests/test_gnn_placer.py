"""The generalising GNN placer (agents/gnn_placer) and the train / test suites it is measured on."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import placement_env as pe
from agents.common.advantages import centred_advantages
from agents.gnn_placer import (CHECKPOINT_ENV, DEVICE_SLOTS, PRETRAINED, Config, Trainer, load_network, make_task,
                               place, save_checkpoint)
from agents.gnn_placer.cli import main
from agents.gnn_placer.memory_fit import ESTIMATE
from agents.gnn_placer.network import DECODERS
from agents.gnn_placer.policy import exploration_weight, greedy, likeliest, mixture, sample
from agents.gnn_placer.rewards import FAILED_RATIO, rewards
from agents.gnn_placer.trainer import ADVANTAGE_CLIP
from placement_env.errors import CheckpointMismatchError
from placement_env.harness import load_suite, run_suite


def task_of(graph, cluster_name: str, name: str = ""):
    return make_task(pe.Problem.make(graph, pe.load_cluster(cluster_name), benchmark=graph.name), name)


def small_config(decoder: str = "independent") -> Config:
    return Config(hidden=16, layers=2, heads=2, samples=8, graphs_per_update=2, decoder=decoder)


def test_suites_split_families_on_the_k80_machines():
    train, test = load_suite("generalisation-train"), load_suite("generalisation-test")
    assert {t.benchmark for t in train} == {"rnnlm", "nmt", "inception_v3", "gpt2", "inception_v3-batch192",
                                            "inception_v3-batch240", "gpt2-batch4", "gpt2-batch6"}
    assert {t.benchmark for t in test} == {"resnet50", "transformer", "bert"}
    for task in train + test:
        assert task.cluster == f"k80-{task.gpus}gpu" and task.gpus in (2, 4)
    assert len(load_suite("generalisation")) == 20  # the synthetic suite stays
    with_vgg = load_suite("experiments.suites:GENERALISATION_TRAIN_VGG")
    assert with_vgg[:len(train)] == train
    assert {t.benchmark for t in with_vgg[len(train):]} == {"vgg16", "vgg16-batch352"}
    with_bn = load_suite("experiments.suites:GENERALISATION_TRAIN_VGG_BN")
    assert with_bn[:len(train)] == train
    assert {t.benchmark for t in with_bn[len(train):]} == {"vgg16_bn-batch128", "vgg16_bn-batch176"}
    with_mobilenet = load_suite("experiments.suites:GENERALISATION_TRAIN_MOBILENET")
    assert with_mobilenet[:len(train)] == train
    assert {t.benchmark for t in with_mobilenet[len(train):]} == {"mobilenet_v2-batch320", "mobilenet_v2-batch416"}
    with_random = load_suite("experiments.suites:GENERALISATION_TRAIN_RANDOM_CNN")
    assert with_random[:len(train)] == train
    assert {t.benchmark for t in with_random[len(train):]} == {f"random_cnn:{seed}" for seed in range(4)}
    validation = load_suite("generalisation-validation")  # families in neither split nor the cost model's graphs
    assert {t.benchmark for t in validation} == {"vgg16", "vgg16-batch352", "vgg16_bn-batch128", "vgg16_bn-batch176",
                                                 "mobilenet_v2-batch320", "mobilenet_v2-batch416",
                                                 "mlp_mixer-batch48", "mlp_mixer-batch60"}
    cost_model = load_suite("agents.gnn_placer.cost_training:COST_MODEL_SUITE")  # the cost model's train tasks
    assert load_suite("experiments.suites:GENERALISATION_TRAIN_RANDOM_CNN_8") == cost_model
    seen = {t.benchmark.split("-")[0] for t in train + test + cost_model}
    assert len(validation) == 16 and not seen & {t.benchmark.split("-")[0] for t in validation}
    assert cost_model[:len(with_random)] == with_random
    assert len(cost_model) == len(train) + 2 * 8
    with_test_graph = load_suite("experiments.suites:GENERALISATION_TRAIN_PLUS_RESNET50")
    assert with_test_graph[:len(train)] == train
    assert [t.name for t in with_test_graph[len(train):]] == ["resnet50-k80-2gpu", "resnet50-k80-4gpu"]


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("cluster", ["k80-2gpu", "k80-4gpu"])
def test_inputs_and_samples_respect_the_allowed_devices(tiny, cluster, decoder):
    task = task_of(tiny, cluster)
    n_devices = 1 + int(cluster[4])
    inputs = task.inputs
    assert inputs.features.shape[0] == tiny.n_groups and inputs.allowed.shape == (tiny.n_groups, DEVICE_SLOTS)
    assert not inputs.allowed[:, n_devices:].any()  # slots the cluster lacks
    net = small_config(decoder).network(inputs.features.shape[1])
    drawn = sample(net, net(inputs), 256, torch.Generator().manual_seed(0))
    assert drawn.actions.shape == (256, tiny.n_groups)
    assert set(drawn.actions.unique().tolist()) == set(range(n_devices))
    # every third group may go to one device only (as a group without GPU kernels may go to the CPU only)
    restricted = inputs.allowed.clone()
    only = torch.arange(0, tiny.n_groups, 3)
    restricted[only] = False
    restricted[only, only % n_devices] = True
    encoding = net(dataclasses.replace(inputs, allowed=restricted))
    assert encoding.logits.shape == (tiny.n_groups, DEVICE_SLOTS)
    drawn = sample(net, encoding, 256, torch.Generator().manual_seed(0))
    assert bool(restricted.gather(1, drawn.actions.T).all())
    assert bool(restricted[torch.arange(tiny.n_groups), greedy(net, encoding)[0]].all())
    assert torch.isfinite(drawn.log_prob).all() and drawn.log_prob.requires_grad


def test_feature_width_is_the_same_for_2_and_4_gpus(tiny):
    assert task_of(tiny, "k80-2gpu").inputs.features.shape == task_of(tiny, "k80-4gpu").inputs.features.shape


def test_rewards_rank_failures_below_every_placement_that_runs():
    capacity = np.array([100.0, 10.0])
    ok = pe.Measurement(runtime_s=50.0, ok=True)
    small = pe.Measurement(runtime_s=math.inf, ok=False, failure="oom", peak_bytes=np.array([1, 11]))
    large = pe.Measurement(runtime_s=math.inf, ok=False, failure="oom", peak_bytes=np.array([1, 40]))
    r = rewards([ok, small, large], lower_bound=1.0, capacity=capacity)
    assert r[0] == pytest.approx(-math.sqrt(50.0)) and r[0] > r[1] > r[2]
    assert r[2] == pytest.approx(-math.sqrt(2 * FAILED_RATIO))
    a = centred_advantages(r, ADVANTAGE_CLIP)
    assert a.mean() == pytest.approx(0.0, abs=1e-12) and a.std() == pytest.approx(1.0)
    assert not centred_advantages(np.array([-2.0, -2.0]), ADVANTAGE_CLIP).any()


@pytest.mark.parametrize("decoder", DECODERS)
def test_more_than_1000_groups(decoder):
    graph = pe.load_benchmark("synthetic-tiny", layers=12, width=14, max_groups=4000)
    assert graph.n_groups > 1000
    task = task_of(graph, "k80-4gpu")
    trainer = Trainer(small_config(decoder).network(task.inputs.features.shape[1]), small_config(decoder))
    stats = trainer.update([task], samples=4)
    assert stats[0].success_rate > 0 and task.problem.evaluations == 4
    assert trainer.greedy(task).shape == (graph.n_groups,)


def test_training_across_graphs_improves_the_mean_reward(tiny, synth):
    tasks = [task_of(tiny, "k80-2gpu", "rnnlm"), task_of(synth, "k80-4gpu", "synthetic")]
    config = Config(hidden=32, layers=2, heads=2, samples=16, graphs_per_update=2, lr=3e-3)
    torch.manual_seed(0)
    trainer = Trainer(config.network(tasks[0].inputs.features.shape[1]), config, seed=0)
    history = [np.mean([s.mean_reward for s in trainer.update(tasks)]) for _ in range(40)]
    assert np.mean(history[-5:]) > np.mean(history[:5]) + 0.05 * abs(np.mean(history[:5]))


def test_checkpoint_round_trip_and_bad_files(tmp_path, tiny):
    task = task_of(tiny, "k80-2gpu")
    config = small_config()
    net = config.network(task.inputs.features.shape[1])
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, net, config, {"suite": "tiny"})
    loaded, loaded_config, meta = load_network(path)
    assert loaded_config == config and meta == {"suite": "tiny"}
    with torch.no_grad():
        assert torch.allclose(loaded(task.inputs).logits, net(task.inputs).logits, atol=1e-6)
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*missing.pt"):
        load_network(tmp_path / "missing.pt")
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointMismatchError, match="corrupt.pt is not a readable checkpoint"):
        load_network(tmp_path / "corrupt.pt")
    torch.save({"format": 1, "config": Path("/")}, tmp_path / "crafted.pt")  # asks for a Python object
    with pytest.raises(CheckpointMismatchError, match="asks for the Python object .*no code is run") as error:
        load_network(tmp_path / "crafted.pt")
    assert "weights_only" not in str(error.value)
    torch.save({"format": 99}, tmp_path / "other.pt")
    with pytest.raises(CheckpointMismatchError, match="format 1 .found 99"):
        load_network(tmp_path / "other.pt")


def test_the_committed_checkpoint_is_small_and_places_an_unseen_graph(synth):
    assert PRETRAINED.stat().st_size < 2 * 2**20
    problem = pe.Problem.make(synth, pe.load_cluster("k80-4gpu"), budget=0)
    placement = place(problem)
    assert placement.shape == (synth.n_groups,) and problem.evaluations == 0
    assert pe.evaluate(synth, problem.cluster, placement).ok


@pytest.mark.parametrize("argv, message", [
    (["--minutes", "0"], "--minutes"), (["--minutes", "nan"], "--minutes"), (["--budget", "-5"], "--budget"),
    (["--seed", "-1"], "--seed"), (["--suite", "nope"], "unknown suite 'nope'"), (["--samples", "0"], "--samples"),
    (["--layers", "-1"], "--layers"),
])
def test_cli_bad_values(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_cli_trains_and_writes_its_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["--suite", "tiny", "--budget", "100", "--out-dir", str(out), "--no-progress"]) == 0
    assert {p.name for p in out.iterdir()} >= {"checkpoint.pt", "log.csv", "learning_curve.png"}
    assert "rnnlm-tiny-2gpu" in capsys.readouterr().out
    load_network(out / "checkpoint.pt")
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        main(["--suite", "tiny", "--out-dir", str(tmp_path / "file")])


def test_harness_methods_through_run_suite(tmp_path, monkeypatch, tiny, paper2):
    config = Config(hidden=16, layers=1, heads=2)
    task = task_of(tiny, "paper-2gpu")
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, config.network(task.inputs.features.shape[1]), config, {"memory_margin": 1.1, "memory_estimate": ESTIMATE})
    monkeypatch.setenv(CHECKPOINT_ENV, str(path))
    results = tmp_path / "results.jsonl"
    zero = run_suite("tiny", ["agents.gnn_placer:place_zero_shot"], results, budget=0, progress=False)
    assert len(zero) == 3 and all(row["evaluations"] == 0 and row["failure"] != "method_error" for row in zero)
    tuned = run_suite("tiny", ["agents.gnn_placer:place_fine_tune"], results, budget=40, progress=False)
    for before, after in zip(zero, tuned):
        assert 1 < after["evaluations"] <= 40 and after["ok"]
        if before["ok"]:  # fine-tuning evaluates the zero-shot placement first and keeps the best
            assert after["runtime_s"] <= before["runtime_s"] + 1e-12
    with pytest.raises(ValueError, match="budget=-1"):
        run_suite("tiny", ["single_gpu"], results, budget=-1, progress=False)
    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path / "absent.pt"))
    problem = pe.Problem.make(tiny, paper2, budget=10)
    with pytest.raises(FileNotFoundError, match=CHECKPOINT_ENV):
        place(problem, fine_tune=True)


@pytest.mark.parametrize("name", ["pretrained", "placebench-v1"])
def test_the_committed_networks_load_by_name_and_place(name, tiny, paper2):
    from agents.gnn_placer.checkpoint import COMMITTED

    meta = load_network(name)[2]
    assert COMMITTED[name].is_file() and meta["memory_margin"] >= 1.0
    spec = pe.method("agents.gnn_placer:place_zero_shot", checkpoint=name)
    assert spec.args == {"checkpoint": name}  # rows record the name, not a path of this machine
    placement = pe.solve(spec, pe.Problem.make(tiny, paper2, budget=0)).placement
    assert len(placement) == tiny.n_groups
    if name == "placebench-v1":  # trained on the benchmark's train split, none of whose graphs is a test task
        assert meta["suite"] == "placebench-v1/generalisation-train"
        tested = {t.benchmark for t in load_suite("placebench-v1/generalisation")}
        assert not {task.split("@")[0] for task in meta["tasks"]} & tested


def test_unlimited_fine_tune_budget_is_bounded(tmp_path, monkeypatch, synth):
    config = Config(hidden=16, layers=1, heads=2)
    problem = pe.Problem.make(synth, pe.load_cluster("k80-2gpu"))
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, config.network(make_task(problem).inputs.features.shape[1]), config, {"memory_margin": 1.1, "memory_estimate": ESTIMATE})
    place(problem, fine_tune=True, checkpoint=path, samples=50)
    assert problem.evaluations == 1000


@pytest.mark.parametrize("field, value", [("hidden", 0), ("samples", 0), ("lr", 0.0), ("entropy", -1.0),
                                          ("graphs_per_update", 1.5), ("self_imitation", -0.5),
                                          ("decoder", "beam"), ("explore", -1.0), ("local_moves", -1),
                                          ("local_moves", 1.0)])
def test_config_bad_values(field, value):
    with pytest.raises(ValueError, match=f"Config.{field}={value!r}"):
        Config(**{field: value})


@pytest.mark.parametrize("decoder", DECODERS)
def test_imitation_reaches_the_target_placement(tiny, decoder):
    from agents.gnn_placer.imitation import imitate

    torch.manual_seed(0)  # the network's initial weights come from torch's global generator: whatever ran before
    task = task_of(tiny, "k80-4gpu")
    target = np.arange(tiny.n_groups) * 4 // tiny.n_groups + 1  # four contiguous chunks, one per GPU
    config = Config(hidden=32, layers=2, heads=2, lr=3e-3, decoder=decoder)
    trainer = Trainer(config.network(task.inputs.features.shape[1]), config)
    steps, accuracy = imitate(trainer, [task], [target], steps=300, accuracy=0.95)
    assert accuracy >= 0.95 and steps < 300
    assert (trainer.greedy(task) == target).mean() >= 0.95


def test_a_stop_request_ends_pretraining_with_its_files_written(tmp_path):
    import threading

    from agents.gnn_placer.training import pretrain

    stop = threading.Event()
    stop.set()
    result = pretrain(tmp_path, suite="tiny", minutes=5, seed=0, config=small_config(), imitation_steps=1,
                      progress=False, stop=stop)
    assert result.updates == 0 and set(result.greedy) == {t.name for t in load_suite("tiny")}
    meta = load_network(tmp_path / "checkpoint.pt")[2]
    assert meta["updates"] == 0 and meta["memory_margin"] >= 1.0


def test_the_memory_margin_command_shows_and_remeasures_a_checkpoints_margin(tmp_path, tiny, capsys):
    from agents.gnn_placer.harness import memory_margin
    from agents.gnn_placer.memory_margin import main as margin_main

    config = small_config()
    path = tmp_path / "old.pt"
    net = config.network(task_of(tiny, "paper-2gpu").inputs.features.shape[1])
    save_checkpoint(path, net, config, {"suite": "tiny", "seed": 0, "memory_margin": 3.0})  # index order's
    assert margin_main([str(path)]) == 0
    assert "memory margin 3.0, measured against the estimate 'sequential, index order'" in capsys.readouterr().out
    assert margin_main([str(path), "--write"]) == 0
    meta = load_network(path)[2]
    assert meta["memory_estimate"] == ESTIMATE and memory_margin(meta, path) == meta["memory_margin"] >= 1.0
    assert meta["suite"] == "tiny" and f"stored in {path}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        margin_main([str(tmp_path / "absent.pt")])
    assert "no checkpoint at" in capsys.readouterr().err


def test_pretraining_with_one_seed_and_budget_gives_the_same_network_twice(tmp_path):
    from agents.gnn_placer.training import pretrain

    config = small_config()
    budget = 4 * config.samples * config.graphs_per_update  # a few updates; the budget, not the clock, stops them
    results = [pretrain(tmp_path / run, suite="tiny", minutes=5, budget=budget, seed=0, config=config,
                        imitation_steps=2, progress=False) for run in ("first", "second")]
    assert results[0].updates == results[1].updates >= 2
    first, second = (load_network(tmp_path / run / "checkpoint.pt")[0].state_dict() for run in ("first", "second"))
    for name, weights in first.items():
        assert torch.equal(weights, second[name]), name
    logs = [[line.split(",")[:2] + line.split(",")[3:] for line in (tmp_path / run / "log.csv").read_text().splitlines()]
            for run in ("first", "second")]  # every column but the wall-clock seconds
    assert logs[0] == logs[1]


def _with_gpu_memory(cluster, device: int, memory_bytes: int):
    devices = list(cluster.devices)
    devices[device] = dataclasses.replace(devices[device], memory_bytes=int(memory_bytes))
    return dataclasses.replace(cluster, devices=tuple(devices))


def test_memory_fit_moves_groups_off_a_full_gpu_to_the_gpu_with_room(tiny, paper2):
    from agents.gnn_placer.memory_fit import fit_in_memory

    allowed = pe.Problem.make(tiny, paper2).allowed
    on_gpu1 = np.where(allowed[:, 1], 1, 0)
    need = pe.sequential_peak_bytes(tiny, paper2, on_gpu1)[1]
    small = _with_gpu_memory(paper2, 1, 0.6 * need)  # GPU 1 holds 60% of what the placement needs there
    problem = pe.Problem.make(tiny, small)
    # the network's view: GPU 1 first, then the CPU, then GPU 2 (the CPU must still not be chosen: GPUs first)
    log_probs = np.log(np.where(allowed, np.array([0.3, 0.6, 0.1]), 1e-300))
    fitted = fit_in_memory(problem, on_gpu1, log_probs, margin=1.0)
    assert pe.sequential_peak_bytes(tiny, small, fitted, problem.costs.seconds)[1] <= 0.6 * need
    moved = fitted != on_gpu1
    assert moved.any() and (fitted[moved] == 2).all()
    assert (fitted[~moved] == on_gpu1[~moved]).all()
    # a placement that fits is returned as it is; bad arguments are named
    roomy = pe.Problem.make(tiny, paper2)
    assert (fit_in_memory(roomy, on_gpu1, log_probs, margin=1.1) == on_gpu1).all()
    with pytest.raises(ValueError, match="margin=0.5"):
        fit_in_memory(roomy, on_gpu1, log_probs, margin=0.5)
    with pytest.raises(ValueError, match="log_probs has shape"):
        fit_in_memory(roomy, on_gpu1, log_probs[:, :2], margin=1.1)


def test_zero_shot_placement_fits_the_memory_estimate(tiny, paper2):
    allowed = pe.Problem.make(tiny, paper2).allowed
    need = pe.sequential_peak_bytes(tiny, paper2, np.where(allowed[:, 1], 1, 0))[1]
    small = _with_gpu_memory(_with_gpu_memory(paper2, 1, 0.5 * need), 2, 0.5 * need)
    problem = pe.Problem.make(tiny, small, budget=0)
    placement = place(problem)
    margin = load_network(None)[2]["memory_margin"]
    assert 1.0 <= margin < 1.5
    estimate = pe.sequential_peak_bytes(tiny, small, placement, problem.costs.seconds)
    assert (estimate[1:] <= 0.5 * need / margin).all()


def test_the_margin_is_the_largest_simulated_over_estimated_peak(tiny, paper2, tmp_path):
    from agents.gnn_placer.harness import memory_margin
    from agents.gnn_placer.memory_fit import peak_ratios, placements_to_check, train_margin
    from placement_env.errors import CheckpointMismatchError

    problem = pe.Problem.make(tiny, _with_gpu_memory(paper2, 1, 2**40))
    greedy = np.where(problem.allowed[:, 1], 1, 0)
    placements = placements_to_check(problem, greedy, np.random.default_rng(0))
    assert len(placements) == 5 and (placements[1] == greedy).all()
    assert all(r.size == 0 for r in peak_ratios(problem, placements))  # tiny's GPUs are far from full
    assert train_margin([problem], [greedy]) == 1.0
    ratios = peak_ratios(problem, placements, min_share=0)
    for placement, ratio in zip(placements, ratios):
        estimate = pe.sequential_peak_bytes(tiny, problem.cluster, placement, problem.costs.seconds)
        used = np.flatnonzero(estimate[1:] > 0) + 1
        assert np.allclose(ratio, problem.evaluator(placement).peak_bytes[used] / estimate[used])
    with pytest.raises(CheckpointMismatchError, match="no memory margin"):
        memory_margin({}, tmp_path / "old.pt")
    with pytest.raises(CheckpointMismatchError, match="old.pt has a memory margin measured against the estimate "
                                                      "'sequential, index order'.*; remeasure it with python -m "
                                                      "agents.gnn_placer.memory_margin --write .*old.pt"):
        memory_margin({"memory_margin": 1.1}, tmp_path / "old.pt")
    assert memory_margin({"memory_margin": 1.1, "memory_estimate": ESTIMATE}, None) == 1.1
    with pytest.raises(ValueError, match="order='topological'"):
        peak_ratios(problem, placements, order="topological")


def test_imitated_placements_are_relabelled_by_the_clusters_symmetries(tiny):
    task = task_of(tiny, "k80-2gpu")
    allowed = task.problem.allowed
    on_gpu = {gpu: np.where(allowed[:, gpu], gpu, 0) for gpu in (1, 2)}
    assert task.symmetries.tolist() == [[0, 1, 2], [0, 2, 1]]
    # the warm start's targets: one labelling whichever die the heuristic chose
    assert (task.canonical(on_gpu[2]) == on_gpu[1]).all() and (task.canonical(on_gpu[1]) == on_gpu[1]).all()
    # self-imitation's target: the labelling the network already finds likeliest (here GPU 2)
    candidates = torch.from_numpy(task.relabellings(on_gpu[1]))
    assert (candidates[0] == torch.from_numpy(on_gpu[1])).all()
    net = small_config().network(task.inputs.features.shape[1])
    encoding = net(task.inputs)
    preferred = torch.log(torch.tensor([0.1, 0.2, 0.7] + [1.0] * (DEVICE_SLOTS - 3)))
    encoding = dataclasses.replace(encoding, logits=encoding.logits.masked_fill(
        torch.isfinite(encoding.logits), 0.0) + preferred)
    target, log_probs = likeliest(net, encoding, candidates)
    assert (target.numpy() == on_gpu[2]).all() and log_probs.shape == (tiny.n_groups, DEVICE_SLOTS)


@pytest.mark.parametrize("decoder", ["independent", "sequential"])
def test_the_likeliest_relabelling_is_scored_as_the_batched_pass_scores_it(tiny, monkeypatch, decoder):
    from agents.gnn_placer import policy

    task = task_of(tiny, "k80-4gpu")
    assert len(task.symmetries) > 2
    net = small_config(decoder).network(task.inputs.features.shape[1])
    torch.manual_seed(1)
    for parameter in net.parameters():  # the placement-aware head's output layer starts at zero
        parameter.data.normal_(0, 0.3)
    encoding = net(task.inputs)
    candidates = torch.from_numpy(task.relabellings(np.where(task.problem.allowed[:, 1], 1, 0)))
    full = net.group_log_probs(encoding, candidates)
    monkeypatch.setattr(policy, "SCORING_CHUNK", 5)  # several chunks for the sequential decoder
    assert torch.equal(policy.log_likelihoods(net, encoding, candidates), policy.score(full.detach(), candidates))
    target, log_probs = likeliest(net, encoding, candidates)
    best = int(torch.argmax(policy.score(full.detach(), candidates)))
    assert torch.equal(target, candidates[best]) and torch.equal(log_probs, full[best]) and log_probs.requires_grad


def test_groups_on_the_cpu_return_to_gpus_with_room(tiny, paper2):
    from agents.gnn_placer.memory_fit import return_to_gpus

    allowed = pe.Problem.make(tiny, paper2).allowed
    on_cpu = np.zeros(tiny.n_groups, np.int64)
    log_probs = np.log(np.where(allowed, np.array([0.6, 0.3, 0.1]), 1e-300))  # the network likes the CPU
    roomy = pe.Problem.make(tiny, paper2)
    # room for everything: every group that may run on a GPU goes to its likeliest GPU (GPU 1)
    assert (return_to_gpus(roomy, on_cpu, log_probs, margin=1.0) == np.where(allowed[:, 1], 1, 0)).all()
    # GPU 1 holds a third of what all groups need there, GPU 2 nothing: some groups stay on the CPU
    need = pe.sequential_peak_bytes(tiny, paper2, np.where(allowed[:, 1], 1, 0), roomy.costs.seconds)[1]
    small = _with_gpu_memory(_with_gpu_memory(paper2, 1, need // 3), 2, 1)
    problem = pe.Problem.make(tiny, small)
    placement = return_to_gpus(problem, on_cpu, log_probs, margin=1.0)
    assert 0 < (placement == 1).sum() < allowed[:, 1].sum() and not (placement == 2).any()
    assert pe.sequential_peak_bytes(tiny, small, placement, problem.costs.seconds)[1] <= need // 3
    with pytest.raises(ValueError, match="margin=0.9"):
        return_to_gpus(problem, on_cpu, log_probs, margin=0.9)


def _sequential_net(task, seed: int = 0):
    """A sequential-decoder network whose placement-aware head is not at its zero start."""
    torch.manual_seed(seed)
    net = small_config("sequential").network(task.inputs.features.shape[1])
    with torch.no_grad():
        net.placement_aware.out.weight.normal_(0.0, 3.0)
        net.placement_aware.out.bias.fill_(0.5)
        net.placement_aware.features.weight.mul_(5.0)
    return net


def test_sequential_features_count_only_the_groups_placed_before(tiny):
    from agents.gnn_placer.decoder import placement_features

    inputs = task_of(tiny, "k80-2gpu").inputs
    n = tiny.n_groups
    assert bool((inputs.earlier_src < inputs.earlier_dst).all())
    assert bool((torch.diff(inputs.earlier_dst) >= 0).all())  # by later group, as the compiled loop reads them
    actions = torch.from_numpy(np.arange(n) % 3)[None]
    features = placement_features(inputs, actions, DEVICE_SLOTS)[0]
    assert features.shape == (n, DEVICE_SLOTS, 5)
    assert features[0, :, :4].abs().sum() == 0  # nothing placed before the first group
    assert features[1:, :, 1].argmax(dim=1).tolist() == actions[0, :-1].tolist()  # the previous group's device
    load = inputs.compute_load.double()
    assert features[-1, 1, 2].item() == pytest.approx(load[:-1][actions[0, :-1] == 1].sum().item(), rel=1e-5)
    assert features[:, :3, 4].tolist() == [[0.0, 1.0, 1.0]] * n  # the CPU, then two GPUs
    # a group's exchanged bytes with earlier groups are shares of all it exchanges
    assert float(features[:, :, 0].sum(dim=1).max()) <= 1.0 + 1e-5
    changed = actions.clone()
    changed[0, n // 2:] = 0  # the devices of later groups do not change an earlier group's features
    # (up to float32 rounding: a group's prefix is the cumulative sum less its own load, so its own device can move
    # the last digit; group n // 2 is the first whose device changed)
    torch.testing.assert_close(placement_features(inputs, changed, DEVICE_SLOTS)[0, :n // 2 + 1],
                               features[:n // 2 + 1], rtol=1e-6, atol=0)


@pytest.mark.parametrize("cluster", ["k80-2gpu", "k80-4gpu"])
def test_sequential_decoding_matches_its_teacher_forced_log_probs(tiny, cluster):
    task = task_of(tiny, cluster)
    net = _sequential_net(task)
    with torch.no_grad():
        encoding = net(task.inputs)
        placement, log_probs = greedy(net, encoding)
        # the compiled loop's greedy choice is the likeliest device under the batched features, group by group
        assert torch.equal(log_probs.argmax(dim=1), placement)
        independent = encoding.logits.argmax(dim=1)
        assert not torch.equal(placement, independent)  # the head changes decisions
        drawn = sample(net, encoding, 4000, torch.Generator().manual_seed(1))
    # sampled placements follow the teacher-forced probabilities: the first group's device frequencies, and the
    # second group's given the first group's device
    first = torch.bincount(drawn.actions[:, 0], minlength=DEVICE_SLOTS).double() / 4000
    lp = net.group_log_probs(encoding, drawn.actions).detach()
    assert torch.allclose(first, lp[0, 0].exp().double(), atol=0.03)
    for device in range(DEVICE_SLOTS):
        rows = drawn.actions[:, 0] == device
        if rows.sum() > 500:
            second = torch.bincount(drawn.actions[rows, 1], minlength=DEVICE_SLOTS).double() / rows.sum()
            assert torch.allclose(second, lp[rows][0, 1].exp().double(), atol=0.05)


def test_an_untrained_sequential_head_decodes_as_the_encoder(tiny):
    task = task_of(tiny, "k80-4gpu")
    torch.manual_seed(0)
    net = small_config("sequential").network(task.inputs.features.shape[1])
    with torch.no_grad():
        encoding = net(task.inputs)
        assert torch.equal(greedy(net, encoding)[0], encoding.logits.argmax(dim=1))


def test_sequential_checkpoint_round_trip(tmp_path, tiny):
    task = task_of(tiny, "k80-2gpu")
    net = _sequential_net(task)
    save_checkpoint(tmp_path / "seq.pt", net, small_config("sequential"), {})
    loaded, config, _ = load_network(tmp_path / "seq.pt")
    assert config.decoder == "sequential"
    assert (Trainer(loaded, config).greedy(task) == Trainer(net, config).greedy(task)).all()


@pytest.mark.parametrize("decoder", DECODERS)
def test_exploring_samples_come_from_the_mixture_with_the_uniform_distribution(tiny, decoder):
    """With ``explore``, each group's device is the policy's draw but, with probability explore / n, one drawn
    uniformly among its allowed devices; the log-probabilities are that mixture's. Without it, the draws are the
    policy's alone (the same generator gives the same placements as before the option existed)."""
    task = task_of(tiny, "k80-4gpu")
    net = _sequential_net(task) if decoder == "sequential" else small_config().network(task.inputs.features.shape[1])
    n = tiny.n_groups
    with torch.no_grad():
        net.head[-1].weight.mul_(30.0)  # a peaked policy, as a pre-trained one is, so the mixture differs from it
        encoding = net(task.inputs)
        plain = sample(net, encoding, 64, torch.Generator().manual_seed(3))
        assert torch.equal(plain.actions, net.draw(encoding, 64, torch.Generator().manual_seed(3)))
        weight = exploration_weight(n / 4, n)
        assert weight == 0.25 and exploration_weight(10 * n, n) == 0.5
        drawn = sample(net, encoding, 4000, torch.Generator().manual_seed(1), explore=n / 4)
        log_probs = net.group_log_probs(encoding, drawn.actions)
        mixed = mixture(log_probs, weight)
    assert torch.allclose(drawn.log_prob, mixed.gather(2, drawn.actions[..., None])[..., 0].sum(dim=1), atol=1e-4)
    allowed = task.inputs.allowed
    assert bool(allowed.gather(1, drawn.actions.T).all())
    assert torch.allclose(mixed.exp().sum(dim=2), torch.ones(1), atol=1e-5) and (mixed.exp()[:, ~allowed] == 0).all()
    # the first group's device frequencies are the mixture's (its probabilities do not depend on earlier groups)
    first = torch.bincount(drawn.actions[:, 0], minlength=DEVICE_SLOTS).double() / 4000
    assert torch.allclose(first, mixed[0, 0].exp().double(), atol=0.03)
    policy_only = log_probs[0, 0].exp().double()
    assert not torch.allclose(policy_only, mixed[0, 0].exp().double(), atol=0.03)  # the mixture is what shows


def test_local_moves_in_an_update_stay_next_to_the_best_placement(tiny):
    """With ``local_moves``, once the problem has a best placement the last placements of each update are it with
    1-4 groups moved to other allowed devices, none twice; the update's statistics are of the policy's samples."""
    task = task_of(tiny, "k80-4gpu")
    config = dataclasses.replace(small_config(), samples=6, local_moves=3, explore=1.0)
    trainer = Trainer(config.network(task.inputs.features.shape[1]), config, seed=0)
    seen = []
    evaluate = task.problem.evaluate_batch

    def recording(placements):
        seen.append(np.array(placements))
        return evaluate(placements)

    task.problem.evaluate_batch = recording
    trainer.update([task])
    assert len(seen[0]) == 6  # no best yet: six samples of the policy
    for _ in range(3):
        best = np.array(task.problem.best.placement)
        stats = trainer.update([task])[0]
        moved = seen[-1][3:]
        changed = (moved != best).sum(axis=1)
        assert len(seen[-1]) == 6 and changed.min() >= 1 and changed.max() <= 4
        assert task.problem.allowed[np.arange(tiny.n_groups)[None], moved].all()
        assert len({p.tobytes() for p in moved}) == 3
        assert stats.success_rate in (0.0, 1 / 3, 2 / 3, 1.0)  # of the three samples
    assert task.problem.evaluations == 24


def test_fine_tuning_on_two_threads_repeats_bit_for_bit():
    """Two fine-tunings from one seed on two torch threads end on the same weights (without torch's
    deterministic algorithms some CPU sums change order from run to run on two threads)."""
    from agents.common.torch_threads import torch_threads
    from agents.gnn_placer.harness import FINE_TUNING, _network

    graph = pe.load_benchmark("gpt2")
    weights = []
    for _ in range(2):
        net, config, _ = _network("placebench-v1")
        task = task_of(graph, "dgx1-v100-4gpu")
        with torch_threads(2):
            trainer = Trainer(net, dataclasses.replace(config, **FINE_TUNING), seed=3)
            for _ in range(6):
                trainer.update([task], 16)
        weights.append(torch.cat([v.flatten() for v in net.state_dict().values()]))
    assert torch.equal(weights[0], weights[1])
