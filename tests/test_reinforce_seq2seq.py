"""The paper's REINFORCE seq2seq agent: policy, training, checkpoints, harness method, CLI."""
from __future__ import annotations

import csv
import json
import math
import pathlib
import socket

import numpy as np
import pytest
import torch

from agents.reinforce_seq2seq import (CHECKPOINT, FINE_TUNING, WARM_START_CANDIDATES, Config, Seq2SeqPolicy, Trainer,
                                      group_features, load_checkpoint, main, place, train)
from agents.common.run_files import BEST_JSON, LOG
import placement_env as pe
from placement_env import CheckpointMismatchError
from placement_env.placement import Measurement
from tf_helpers import tensorboard_scalars

# the command lines run in this test process: two torch threads (their default) beside the other test
# process wait on each other for most of a run
ONE_THREAD = ("--threads", "1")
# a warm start imitated to 0.9 per group instead of 0.999 (a warm-started rnnlm-tiny run: 6 s instead of 35), for
# the command-line tests that check what a run writes, not how closely it imitates
QUICK_WARM_START = ("--warm-start-prob", "0.9")


def toy_policy(n: int = 5, d: int = 3, f: int = 4, hidden: int = 8, seed: int = 0):
    torch.manual_seed(seed)
    policy = Seq2SeqPolicy(f, d, hidden=hidden)
    features = torch.randn(n, f)
    allowed = torch.ones(n, d, dtype=torch.bool)
    allowed[1, 0] = False
    allowed[3, 1:] = False  # group 3 may only go to device 0
    return policy, features, allowed


@pytest.mark.parametrize("explore", [0.0, 0.5])
def test_sample_shapes_and_masking(explore):
    policy, features, allowed = toy_policy()
    g = torch.Generator().manual_seed(0)
    actions, log_prob, entropy = policy(features, allowed, samples=200, generator=g, noise_std=0.5, explore=explore)
    assert actions.shape == (200, 5) and log_prob.shape == (200,) and entropy.shape == (200,)
    assert actions.dtype == torch.long
    assert allowed[torch.arange(5)[None].expand(200, -1), actions].all()  # never a masked device
    assert (actions[:, 3] == 0).all() and (actions[:, 1] != 0).all()
    assert torch.isfinite(log_prob).all() and (log_prob <= 0).all() and (entropy >= 0).all()
    # gradients flow and are finite despite the -inf logits
    (-(log_prob.mean()) - entropy.mean()).backward()
    assert all(torch.isfinite(p.grad).all() for p in policy.parameters() if p.grad is not None)


