"""The transfer-aware decoding of the GNN placer's probabilities (``agents.gnn_placer.transfer_prior``) and the
harness method that uses it."""
import numpy as np
import pytest

import placement_env as pe
from agents.gnn_placer import place
from agents.gnn_placer.transfer_prior import smooth
from experiments.transfer_prior import choose


def _cut_seconds(problem, placement):
    """Each cross-device group-graph edge's bytes at its link's bandwidth plus the link's fixed costs."""
    groups = pe.group_graph(problem.graph, problem.cluster, problem.costs)
    src, dst, volume = groups.src, groups.dst, groups.bytes
    a, b = placement[src], placement[dst]
    cross = a != b
    cluster = problem.cluster
    return float((volume[cross] / cluster.bandwidth[a[cross], b[cross]] + cluster.latency[a[cross], b[cross]]
                  + cluster.transfer_overhead_s).sum())


@pytest.fixture()
def problem(tiny):
    return pe.Problem.make(tiny, pe.load_cluster("k80-2gpu"), budget=0)


def test_weight_zero_keeps_the_placement_and_a_bad_weight_is_refused(problem):
    n = problem.graph.n_groups
    placement = np.where(problem.allowed[:, 1], 1 + np.arange(n) % 2, 0)
    log_probs = np.where(problem.allowed, 0.0, -np.inf)
    assert np.array_equal(smooth(problem, placement, log_probs, 0.0), placement)
    for weight in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="weight = .*must be a number >= 0"):
            smooth(problem, placement, log_probs, weight)


def test_a_large_weight_removes_device_changes_the_probabilities_do_not_pay_for(problem):
    n = problem.graph.n_groups
    alternating = np.where(problem.allowed[:, 1], 1 + np.arange(n) % 2, 0)  # the two dies in turn along the groups
    rng = np.random.default_rng(0)
    log_probs = np.where(problem.allowed, -rng.random(problem.allowed.shape) * 1e-3, -np.inf)  # nearly indifferent
    smoothed = smooth(problem, alternating, log_probs, 1e7)
    assert problem.allowed[np.arange(n), smoothed].all()
    assert _cut_seconds(problem, smoothed) < 0.5 * _cut_seconds(problem, alternating)
    assert np.array_equal(smooth(problem, smoothed, log_probs, 1e7), smoothed)  # a local minimum: nothing moves
    # where the network is sure, its choice stands: a weight of 1 weighs nats against whole lower bounds
    sure = np.where(problem.allowed, -50.0, -np.inf)
    sure[np.arange(n), alternating] = 0.0
    assert np.array_equal(smooth(problem, alternating, sure, 1.0), alternating)


def test_the_smoothed_zero_shot_placement_is_a_valid_answer_without_evaluations(problem):
    placement = place(problem, smooth=True)
    assert placement.shape == (problem.graph.n_groups,) and problem.evaluations == 0
    assert pe.evaluate(problem.graph, problem.cluster, placement).ok
    plain = place(problem)
    assert _cut_seconds(problem, placement) <= _cut_seconds(problem, plain) + 1e-12


def test_the_rule_takes_most_within_target_then_the_lowest_mean_then_the_smallest_weight():
    ratios = {0.0: np.array([1.0, 1.2]), 10.0: np.array([1.1, 1.1]), 100.0: np.array([1.05, 1.1]),
              1000.0: np.array([1.05, 1.1])}
    assert choose(ratios) == 100.0


def test_the_weight_experiment_prints_each_weight_and_the_rules_pick(capsys):
    from experiments.transfer_prior import main
    from placement_env.harness.suites import load_suite

    assert main(["--suite", "tiny", "--networks", "committed", "--weights", "0", "1e7", "--no-progress"]) == 0
    out = capsys.readouterr().out
    n = len(load_suite("tiny"))
    assert sum(line.startswith("| committed |") for line in out.splitlines()) == n
    assert "weight 0: " in out and f" of {n} within 15%" in out and "the rule's pick on tiny: weight" in out
    with pytest.raises(SystemExit):
        main(["--suite", "tiny", "--weights", "-1"])
