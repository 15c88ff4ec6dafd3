"""Scores per track and budget (score.py) on hand-made rows, against numbers computed by hand: the geometric mean
of reference over step time, failures charged the failing signal, the Student t interval over seeds, missing tasks,
and which rows make a task's reference."""
from __future__ import annotations

import math

import pytest

from placement_env.env.rewards import DEFAULT_FAILING_SIGNAL_S
from placement_env.harness import placebench
from placement_env.harness.score import (REFERENCE_HEURISTICS, charged, geometric_mean, reference_heuristics,
                                         references, standings, t_interval, track_tasks)

T_975 = {1: 12.706204736174698, 2: 4.302652729749464}  # Student t's 97.5% quantile by degrees of freedom (tables)


def row(task, method, seed, runtime, *, budget=0, evaluations=0, ok=True, suite="mine", args=None, anytime=(),
        wall=1.0, failure=None):
    return {"suite": suite, "task": task, "benchmark": "rnnlm-tiny", "cluster": "paper-2gpu", "runtime": "sim",
            "method": method, "method_args": args or {}, "seed": seed, "budget": budget,
            "placement": [0] if ok else [], "runtime_s": runtime if ok else None, "ok": ok,
            "failure": failure if failure is not None else ("" if ok else "oom"), "message": "",
            "evaluations": evaluations, "wall_s": wall, "lower_bound_s": 0.1, "versions": {},
            "anytime": list(anytime)}


HEURISTICS = [  # the references: task a 2.0 (expert), task b 4.0 (heft)
    *(row("a", "expert", s, 2.0) for s in (0, 1)), *(row("a", "heft", s, 3.0) for s in (0, 1)),
    *(row("b", "expert", s, 5.0) for s in (0, 1)), *(row("b", "heft", s, 4.0) for s in (0, 1)),
]
SEARCH = [  # seed 0: 1.0 and 2.0; seed 1: 2.0 and a failure on b
    row("a", "hill_climbing", 0, 1.0, budget=10, evaluations=10, anytime=[[1, 3.0, 0.1], [4, 1.0, 0.2]], wall=2.0),
    row("b", "hill_climbing", 0, 2.0, budget=10, evaluations=10, anytime=[[2, 2.0, 0.1]], wall=3.0),
    row("a", "hill_climbing", 1, 2.0, budget=10, evaluations=10, anytime=[[1, 2.0, 0.1]], wall=4.0),
    row("b", "hill_climbing", 1, None, budget=10, evaluations=10, ok=False, wall=5.0),
]


def by(table, method, budget=0, suite="mine"):
    return next(s for s in table if s.method == method and s.budget == budget and s.suite == suite)


def test_geometric_mean_and_t_interval_by_hand():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(ValueError, match="expected one or more positive numbers"):
            geometric_mean(bad)
    low, high = t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, n 3
    assert (low, high) == pytest.approx((2 - T_975[2] / math.sqrt(3), 2 + T_975[2] / math.sqrt(3)))
    assert t_interval([1.5]) is None and t_interval([]) is None
    assert t_interval([0.7, 0.7]) == pytest.approx((0.7, 0.7))


def test_a_failed_placement_is_charged_the_failing_signal():
    assert charged(row("a", "heft", 0, 3.0)) == 3.0
    assert charged(row("a", "heft", 0, None, ok=False)) == DEFAULT_FAILING_SIGNAL_S
    assert charged({**row("a", "heft", 0, 3.0), "runtime_s": math.inf}) == DEFAULT_FAILING_SIGNAL_S


def test_scores_are_geometric_means_of_reference_over_step_time_with_t_intervals():
    table = standings(HEURISTICS + SEARCH)
    expert = by(table, "expert")
    assert expert.score == pytest.approx(math.sqrt(2.0 / 2.0 * 4.0 / 5.0))
    assert expert.interval == pytest.approx((expert.score, expert.score))  # the same on both seeds
    assert expert.task_means == pytest.approx({"a": 2.0, "b": 5.0})
    search = by(table, "hill_climbing", 10)
    seed0 = math.sqrt(2.0 / 1.0 * 4.0 / 2.0)
    seed1 = math.sqrt(2.0 / 2.0 * 4.0 / DEFAULT_FAILING_SIGNAL_S)
    assert search.per_seed == pytest.approx([seed0, seed1])
    assert search.score == pytest.approx((seed0 + seed1) / 2)
    half = T_975[1] * (abs(seed0 - seed1) / math.sqrt(2)) / math.sqrt(2)  # t * sd / sqrt(n)
    assert search.interval == pytest.approx((search.score - half, search.score + half))
    assert (search.failures, search.rows) == (1, 4)
    assert (search.wall_s, search.wall_total_s) == (pytest.approx(3.5), pytest.approx(14.0))
    # seed 0 beat a's 2.0 after 4 evaluations and b's 4.0 after 2; seed 1 never beat 2.0 on a: median of 4 and 2
    assert (search.to_beat, search.beat) == (pytest.approx(3.0), 2)
    assert search.task_means == pytest.approx({"a": 1.5, "b": (2.0 + DEFAULT_FAILING_SIGNAL_S) / 2})