@pytest.mark.parametrize("explore", [0.0, 0.3])
def test_log_prob_and_entropy_match_enumeration(explore):
    """On a toy (3 groups x 2 devices) the scored probabilities sum to 1 and entropy matches (also for the
    exploration mixture)."""
    torch.manual_seed(1)
    policy = Seq2SeqPolicy(3, 2, hidden=6)
    features = torch.randn(3, 3)
    allowed = torch.ones(3, 2, dtype=torch.bool)
    every = torch.tensor([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    with torch.no_grad():
        _, log_prob, _ = policy(features, allowed, actions=every, explore=explore)
    p = log_prob.exp()
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-5)
    # per-step entropy summed along a sampled path is an unbiased estimate of the sequence entropy
    exact = -(p * log_prob).sum()
    with torch.no_grad():
        _, _, sampled_entropy = policy(features, allowed, samples=4000, explore=explore,
                                       generator=torch.Generator().manual_seed(0))
    assert float(sampled_entropy.mean()) == pytest.approx(float(exact), rel=0.05)
    # sampling frequencies follow the scored probabilities
    with torch.no_grad():
        samples, _, _ = policy(features, allowed, samples=4000, explore=explore,
                                generator=torch.Generator().manual_seed(2))
    codes = samples[:, 0] * 4 + samples[:, 1] * 2 + samples[:, 2]
    freq = torch.bincount(codes, minlength=8).float() / 4000
    assert torch.allclose(freq, p, atol=0.03)


def test_scoring_gives_sampled_log_prob():
    policy, features, allowed = toy_policy()
    with torch.no_grad():
        actions, log_prob, entropy = policy(features, allowed, samples=6, generator=torch.Generator().manual_seed(3))
        _, again, entropy2 = policy(features, allowed, actions=actions)
        mixed, both, _ = policy(features, allowed, samples=6, actions=actions.flip(0),
                                generator=torch.Generator().manual_seed(3))
    assert torch.allclose(log_prob, again, atol=1e-5) and torch.allclose(entropy, entropy2, atol=1e-5)
    # one pass that samples 6 and scores 6 given placements: the same as the two calls
    assert torch.equal(mixed[:6], actions) and torch.equal(mixed[6:], actions.flip(0))
    assert torch.allclose(both, torch.cat([log_prob, again.flip(0)]), atol=1e-5)


def reference_decode(policy, features, allowed, *, samples=0, actions=None, temperature=1.0, noise_std=0.0,
                     explore=0.0, generator=None, greedy=False):
    """What ``Seq2SeqPolicy.decode`` computes, written as a plain loop over the groups with every op recorded by
    autograd: the decoder cell, attention and head of the module applied step by step."""
    n = features.shape[0]
    k = samples + (0 if actions is None else actions.shape[0])
    enc, (h, c) = policy.encode(features)
    h, c = h.expand(k, -1), c.expand(k, -1)
    prev = torch.full((k,), policy.n_devices, dtype=torch.long)
    uniform = allowed / allowed.sum(dim=1, keepdim=True)
    chosen, steps, log_prob, entropy = [], [], torch.zeros(k), torch.zeros(k)
    for t in range(n):
        h, c = policy.decoder(torch.cat([policy.device_embed(prev), enc[t].expand(k, -1)], dim=1), (h, c))
        context = torch.softmax(policy.att_query(h) @ enc.T / policy.hidden ** 0.5, dim=1) @ enc
        logits = policy.head(torch.cat([h, context], dim=1)) / temperature
        if noise_std > 0:
            logits = logits + noise_std * torch.randn(logits.shape, generator=generator)
        logp = torch.log_softmax(logits.masked_fill(~allowed[t], float("-inf")), dim=1)
        if explore > 0:
            mixture = (1 - explore) * logp.exp() + explore * uniform[t]
            logp = torch.log(mixture.clamp_min(1e-30)).masked_fill(~allowed[t], float("-inf"))
        with torch.no_grad():
            a = torch.zeros(0, dtype=torch.long)
            if samples:
                a = logp[:samples].argmax(dim=1) if greedy else \
                    torch.multinomial(logp[:samples].exp(), 1, generator=generator).squeeze(1)
            if actions is not None:
                a = torch.cat([a, actions[:, t]])
        log_prob = log_prob + logp.gather(1, a[:, None]).squeeze(1)
        safe = logp.masked_fill(~allowed[t], 0.0)
        entropy = entropy - (safe.exp() * safe).masked_fill(~allowed[t], 0.0).sum(dim=1)
        chosen.append(a)
        steps.append(logp.detach())
        prev = a
    return torch.stack(chosen, dim=1), log_prob, entropy, torch.stack(steps, dim=1)


@pytest.mark.parametrize("samples, given, noise_std, explore, temperature, greedy", [
    (6, 0, 0.0, 0.0, 1.0, False),
    (6, 2, 0.5, 0.2, 1.3, False),  # noise, exploration and given (self-imitation) rows
    (0, 3, 0.5, 0.3, 1.0, False),  # scoring only
    (4, 1, 0.5, 0.1, 0.7, True),
])
def test_decode_matches_the_per_group_reference(samples, given, noise_std, explore, temperature, greedy):
    """The two-pass decode draws the same devices from the same generator calls as the per-group loop, and gives
    the same log-probs, entropies, per-group distributions and gradients (up to float rounding)."""
    policy, features, _ = toy_policy(n=14, hidden=16)
    allowed = torch.rand(14, 3) < 0.7
    allowed[torch.arange(14), torch.randint(0, 3, (14,))] = True
    given_actions = torch.multinomial(allowed.float(), given, replacement=True).T if given else None
    kwargs = dict(samples=samples, actions=given_actions, temperature=temperature, noise_std=noise_std,
                  explore=explore, greedy=greedy)
    results = []
    for decode in (lambda *args, **kw: reference_decode(policy, *args, **kw), policy.decode):
        generator = torch.Generator().manual_seed(5)
        policy.zero_grad()
        actions, log_prob, entropy, steps = decode(features, allowed, generator=generator, **kwargs)
        weights = torch.linspace(-1.0, 1.0, len(log_prob))
        (-(weights * log_prob).sum() - 0.1 * entropy.sum()).backward()
        grads = {name: p.grad.clone() for name, p in policy.named_parameters()}
        results.append((actions, log_prob.detach(), entropy.detach(), steps, grads, generator.get_state()))
    (a0, lp0, ent0, st0, g0, rng0), (a1, lp1, ent1, st1, g1, rng1) = results
    assert torch.equal(a0, a1) and torch.equal(rng0, rng1)  # same draws, same generator calls
    assert torch.allclose(lp0, lp1, atol=1e-5) and torch.allclose(ent0, ent1, atol=1e-5)
    assert st1.shape == st0.shape and torch.equal(torch.isinf(st0), torch.isinf(st1))
    finite = torch.isfinite(st0)
    assert torch.allclose(st0[finite], st1[finite], atol=1e-5)
    for name in g0:
        assert torch.allclose(g0[name], g1[name], rtol=1e-4, atol=1e-6), name


def test_policy_rejects_bad_input():
    policy, features, allowed = toy_policy()
    with pytest.raises(ValueError, match="something to sample or score"):
        policy(features, allowed)
    with pytest.raises(ValueError, match="actions has shape"):
        policy(features, allowed, actions=torch.zeros((2, features.shape[0] + 1), dtype=torch.long))
    bad = allowed.clone()
    bad[0] = False
    with pytest.raises(ValueError, match="no allowed device"):
        policy(features, bad, samples=1)
    with pytest.raises(ValueError, match="allowed has shape"):
        policy(features, allowed[:, :2], samples=1)
    with pytest.raises(ValueError, match="explore=1.0"):
        policy(features, allowed, samples=1, explore=1.0)


def test_baseline_skips_failures():
    features = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    trainer = Trainer(features, np.ones((4, 2), bool), Config(samples=4, hidden=8), seed=0)

    def evaluate(placements):
        return [Measurement(runtime_s=4.0, ok=True) if k % 2 == 0 else
                Measurement(runtime_s=float("nan"), ok=False, failure="oom") for k in range(len(placements))]

    row = trainer.update(evaluate)
    assert trainer.baseline == pytest.approx(-2.0)  # -sqrt(4) from the successes only
    assert row["success_rate"] == 0.5 and row["mean_runtime_s"] == pytest.approx((4 + 100) / 2)
    trainer.update(evaluate)
    assert trainer.baseline == pytest.approx(-2.0)
    assert trainer.best_runtime_s == 4.0 and trainer.evaluations == 8


def test_elites_are_the_fastest_distinct_placements():
    trainer = Trainer(np.zeros((3, 2), np.float32), np.ones((3, 2), bool), Config(hidden=8, elites=2), seed=0)
    for runtime, placement in [(3.0, [0, 0, 0]), (2.0, [1, 0, 0]), (2.0, [1, 0, 0]), (5.0, [1, 1, 1]),
                               (1.0, [0, 1, 0])]:
        trainer.record(runtime, np.array(placement))
    assert [(r, p.tolist()) for r, p in trainer.elites] == [(1.0, [0, 1, 0]), (2.0, [1, 0, 0])]
    assert trainer.best_runtime_s == 1.0 and trainer.best_placement.tolist() == [0, 1, 0]


def test_self_imitation_pulls_the_policy_towards_the_best_placement():
    """With every sample scoring the same (zero advantages), only self-imitation moves the policy: the log-prob of
    the recorded best placement rises, and without it that placement gets no such pull."""
    features = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    best = np.array([1, 0, 1, 1, 0, 1])

    def log_prob_of_best(weight):
        trainer = Trainer(features, np.ones((6, 2), bool), Config(samples=4, hidden=8, entropy=0.0, logits_noise=0.0,
                                                                  elites=1, self_imitation=weight, lr=3e-2), seed=0)
        trainer.record(1.0, best)
        values = []
        for _ in range(2):
            with torch.no_grad():
                _, log_prob, _ = trainer.policy(trainer.features, trainer.allowed, actions=torch.as_tensor(best[None]))
            values.append(float(log_prob[0]))
            for _ in range(30):
                trainer.update(lambda placements: [Measurement(runtime_s=4.0, ok=True)] * len(placements))
        return values

    before, after = log_prob_of_best(1.0)
    assert after > -0.5 and after > before + 2.0  # p(best) from ~1/64 to over 0.6
    before, after = log_prob_of_best(0.0)
    assert after == pytest.approx(before, abs=0.3)


def test_decode_gives_each_groups_distribution():
    """``decode``'s per-group distributions sum to 1 over the allowed devices, and a row's log-prob is the sum of
    its chosen devices' entries."""
    policy, features, allowed = toy_policy()
    given = torch.tensor([[0, 1, 2, 0, 1]])
    with torch.no_grad():
        actions, log_prob, _, steps = policy.decode(features, allowed, samples=3, actions=given, explore=0.2,
                                                    generator=torch.Generator().manual_seed(0))
    assert steps.shape == (4, 5, 3)
    assert torch.allclose(steps.exp().sum(dim=2), torch.ones(4, 5), atol=1e-5)
    assert (steps.exp()[:, ~allowed] == 0).all()
    chosen = steps.gather(2, actions[:, :, None]).squeeze(2).sum(dim=1)
    assert torch.allclose(chosen, log_prob, atol=1e-5)


def test_local_moves_stay_next_to_the_best_placement():
    """With ``local_moves`` the last placements of an update are the best with 1-4 groups moved to other allowed
    devices, none tried twice around the same best; the log row's statistics are of the policy's samples."""
    n = 12
    allowed = np.ones((n, 3), bool)
    allowed[4, 1:] = False  # group 4 cannot move
    trainer = Trainer(np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32), allowed,
                      Config(samples=10, hidden=8, local_moves=8), seed=0)
    best = np.zeros(n, np.int64)
    trainer.record(9.0, best)
    seen = []

    def evaluate(placements):
        seen.append(placements.copy())
        return [Measurement(runtime_s=16.0 if i < 2 else 25.0, ok=True) for i in range(len(placements))]

    for _ in range(3):
        row = trainer.update(evaluate)
    moved = np.concatenate([batch[2:] for batch in seen])
    changed = (moved != best).sum(axis=1)
    assert changed.min() >= 1 and changed.max() <= 4
    assert (moved[:, 4] == 0).all() and allowed[np.arange(n)[None], moved].all()
    assert len({p.tobytes() for p in moved}) == len(moved) == 24
    assert row["mean_runtime_s"] == 16.0 and trainer.evaluations == 30
    # a faster local move becomes the best, and the next moves start from it
    seen.clear()
    trainer.update(lambda placements: [Measurement(runtime_s=1.0 if i == 5 else 25.0, ok=True)
                                       for i in range(len(placements))])
    assert trainer.best_runtime_s == 1.0
    faster = trainer.best_placement
    trainer.update(evaluate)
    assert ((seen[0][2:] != faster).sum(axis=1) <= 4).all() and ((seen[0][2:] != faster).sum(axis=1) >= 1).all()
    # the moves tried so far survive a checkpoint
    state = trainer.state()
    again = Trainer(trainer.features.numpy(), allowed, trainer.config, seed=1)
    again.load(state)
    assert again.mover.tried == trainer.mover.tried
    assert np.array_equal(again.mover.moved_from, faster)


