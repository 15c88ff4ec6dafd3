"""The plain-search baselines: hill climbing, simulated annealing, the cross-entropy method, BRKGA."""
import numpy as np
import pytest

import placement_env as pe
from baselines import search
from baselines.search import HEURISTICS
from placement_env import METHODS, Problem, resolve_method, solve
from placement_env.cli import main
from placement_env.harness import read_rows

SCRATCH = ("hill_climbing", "simulated_annealing", "cross_entropy", "brkga")
WARM = tuple(f"{name}_warm" for name in SCRATCH)


@pytest.fixture(scope="module")
def evaluator(tiny, paper2):
    return pe.Evaluator(tiny, paper2, "sim")


def make(evaluator, budget, seed=0, benchmark="rnnlm-tiny"):
    return Problem(graph=evaluator.graph, cluster=evaluator.cluster, evaluator=evaluator, benchmark=benchmark,
                   budget=budget, rng=np.random.default_rng(seed))


def runtime(evaluator, placement):
    m = evaluator(placement)
    assert m.ok
    return m.runtime_s


def start_runtime(evaluator, name):
    """The runtime of the placement ``name`` starts from (the population methods from scratch have none)."""
    problem = make(evaluator, 0)
    if name.endswith("_warm"):
        made = []
        for heuristic in HEURISTICS:
            try:
                made.append(resolve_method(heuristic)(make(evaluator, 0)))
            except Exception:  # noqa: BLE001 - as the search does: a heuristic that cannot place is skipped
                continue
        return min(evaluator(p).runtime_s for p in made)
    if name in ("hill_climbing", "simulated_annealing"):
        return min(evaluator(pe.single_device(problem.graph, problem.cluster, d)).runtime_s
                   for d in range(problem.cluster.n_devices))
    return float("inf")


def test_registered_by_name():
    for name in SCRATCH + WARM:
        assert METHODS[name].endswith(f":{name}")
        assert resolve_method(name).__name__ == name


@pytest.mark.parametrize("name", SCRATCH + WARM)
def test_spends_the_budget_and_returns_the_best_it_evaluated(evaluator, name):
    problem = make(evaluator, 120, seed=3)
    solution = solve(name, problem)
    placement = solution.placement
    assert solution.method == name
    assert problem.allowed[np.arange(len(placement)), placement].all()
    assert 0.9 * 120 <= solution.evaluations <= 120
    best = runtime(evaluator, placement)
    assert best == problem.best.runtime_s
    assert best <= start_runtime(evaluator, name)
    again = solve(name, make(evaluator, 120, seed=3))
    assert np.array_equal(again.placement, placement) and again.evaluations == solution.evaluations


@pytest.mark.parametrize("name", ["hill_climbing", "simulated_annealing"])
def test_local_search_beats_random_search_at_an_equal_budget(evaluator, name):
    def mean_best(method):
        return np.mean([runtime(evaluator, solve(method, make(evaluator, 300, seed)).placement) for seed in range(3)])

    assert mean_best(name) < 0.95 * mean_best("random_search")


@pytest.mark.parametrize("name", SCRATCH)
def test_bad_start_and_unlimited_budget_are_refused(evaluator, name):
    function = resolve_method(name)
    with pytest.raises(ValueError, match="start='warm'; expected one of 'scratch', 'best_heuristic'"):
        function(make(evaluator, 10), start="warm")
    with pytest.raises(ValueError, match=f"{name} needs a finite budget, got budget=None"):
        function(make(evaluator, None))


@pytest.mark.parametrize("name", SCRATCH + WARM)
def test_budget_zero_returns_the_start_unevaluated(evaluator, name):
    problem = make(evaluator, 0)
    solution = solve(name, problem)
    assert solution.evaluations == 0 and problem.best is None
    if name.endswith("_warm"):  # the first heuristic that places: the expert
        assert np.array_equal(solution.placement, solve("expert", make(evaluator, 0)).placement)
    elif name in ("hill_climbing", "simulated_annealing"):  # the single device the cost model finds fastest
        assert len(set(solution.placement.tolist())) == 1
    assert problem.allowed[np.arange(len(solution.placement)), solution.placement].all()


def test_warm_start_with_a_budget_too_small_for_every_heuristic(evaluator):
    problem = make(evaluator, 2)
    placement = solve("hill_climbing_warm", problem).placement
    assert problem.evaluations == 2
    first_two = [solve(h, make(evaluator, 0)).placement for h in HEURISTICS[:2]]
    assert any(np.array_equal(placement, p) for p in first_two)


def test_warm_start_falls_back_to_scratch_without_a_heuristic(evaluator, monkeypatch):
    monkeypatch.setattr(search, "HEURISTICS", ("expert",))
    problem = make(evaluator, evaluator.cluster.n_devices, benchmark="synthetic")  # the expert cannot place it
    placement = solve("hill_climbing_warm", problem).placement
    assert problem.evaluations == evaluator.cluster.n_devices  # every single device, nothing more
    assert len(set(placement.tolist())) == 1


@pytest.mark.parametrize("name", SCRATCH + WARM)
def test_a_search_with_nothing_to_search_stops(tiny, name):
    problem = Problem.make(tiny, pe.load_cluster("local:1"), budget=50)  # one device: one placement
    placement = solve(name, problem).placement
    assert problem.evaluations == 1 and np.all(placement == 0)


def test_harness_runs_and_validates_the_searches(tmp_path):
    results = str(tmp_path / "search.jsonl")
    assert main(["run", "--suite", "tiny", "--methods", "hill_climbing", "simulated_annealing_warm", "--budget", "50",
                 "--seeds", "0", "-o", results]) == 0
    rows = read_rows(results)
    assert len(rows) == 6 and all(r["ok"] and r["evaluations"] == 50 for r in rows)
    assert main(["validate", results]) == 0