def test_one_seed_has_a_score_and_no_interval():
    table = standings(HEURISTICS + [row("a", "m_topo", 0, 4.0), row("b", "m_topo", 0, 8.0)])
    one = by(table, "m_topo")
    assert one.score == pytest.approx(math.sqrt(2.0 / 4.0 * 4.0 / 8.0)) and one.interval is None
    assert one.seeds == [0]


def test_a_method_missing_tasks_gets_no_score_but_the_count():
    table = standings(HEURISTICS + SEARCH[:3] + [row("a", "random_search", 0, 1.5, budget=10, evaluations=10)])
    search = by(table, "hill_climbing", 10)  # seed 1 lacks b (its failed row is gone)
    assert search.score is None and search.interval is None
    assert (search.missing_tasks, search.missing_rows) == (1, 1)
    assert search.per_seed == pytest.approx([math.sqrt(2.0 / 1.0 * 4.0 / 2.0)])  # the complete seed still shown
    lacking = by(table, "random_search", 10)
    assert lacking.score is None and (lacking.missing_tasks, lacking.missing_rows) == (1, 1)


def test_the_order_is_by_score_within_each_budget():
    table = standings(HEURISTICS + SEARCH + [row("a", "random_search", 0, 1.5, budget=10, evaluations=10)])
    assert [s.method for s in table if s.budget == 0] == ["expert", "heft"]  # heft: sqrt(2/3 * 4/4) = 0.816 < 0.894
    assert [s.method for s in table if s.budget == 10] == ["hill_climbing", "random_search"]  # no score: last


def test_the_reference_is_the_best_built_in_heuristic_at_zero_evaluations_only():
    rows = [
        row("a", "heft", 0, 3.0), row("a", "expert_tf1", 0, 2.5),
        row("a", "agents.gnn_placer:place_zero_shot", 0, 1.0),  # zero evaluations, but learned: not a heuristic
        row("a", "hill_climbing", 0, 1.1),  # a search given no budget: not a heuristic
        row("a", "mincut", 0, 1.2, args={"seed_groups": 2}),  # a heuristic with arguments: not the built-in one
        row("a", "metis", 0, 0.5, budget=10, evaluations=3),  # spent evaluations
        row("a", "single_gpu", 0, None, ok=False),  # failed
        row("a", "m_etf", 0, 0.9, failure="infrastructure", ok=False),
    ]
    assert references(rows) == {("mine", "a"): 2.5}
    assert {"single_cpu", "single_gpu", "expert", "expert_tf1", "scotch", "mincut", "metis", "heft", "m_topo",
            "m_etf"} == set(REFERENCE_HEURISTICS)
    assert "agents.gnn_placer:place_zero_shot" not in REFERENCE_HEURISTICS


def test_a_noisy_heuristic_is_taken_at_its_mean_over_seeds():
    rows = [row("a", "heft", 0, 2.0), row("a", "heft", 1, 4.0), row("a", "expert", 0, 3.5)]  # heft's mean: 3.0
    assert references(rows) == {("mine", "a"): 3.0}


def test_a_task_without_a_reference_leaves_the_track_unscored():
    rows = [row("a", "heft", 0, 2.0), row("b", "agents.gnn_placer:place_zero_shot", 0, 1.0), row("a", "expert", 0, 2.0),
            row("b", "expert", 0, None, ok=False)]
    expert = by(standings(rows), "expert")
    assert expert.score is None and expert.unreferenced == 1 and expert.missing_rows == 0