@pytest.mark.parametrize("field, value, accepted", [
    ("local_moves", -1, "an integer from 0 to 1,000,000,000"), ("samples", True, "an integer from 1 to 4,096"),
    ("samples", 10**13, "an integer from 1 to 4,096"), ("lr", 0.0, "a finite number > 0 and <= 10"),
    ("lr", 1e300, "a finite number > 0 and <= 10"), ("temperature", 1e-300, "a finite number >= 0.001 and <= 1000"),
    ("explore", float("nan"), "a finite number >= 0 and <= 1e\\+06"),
    ("warm_start_prob", 1.5, "a finite number >= 0 and <= 1"),
])
def test_config_refuses_values_out_of_range(field, value, accepted):
    with pytest.raises(ValueError, match=f"Config.{field}=.*; expected {accepted}"):
        Config(**{field: value})


def test_group_features_shape():
    from placement_env import Evaluator, allowed_devices, graph_features, load_benchmark, load_cluster

    graph, cluster = load_benchmark("rnnlm-tiny"), load_cluster("paper-2gpu")
    fields = graph_features(graph, cluster, Evaluator(graph, cluster).costs.seconds, 120).fields
    x = group_features(fields, graph.n_groups, allowed_devices(graph, cluster))
    assert x.shape[0] == graph.n_groups and np.isfinite(x).all()


