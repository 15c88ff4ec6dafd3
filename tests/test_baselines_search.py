"""The plain-search baselines: hill climbing, simulated annealing, the cross-entropy method, BRKGA."""
import json
import re

import numpy as np
import pytest

import placement_env as pe
from baselines import search
from baselines.search import HEURISTICS
from placement_env import METHODS, PRESETS, MethodArgumentError, MethodSpec, Problem, resolve_method, solve
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


def test_registered_by_name_and_warm_starts_as_presets():
    for name in SCRATCH:
        assert METHODS[name].endswith(f":{name}")
        assert resolve_method(name).__name__ == name
        warm = f"{name}_warm"
        assert warm not in METHODS and PRESETS[warm] == MethodSpec(name, {"start": "best_heuristic"})
        bound = resolve_method(warm)
        assert bound.func is resolve_method(name) and bound.keywords == {"start": "best_heuristic"}


# What the wrappers hill_climbing_warm ... brkga_warm (removed for presets) gave at commit 35a8c3e on
# synthetic-tiny / paper-2gpu, budget 40, seed 0: one digit per group.
BEFORE_PRESETS = {
    "hill_climbing_warm": "201220001111100002012020002000220022012001112200001020020010200100010200020020200122001222",
    "simulated_annealing_warm": "121220002101010102011011002000220022011001112200021020010010200120000200120012201121220220",
    "cross_entropy_warm": "101220002101100002012020102020220002012001112200001022020010200120010210220010200120010220",
    "brkga_warm": "201220012201112000101011102000010012001000112000001020020010200020210202110010202122012010",
}


@pytest.mark.parametrize("name", WARM)
def test_presets_give_the_placements_of_the_wrappers_they_replace(name):
    graph, cluster = pe.load_benchmark("synthetic-tiny"), pe.load_cluster("paper-2gpu")
    solution = solve(name, Problem.make(graph, cluster, benchmark="synthetic-tiny", budget=40, seed=0))
    assert "".join(map(str, solution.placement)) == BEFORE_PRESETS[name] and solution.evaluations == 40
    assert solution.method == name
    scratch = name.removesuffix("_warm")
    spelled = solve(f"{scratch}@start=best_heuristic",
                    Problem.make(graph, cluster, benchmark="synthetic-tiny", budget=40, seed=0))
    assert np.array_equal(spelled.placement, solution.placement)
    assert spelled.method == f"{scratch}@start=best_heuristic"


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
    with pytest.raises(MethodArgumentError, match=f"start=warm; {name} accepts one of scratch, best_heuristic"):
        pe.method(f"{name}@start=warm")  # a spec is refused when it is read, before any run


@pytest.mark.parametrize("spec, message", [
    ("hill_climbing@max_groups=0", "max_groups=0; hill_climbing accepts an integer >= 1"),
    ("hill_climbing@max_groups=2.5", "max_groups=2.5; hill_climbing accepts an integer >= 1"),
    ("simulated_annealing@initial_temperature=0", "initial_temperature=0; simulated_annealing accepts a number > 0"),
    ("brkga@inherit=1.5", "inherit=1.5; brkga accepts a number >= 0 and <= 1"),
    ("cross_entropy@elite=0.2", "cross_entropy has no argument 'elite'; it takes start (one of scratch, "
                                "best_heuristic), elite_fraction (a number > 0 and <= 1), smoothing (a number >= 0 "
                                "and <= 1)"),
    ("brkga_warm@start=scratch", "the preset brkga_warm is brkga@start=best_heuristic and sets start itself"),
])
def test_search_arguments_out_of_range_are_refused_naming_what_is_accepted(spec, message):
    with pytest.raises(MethodArgumentError, match=re.escape(message)):
        pe.method(spec)


def test_search_arguments_reach_the_search(evaluator):
    narrow = solve("hill_climbing@max_groups=1", make(evaluator, 60, seed=1))
    same = solve(pe.method("hill_climbing", max_groups=1), make(evaluator, 60, seed=1))
    default = solve("hill_climbing", make(evaluator, 60, seed=1))
    assert np.array_equal(narrow.placement, same.placement) and narrow.method == same.method
    assert narrow.improvements != default.improvements  # one group per move walks elsewhere than up to four


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
    assert main(["run", "--suite", "tiny", "--methods", "hill_climbing", "simulated_annealing_warm",
                 "cross_entropy_warm@smoothing=0.5", "--budget", "50", "--seeds", "0", "-o", results]) == 0
    rows = read_rows(results)
    assert len(rows) == 9 and all(r["ok"] and r["evaluations"] == 50 for r in rows)
    assert {(r["method"], json.dumps(r["method_args"])) for r in rows} == {
        ("hill_climbing", "{}"), ("simulated_annealing_warm", "{}"), ("cross_entropy_warm", '{"smoothing": 0.5}')}
    assert main(["validate", results]) == 0