def test_unfinished_rows_are_left_out():
    rows = HEURISTICS + [row("a", "heft", 2, None, ok=False, failure="infrastructure")]
    assert by(standings(rows), "heft").seeds == [0, 1]


def test_a_benchmark_track_is_scored_on_its_frozen_tasks_and_references():
    suite = "placebench-v1/paper"
    frozen = placebench.load_placebench("placebench-v1").task_facts("paper", "rnnlm@k80-2gpu")["reference_s"]
    assert reference_heuristics(suite) == tuple(placebench.load_placebench("placebench-v1").data["heuristics"])
    rows = [row("rnnlm@k80-2gpu", "heft", 0, 9.0, suite=suite), row("rnnlm@k80-2gpu", "m_etf", 0, 3.0, suite=suite)]
    assert references(rows) == {(suite, "rnnlm@k80-2gpu"): frozen}  # the frozen number, not the rows' best
    assert track_tasks(rows)[suite] == {task.name for task in placebench.suite_tasks(suite)}
    heft = by(standings(rows), "heft", suite=suite)
    assert heft.score is None and heft.missing_tasks == len(placebench.suite_tasks(suite)) - 1
    assert heft.task_means == {"rnnlm@k80-2gpu": 9.0}


def test_a_benchmarks_tracks_come_first_in_its_order():
    rows = [row("x", "heft", 0, 1.0, suite="mine"),
            row("gpt2@dgx1-v100-4gpu", "heft", 0, 1.0, suite="placebench-v1/modern"),
            row("rnnlm@k80-2gpu", "heft", 0, 1.0, suite="placebench-v1/paper")]
    assert [s.suite for s in standings(rows)] == ["placebench-v1/paper", "placebench-v1/modern", "mine"]


def measured(task, method, seed, runtime, anchor="absent", *, placement=(1, 0), **kwargs):
    """A measured row; ``anchor`` its anchor_s ("absent": a row written before rows recorded one)."""
    out = {**row(task, method, seed, runtime, **kwargs), "runtime": "measured", "placement": list(placement)}
    return out if anchor == "absent" else {**out, "anchor_s": anchor}


def test_measured_rows_are_scored_over_their_own_runs_anchor():
    # day 1, the machine at full speed: one worker (the anchor placement) 10 ms, METIS 12 ms, annealing 8 ms;
    # day 2, everything twice as slow, the anchor measured beside each row
    rows = [measured("a", "single_cpu", 0, 0.010, 0.010, placement=(0, 0)), measured("a", "metis", 0, 0.012, 0.010),
            measured("a", "simulated_annealing", 0, 0.008, 0.010, budget=10, evaluations=10,
                     anytime=[[3, 0.009, 0.1], [7, 0.008, 0.2]]),
            measured("a", "hill_climbing", 0, 0.016, 0.020, budget=10, evaluations=10,
                     anytime=[[2, 0.021, 0.1], [5, 0.016, 0.2]])]
    assert references(rows)[("mine", "a")] == pytest.approx(1.0)  # one worker over its own anchor
    table = standings(rows)
    assert by(table, "simulated_annealing", 10).score == pytest.approx(1.25)
    assert by(table, "hill_climbing", 10).score == pytest.approx(1.25)  # 16 ms on the slow day, its anchor 20 ms
    assert by(table, "hill_climbing", 10).to_beat == 5  # 21 ms is not under 1.0 x its 20 ms anchor; 16 ms is
    assert by(table, "metis").score == pytest.approx(1 / 1.2)
    assert by(table, "hill_climbing", 10).task_means == {"a": pytest.approx(0.8)}
    assert by(table, "hill_climbing", 10).anchored == {"a"}
    # in seconds, the slow day's 16 ms would have lost to the 10 ms reference
    unanchored = [{k: v for k, v in r.items() if k != "anchor_s"} for r in rows]
    assert by(standings(unanchored), "hill_climbing", 10).score == pytest.approx(0.010 / 0.016)
    assert by(standings(unanchored), "hill_climbing", 10).to_beat is None