@pytest.mark.slow
def test_training_improves_over_random(tmp_path):
    """A short run on rnnlm-tiny ends well below the mean random placement."""
    from placement_env.benchmarks import load_benchmark
    from placement_env.evaluation import Evaluator
    from placement_env.placement import allowed_devices

    graph = load_benchmark("rnnlm-tiny")
    evaluator = Evaluator(graph, "paper-2gpu")
    allowed = allowed_devices(graph, evaluator.cluster)
    rng = np.random.default_rng(0)
    random = np.array([[rng.choice(np.flatnonzero(row)) for row in allowed] for _ in range(64)])
    random_mean = np.mean([m.runtime_s if m.ok else 100.0 for m in evaluator.batch(random)])
    result = train("rnnlm-tiny", "paper-2gpu", budget=16 * 30, samples=16, out_dir=tmp_path, progress=False,
                   config=Config(hidden=64, lr=3e-3))
    assert result.evaluations == 480 and result.updates == 30
    last = np.mean([row["mean_runtime_s"] for row in result.history[-5:]])
    assert result.best_runtime_s < 0.8 * random_mean
    assert last < random_mean
    for name in ("checkpoint.pt", "log.csv", "best_placement.json", "learning_curve.png", "tensorboard"):
        assert (tmp_path / name).exists()


