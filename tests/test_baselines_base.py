"""The placement-method interface: Problem, budgets, solve, method lookup."""
import gymnasium as gym
import numpy as np
import pytest

import placement_env as pe
from placement_env import BudgetExhausted, Problem, UnknownMethodError, resolve_method, solve


def test_problem_from_env_uses_the_envs_graph_and_runtime():
    env = gym.make("DevicePlacement-Tiny-v0")
    problem = Problem.from_env(env, budget=5, seed=1)
    assert problem.graph is env.unwrapped.graph and problem.cluster is env.unwrapped.cluster
    solution = solve("random_search", problem)
    assert solution.evaluations == 5 and solution.placement.shape == (problem.graph.n_groups,)
    assert solution.wall_s > 0
    _, _, _, _, info = (env.reset(), env.step(solution.placement))[1]
    assert info["ok"] and info["runtime_s"] == problem.best.runtime_s


def test_budget_is_enforced_and_the_best_so_far_counts(tiny, paper2):
    def greedy_forever(problem):
        rng = problem.rng
        while True:  # never returns by itself
            problem.evaluate(rng.integers(0, 3, problem.graph.n_groups))

    problem = Problem.make(tiny, paper2, budget=7)
    solution = solve(greedy_forever, problem)
    assert solution.evaluations == 7
    assert pe.evaluate(tiny, paper2, solution.placement).runtime_s == problem.best.runtime_s
    with pytest.raises(BudgetExhausted, match="budget of 7"):
        problem.evaluate(solution.placement)


def test_single_device_baselines_use_no_evaluations(tiny, paper2):
    for name, device in (("single_cpu", 0), ("single_gpu", 1)):
        solution = solve(name, Problem.make(tiny, paper2))
        assert solution.evaluations == 0 and np.all(solution.placement == device)


def test_unknown_methods(tiny, paper2):
    with pytest.raises(UnknownMethodError, match="unknown method 'hfet'; built in: single_cpu"):
        resolve_method("hfet")
    with pytest.raises(UnknownMethodError, match="is not callable"):
        resolve_method("baselines.simple:RANDOM_SEARCH_DEFAULT_BUDGET")
    with pytest.raises(pe.InvalidPlacementError):
        solve(lambda problem: [0, 1], Problem.make(tiny, paper2))


def test_a_method_cannot_evaluate_around_its_budget():
    """Calling problem.evaluator directly (or its batch) is counted like problem.evaluate, and stops at the budget."""
    import placement_env as pe

    graph = pe.load_benchmark("rnnlm-tiny")
    problem = Problem.make(graph, pe.load_cluster("paper-2gpu"), budget=5)
    sneaky = pe.random_placements(graph, problem.cluster, 2000, 0)

    def bypass(p):
        for placement in sneaky:
            p.evaluator(placement)
        return placement

    solution = solve(bypass, problem)
    assert problem.evaluations == 5 and solution.evaluations == 5 and len(problem.improvements) >= 1
    problem = Problem.make(graph, pe.load_cluster("paper-2gpu"), budget=5)
    with pytest.raises(BudgetExhausted, match="6 evaluations asked, 5 left"):
        problem.evaluator.batch(sneaky[:6])
    assert problem.evaluations == 0 and len(problem.evaluator.batch(sneaky[:5])) == 5 and problem.evaluations == 5
    assert problem.costs.seconds.shape == (graph.n_ops, 3) and problem.lower_bound() > 0  # free to read