def test_measured_rows_without_an_anchor_take_the_anchor_placements_rows_of_their_kind():
    old = [measured("a", "single_cpu", s, t, placement=(0, 0)) for s, t in ((0, 0.010), (1, 0.012))]
    old += [measured("a", "hill_climbing", 0, 0.0088, budget=10, evaluations=10)]  # over the mean 11 ms: 0.8
    new = [measured("a", "simulated_annealing", 0, 0.016, 0.020, budget=10, evaluations=10)]  # 0.8 too
    rows = old + new
    assert references(rows)[("mine", "a")] == pytest.approx(1.0)
    table = standings(rows)
    assert by(table, "hill_climbing", 10).score == pytest.approx(1.25)
    assert by(table, "simulated_annealing", 10).score == pytest.approx(1.25)
    # a row whose anchor could not be measured: the task is scored in seconds, every row of it
    broken = rows + [measured("a", "random_search", 0, 0.011, None, budget=10, evaluations=10)]
    table = standings(broken)
    assert by(table, "simulated_annealing", 10).score == pytest.approx(0.011 / 0.016)
    assert by(table, "simulated_annealing", 10).anchored == set()


def test_a_runs_anchors_say_whether_the_machine_was_steady():
    from placement_env.harness.score import STEADY_SPREAD, anchor_spreads, steadiness_lines

    steady = [measured("a", "metis", s, 0.012, 0.010 + s * 0.0005) for s in (0, 1, 2)]  # 10-11 ms: +10%
    moved = [measured("b", "metis", s, 0.012, a) for s, a in ((0, 0.010), (1, 0.013))]  # +30%
    lone = [measured("c", "metis", 0, 0.012, 0.010), measured("c", "heft", 0, 0.012)]  # one anchor, one without
    assert anchor_spreads(steady + moved + lone) == {("mine", "a"): (0.010, 0.011, 3), ("mine", "b"): (0.010, 0.013, 2),
                                                     ("mine", "c"): (0.010, 0.010, 1)}
    lines = steadiness_lines(steady + moved + lone)
    assert lines[:2] == ["a: the anchor placement measured 10-11 ms over 3 rows (+10%)",
                         "b: the anchor placement measured 10-13 ms over 2 rows (+30%)"]
    assert lines[2].startswith(f"warning: the same placement measured more than {STEADY_SPREAD:.0%} apart within this "
                               "run on 1 of 2 tasks (b)")
    assert len(lines) == 3 and steadiness_lines(steady) == lines[:1] and steadiness_lines(SEARCH) == []


def on(machine_row, cluster="local:2", digest="4ce531de0c219d0d", host=None):
    """``machine_row`` as measured on a ``cluster`` whose definition has ``digest``, on ``host`` (None: not
    recorded)."""
    out = {**machine_row, "cluster": cluster, "versions": {"cluster": digest}}
    return out if host is None else {**out, "host": host}


def test_each_standing_names_the_machines_its_measured_rows_ran_on():
    from placement_env.harness.score import machine_marks, mixed_machines

    xeon = {"cpu": "Intel Xeon", "cpus": "2", "vector": "amx_tile"}
    old = [on(measured("a", "single_cpu", 0, 0.010, 0.010, placement=(0, 0))),
           on(measured("b", "single_cpu", 0, 0.010, 0.010, placement=(0, 0)), "local:3", "d85444be34ece771")]
    new = [on(measured("a", "hill_climbing", 0, 0.009, 0.010, budget=10, evaluations=10), digest="38a2bff2c755b4a9",
              host=xeon)]
    assert machine_marks(new[0]) == {"local:2 38a2bff2", "host: Intel Xeon, 2 cpus, amx_tile"}
    assert machine_marks(row("a", "heft", 0, 1.0)) == set()  # simulated: no machine
    table = standings(old + new + HEURISTICS)
    assert by(table, "single_cpu").machines == ("local:2 4ce531de", "local:3 d85444be")
    assert by(table, "expert").machines == ()
    # local:2 and local:3 of one host have different digests: not a mix
    assert not mixed_machines([by(table, "single_cpu"), by(table, "expert")])
    assert mixed_machines([by(table, "single_cpu"), by(table, "hill_climbing", 10)])  # local:2 under two digests
    amd = {**xeon, "cpu": "AMD EPYC", "vector": "avx2"}
    same_digest = [on(measured("a", m, 0, 0.010, 0.010, budget=10, evaluations=10), host=h)
                   for m, h in (("hill_climbing", xeon), ("random_search", amd))]
    assert mixed_machines(standings(same_digest))  # same memory, two recorded hosts
    unrecorded = [on(measured("a", "random_search", 0, 0.010, 0.010, budget=10, evaluations=10))]
    assert not mixed_machines(standings(same_digest[:1] + unrecorded))  # one digest, one recorded host