def test_checkpoint_resume_continues(tmp_path):
    first = train("rnnlm-tiny", budget=24, samples=8, out_dir=tmp_path, progress=False, checkpoint_every=2)
    assert first.updates == 3
    state = load_checkpoint(tmp_path / CHECKPOINT)
    assert state["updates"] == 3 and state["meta"]["benchmark"] == "rnnlm-tiny"
    second = train("rnnlm-tiny", budget=40, out_dir=tmp_path, progress=False, resume=True)
    assert second.updates == 5 and second.evaluations == 40
    assert [row["update"] for row in second.history] == [1, 2, 3, 4, 5]
    assert second.history[:3] == first.history
    assert second.best_runtime_s <= first.best_runtime_s
    with open(tmp_path / LOG) as handle:
        assert [int(row["update"]) for row in csv.DictReader(handle)] == [1, 2, 3, 4, 5]
    # the TensorBoard log holds the whole history once, stepped by evaluations
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    assert [step for step, _ in scalars["best_runtime_s"]] == [8, 16, 24, 32, 40]
    assert [value for _, value in scalars["best_runtime_s"]] == pytest.approx(
        [row["best_runtime_s"] for row in second.history])


def test_old_checkpoint_format_is_refused(tmp_path):
    train("rnnlm-tiny", budget=8, samples=8, out_dir=tmp_path, progress=False)
    state = load_checkpoint(tmp_path / CHECKPOINT)
    state["format"] = 1
    torch.save(state, tmp_path / CHECKPOINT)
    before = files(tmp_path)
    with pytest.raises(CheckpointMismatchError, match="format 1"):
        train("rnnlm-tiny", budget=16, out_dir=tmp_path, progress=False, resume=True)
    assert files(tmp_path) == before


class _RunsCode:
    """Unpickling this calls ``touch`` on a marker file: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_crafted_or_broken_checkpoint_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned"
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    torch.save({"format": 3, "payload": _RunsCode(marker)}, crafted / CHECKPOINT)
    with pytest.raises(CheckpointMismatchError, match="not a readable checkpoint.*only tensors and plain data"):
        train("rnnlm-tiny", budget=8, out_dir=crafted, progress=False, resume=True)
    assert not marker.exists()
    for content in (b"", b"not a checkpoint", b"PK\x03\x04 truncated"):
        broken = tmp_path / f"broken-{len(content)}"
        broken.mkdir()
        (broken / CHECKPOINT).write_bytes(content)
        with pytest.raises(CheckpointMismatchError, match=f"{broken / CHECKPOINT} is not a readable checkpoint"):
            train("rnnlm-tiny", budget=8, out_dir=broken, progress=False, resume=True)
        assert (broken / CHECKPOINT).read_bytes() == content


def files(directory):
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_resume_with_other_benchmark_is_refused(tmp_path):
    train("rnnlm-tiny", budget=8, samples=8, out_dir=tmp_path, progress=False)
    before = files(tmp_path)
    with pytest.raises(CheckpointMismatchError, match="rnnlm-tiny.*nmt-tiny"):
        train("nmt-tiny", budget=16, out_dir=tmp_path, progress=False, resume=True)
    assert files(tmp_path) == before
    with pytest.raises(FileNotFoundError):
        train("rnnlm-tiny", budget=8, out_dir=tmp_path / "empty", progress=False, resume=True)


@pytest.mark.parametrize("method", [place, "agents.reinforce_seq2seq:place_self_imitation"])
def test_place_respects_budget(method):
    from placement_env.problem import Problem, solve
    from placement_env.benchmarks import load_benchmark
    from placement_env.cluster import load_cluster

    problem = Problem.make(load_benchmark("rnnlm-tiny"), load_cluster("paper-2gpu"), budget=37)
    solution = solve(method, problem)
    assert problem.evaluations == 37 and solution.evaluations == 37
    assert solution.placement.shape == (problem.graph.n_groups,)
    assert problem.allowed[np.arange(problem.graph.n_groups), solution.placement].all()
    m = pe.evaluate(problem.graph, problem.cluster, solution.placement)
    assert m.ok and m.runtime_s == pytest.approx(problem.best.runtime_s)


def test_place_through_resolve_method():
    from placement_env.problem import resolve_method

    assert resolve_method("agents.reinforce_seq2seq:place") is place


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget"),
    (["--budget", "x"], "--budget"),
    (["--minutes", "-1"], "--minutes"),
    (["--samples", "0"], "--samples"),
    (["--runtime", "nope"], "--runtime"),
    (["--benchmark", "no-such-model"], "--benchmark"),
    (["--cluster", "no-such-cluster"], "--cluster"),
    (["--entropy", "-1"], "--entropy"),
    (["--explore", "-1"], "--explore"),
    (["--self-imitation", "x"], "--self-imitation"),
    (["--elites", "0"], "--elites"),
    (["--seed", "-1"], "--seed"),
    (["--hidden", "7"], "--hidden"),
    (["--backend", "threads"], "--backend"),
    (["--warm-start", "oracle"], "--warm-start"),
    (["--paper", "--warm-start", "expert"], "--paper"),
    (["--out-dir", __file__], "--out-dir"),
    (["--out-dir", f"{__file__}/run"], f"argument --out-dir: {__file__}/run: {__file__} is a file, so nothing"),
    (["--workers", "0"], "--workers"),
    (["--backend", "process", "--ray-address", "127.0.0.1:1"], "--ray-address"),
    (["--timeout", "5"], "argument --timeout: is for --runtime measured, not --runtime sim"),
    (["--runtime", "measured", "--timeout", "-1"], "argument --timeout: expected a positive number"),
])
def test_cli_bad_values(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_runs_and_refuses_mismatched_resume(tmp_path, capsys):
    assert main(["--benchmark", "rnnlm-tiny", "--budget", "16", "--samples", "8", "--out-dir", str(tmp_path),
                 "--no-progress", *ONE_THREAD, *QUICK_WARM_START]) == 0
    out = capsys.readouterr().out
    assert "| expert" in out and "lower bound" in out and "reinforce_seq2seq" in out
    assert "| simulated_annealing_warm (16 evaluations)" in out  # search at the agent's own budget
    assert (tmp_path / "best_placement.pb").exists()
    before = (tmp_path / CHECKPOINT).read_bytes()
    assert main(["--benchmark", "nmt-tiny", "--budget", "16", "--out-dir", str(tmp_path), "--resume",
                 "--no-progress", "--no-baselines"]) == 2
    err = capsys.readouterr().err
    assert "rnnlm-tiny" in err and "nmt-tiny" in err
    assert (tmp_path / CHECKPOINT).read_bytes() == before


@pytest.mark.parametrize("flags, expected", [
    ([], {**FINE_TUNING, "warm_start": "best", "warm_start_prob": 0.9}),
    (["--paper"], {"lr": Config.lr, "self_imitation": 0.0, "explore": 0.0, "logits_noise": Config.logits_noise,
                   "local_moves": 0, "warm_start": None}),
    (["--warm-start", "expert"], {**FINE_TUNING, "warm_start": "expert"}),
    (["--warm-start", "expert", "--explore", "5", "--lr", "0.01"], {**FINE_TUNING, "explore": 5.0, "lr": 0.01}),
])
def test_cli_tuning_defaults_follow_the_warm_start(flags, expected, tmp_path):
    """By default a warm start from the best heuristic with FINE_TUNING; --paper the paper's settings; a flag
    given wins over both."""
    assert main(["--benchmark", "rnnlm-tiny", "--budget", "8", "--samples", "8", "--out-dir", str(tmp_path),
                 "--no-progress", "--no-baselines", *ONE_THREAD, *QUICK_WARM_START, *flags]) == 0
    config = load_checkpoint(tmp_path / CHECKPOINT)["config"]
    assert {key: config[key] for key in expected if key != "warm_start"} == pytest.approx(
        {key: value for key, value in expected.items() if key != "warm_start"})
    if "warm_start" in expected:
        assert config["warm_start"] == expected["warm_start"]


def test_keyboard_interrupt_writes_checkpoint(tmp_path):
    calls = {"n": 0}

    def evaluator(placements):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return [Measurement(runtime_s=1.0 + float(p.sum()) * 1e-3, ok=True) for p in placements]

    with pytest.raises(KeyboardInterrupt):
        train("rnnlm-tiny", budget=100, samples=4, out_dir=tmp_path, progress=False, evaluator=evaluator)
    state = load_checkpoint(tmp_path / CHECKPOINT)
    assert state["updates"] == 2 and len(state["history"]) == 2
    assert math.isfinite(state["best_runtime_s"])


def test_evaluator_object_with_batch(tmp_path):
    from placement_env.benchmarks import load_benchmark
    from placement_env.evaluation import Evaluator

    class Counting:
        def __init__(self):
            self.inner, self.calls = Evaluator(load_benchmark("rnnlm-tiny"), "paper-2gpu"), 0

        def batch(self, placements):
            self.calls += 1
            return self.inner.batch(placements)

    counting = Counting()
    result = train("rnnlm-tiny", budget=12, samples=4, out_dir=tmp_path, progress=False, evaluator=counting)
    assert counting.calls == 3 and result.evaluations == 12


def test_cli_process_backend(tmp_path, capsys):
    assert main(["--benchmark", "rnnlm-tiny", "--budget", "8", "--samples", "4", "--backend", "process",
                 "--workers", "2", "--out-dir", str(tmp_path), "--no-progress", "--no-baselines", *ONE_THREAD,
                 *QUICK_WARM_START]) == 0
    assert "8 evaluations" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / CHECKPOINT)["evaluations"] == 8


def test_cli_unreachable_ray_address_is_a_clear_error(tmp_path, capsys):
    with socket.socket() as probe:  # a free port that nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["--benchmark", "rnnlm-tiny", "--budget", "8", "--ray-address", f"127.0.0.1:{port}",
                 "--out-dir", str(tmp_path / "run"), "--no-progress", "--no-baselines"]) == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("method", ["expert", "best"])
def test_warm_start_starts_from_the_baseline(method, tmp_path):
    from placement_env.problem import Problem, solve
    from placement_env.benchmarks import load_benchmark
    from placement_env.cluster import load_cluster

    graph, cluster = load_benchmark("rnnlm-tiny"), load_cluster("paper-2gpu")
    runtimes = {}
    for name in ("expert",) if method == "expert" else WARM_START_CANDIDATES:
        problem = Problem.make(graph, cluster)
        m = problem.evaluator(solve(name, problem).placement)
        if m.ok:
            runtimes[name] = m.runtime_s
    config = Config(warm_start=method, lr=1e-4, warm_start_prob=0.9)  # imitated closely enough to start from it
    result = train("rnnlm-tiny", "paper-2gpu", budget=len(runtimes) + 16, samples=8, out_dir=tmp_path, progress=False,
                   config=config)
    assert result.best_runtime_s <= min(runtimes.values()) + 1e-12
    state = load_checkpoint(tmp_path / CHECKPOINT)
    assert state["config"]["warm_start"] == method and result.evaluations == len(runtimes) + 16


def test_the_best_placement_is_on_disk_as_soon_as_it_improves(tmp_path):
    """Between checkpoints too, so a SIGKILLed run loses no best placement."""
    seen = []

    def evaluator(placements):
        if len(seen) == 3:  # a later update: the best so far must already be on disk
            record = json.loads((tmp_path / BEST_JSON).read_text())
            assert record["runtime_s"] == min(seen)
        measurements = [Measurement(runtime_s=1.0 + float(p.sum()) * 1e-3, ok=True) for p in placements]
        seen.append(min(m.runtime_s for m in measurements))
        return measurements

    train("rnnlm-tiny", budget=5 * 4, samples=4, out_dir=tmp_path, progress=False, evaluator=evaluator,
          checkpoint_every=1000)
    assert len(seen) == 5


def test_an_interrupted_command_line_run_still_exports_its_best_placement(tmp_path, monkeypatch, capsys):
    import agents.reinforce_seq2seq.cli as cli

    real_train = cli.train

    def interrupted_train(*args, **kwargs):
        kwargs["budget"] = 16
        real_train(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "train", interrupted_train)
    assert main(["--benchmark", "rnnlm-tiny", "--paper", "--budget", "16", "--samples", "8", "--out-dir", str(tmp_path),
                 "--no-progress", *ONE_THREAD]) == 130
    assert (tmp_path / "best_placement.pb").exists() and "placed TF graph" in capsys.readouterr().err


def test_timeout_flag_gives_the_measured_runtime_its_timeout():
    import argparse

    from agents.common.arguments import add_timeout_argument, measured_options

    parser = argparse.ArgumentParser()
    parser.add_argument("--runtime", default="sim")
    add_timeout_argument(parser)
    assert measured_options(parser, parser.parse_args(["--runtime", "measured", "--timeout", "30"])) == {"timeout_s": 30.0}
    assert measured_options(parser, parser.parse_args(["--runtime", "measured"])) is None  # scaled to the graph


def test_harness_threads_come_from_the_environment(monkeypatch):
    from agents.common.torch_threads import THREADS_ENV, harness_threads

    monkeypatch.delenv(THREADS_ENV)
    assert harness_threads() == 2
    monkeypatch.setenv(THREADS_ENV, "3")
    assert harness_threads() == 3
    for bad in ("0", "two", "-1", ""):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ValueError, match=f"AGENT_TORCH_THREADS='{bad}'; expected a whole number of torch threads"):
            harness_threads()


@pytest.mark.slow
def test_a_row_comes_back_whatever_torch_threads_the_caller_runs(monkeypatch):
    """The harness trains on its own torch thread count: without it, a caller's thread count gives a row another
    placement. (Rows replay across machines of one CPU family only: MKL's kernels differ between Intel and AMD
    processors, so docs/paper_results.jsonl's seq2seq placements, made on one, need not come back on the other.)"""
    from agents.common.torch_threads import THREADS_ENV
    from placement_env.harness import load_suite
    from placement_env.problem import Problem, solve

    monkeypatch.delenv(THREADS_ENV)  # the default, which made the stored rows
    task = next(task for task in load_suite("paper") if task.name == "rnnlm-2gpu")
    evaluator = pe.Evaluator(pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster), task.runtime)
    placements = []
    threads = torch.get_num_threads()
    for callers in (1, 3):
        problem = Problem(graph=evaluator.graph, cluster=evaluator.cluster, evaluator=evaluator,
                          benchmark=task.benchmark, budget=300, rng=np.random.default_rng(2))
        torch.set_num_threads(callers)
        try:
            placements.append(solve("agents.reinforce_seq2seq:place", problem).placement.tolist())
            assert torch.get_num_threads() == callers
        finally:
            torch.set_num_threads(threads)
    assert placements[0] == placements[1]


def test_training_leaves_the_callers_float_mode_as_it_found_it(tmp_path):
    """The trainer flushes denormals to zero on its thread; the caller's own float code gets them back after."""
    from agents.common.torch_threads import denormals_flushed
    from placement_env.problem import Problem, solve

    assert not denormals_flushed()
    train("rnnlm-tiny", budget=8, samples=4, out_dir=tmp_path / "run", progress=False)
    assert not denormals_flushed()
    problem = Problem.make(pe.load_benchmark("rnnlm-tiny"), pe.load_cluster("paper-2gpu"), budget=8, seed=0)
    solve("agents.reinforce_seq2seq:place", problem)
    assert not denormals_flushed()
