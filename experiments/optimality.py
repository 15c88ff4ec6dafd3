"""How far from optimal: the lower bounds of ``pe.bound`` against the best placements any method found, CP-SAT on
small tasks, and the check that no simulated placement ever beats a bound (docs/optimality.md).

    python -m experiments.optimality bounds [--time-limit 60]     # paper tasks, ideal and as-built machines
    python -m experiments.optimality small [--time-limit 60]      # tiny and small tasks: bounds, CP-SAT, search
    python -m experiments.optimality blocks [--time-limit 60 --workers 8]  # the same tasks on the block model
    python -m experiments.optimality orders [--time-limit 90]     # the best order of each best known placement
    python -m experiments.optimality check [--placements 1000000] # stored rows, random and search placements
    python -m experiments.optimality table                        # the tables of docs/optimality.md

Each writes JSON lines under docs/optimality/ (resumable: done items are skipped) and ``table`` prints them as
Markdown. The step times are simulated; the solver seconds depend on the machine and what else runs on it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from tqdm import tqdm

import placement_env as pe
from placement_env.exact.isolated import solve_isolated
from placement_env.exact.relaxation import model_schedule, relax
from placement_env.harness import read_rows
from placement_env.harness.results import method_label
from placement_env.harness.bounds_file import read_bounds, write_bounds
from placement_env.harness.suites import Task, load_suite
from placement_env.runtime.simulated import model_changed_since

OUT = Path("docs/optimality")
STORED = sorted(Path("docs").glob("*_results.jsonl")) + sorted(Path("docs/placebench").glob("*.jsonl"))  # results files
# Tasks of at most 60 groups: the tiny graphs coarsened to 12, 24 and 48 groups, on the ideal and the as-built
# two-GPU machines, and the tiny suite itself (90-139 groups).
SMALL_GROUPS = (12, 24, 48)
SMALL_GRAPHS = ("rnnlm-tiny", "inception_v3-tiny", "synthetic-tiny")
SMALL_CLUSTERS = ("paper-2gpu", "k80-2gpu")
ENUMERATE_UP_TO = 3 ** 12  # placements simulated one by one for the exact optimum of the simulator


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _append(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(row, sort_keys=True) + "\n")


def current(row: dict[str, Any]) -> bool:
    """Whether a row is a successful simulated step of a preset cluster that this simulator would give the same
    time (``model_changed_since``: no change of the model since the row's version concerns its cluster)."""
    return (row["ok"] and row["runtime"] == "sim" and isinstance(row["cluster"], str) and "graph_options" not in row
            and not model_changed_since(str(row["versions"].get("simulator")), pe.load_cluster(row["cluster"])))


def best_known() -> dict[tuple[str, str], tuple[float, str]]:
    """(benchmark, cluster) -> (the fastest successful simulated step time of any stored current row, its method)."""
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for path in STORED:
        for row in read_rows(path):
            if current(row):
                key = (row["benchmark"], row["cluster"])
                if key not in best or row["runtime_s"] < best[key][0]:
                    best[key] = (row["runtime_s"], row["method"] + f" @ {row['budget']}")
    return best


def bounds(time_limit_s: float) -> None:
    """Classic and window bounds of the paper's six tasks on the ideal (``paper``) and as-built (``paper-k80``)
    machines, into docs/optimality/bounds.jsonl."""
    for suite in ("paper", "paper-k80"):
        for method in ("classic", "windows"):
            write_bounds(suite, OUT / "bounds.jsonl", method=method, time_limit_s=time_limit_s)


def small_tasks() -> list[Task]:
    tasks = [Task(f"{graph}/{groups}@{cluster}", graph, cluster, graph_options={})
             for graph in SMALL_GRAPHS for groups in SMALL_GROUPS for cluster in SMALL_CLUSTERS]
    return [*tasks, *load_suite("tiny")]


def _graph(task: Task) -> pe.OpGraph:
    name, _, groups = task.name.partition("/")
    if groups:
        return pe.load_benchmark(task.benchmark, max_groups=int(groups.split("@")[0]))
    return pe.load_benchmark(task.benchmark)


def small(time_limit_s: float) -> None:
    """Per small task: the window bound, CP-SAT on the relaxed model (its status, bound, placement and that
    placement's simulated time), warm annealing at 1,000 evaluations and, where there are at most 3^12 placements,
    the simulator's exact optimum by enumeration; into docs/optimality/small.jsonl."""
    path = OUT / "small.jsonl"
    done = {row["task"] for row in _lines(path)}
    for task in tqdm([t for t in small_tasks() if t.name not in done], desc="small tasks"):
        graph, cluster = _graph(task), pe.load_cluster(task.cluster)
        evaluator = pe.Evaluator(graph, cluster)
        window = pe.bound(graph, cluster, evaluator.costs, method="windows", time_limit_s=time_limit_s)
        problem = pe.Problem.make(graph, cluster, budget=1000, evaluator=evaluator)
        search = evaluator(pe.solve("simulated_annealing_warm", problem).placement)
        started = time.perf_counter()
        exact = pe.solve_exact(graph, cluster, evaluator.costs, time_limit_s=time_limit_s,
                               start=search.placement if search.ok else None)
        placed = evaluator(exact.placement) if exact.placement is not None else None
        row = {"task": task.name, "groups": graph.n_groups, "ops": graph.n_ops,
               "classic_s": pe.lower_bound(graph, cluster, evaluator.costs), "windows_s": window.value_s,
               "windows_status": window.status, "windows_solver_s": round(window.solver_s, 2),
               "cp_sat_status": exact.status, "cp_sat_bound_s": exact.bound_s, "cp_sat_makespan_s": exact.makespan_s,
               "cp_sat_wall_s": round(time.perf_counter() - started, 2),
               "cp_sat_simulated_s": placed.runtime_s if placed is not None and placed.ok else None,
               "annealing_1000_s": search.runtime_s if search.ok else None, "optimum_s": None}
        allowed = pe.allowed_devices(graph, cluster)
        if np.prod(allowed.sum(axis=1).astype(float)) <= ENUMERATE_UP_TO:
            row["optimum_s"], row["enumerated"] = _enumerated_optimum(evaluator, allowed)
        _append(path, row)


def blocks(time_limit_s: float, workers: int) -> None:
    """Per small task: CP-SAT on the block model (``pe.solve_exact(..., model="blocks")``) from warm annealing's
    placement at 1,000 evaluations, on ``workers`` threads: its status, makespan and bound, and its placement's
    simulated time beside annealing's; into docs/optimality/blocks.jsonl."""
    path = OUT / "blocks.jsonl"
    done = {row["task"] for row in _lines(path)}
    for task in tqdm([t for t in small_tasks() if t.name not in done], desc="block model"):
        graph, cluster = _graph(task), pe.load_cluster(task.cluster)
        evaluator = pe.Evaluator(graph, cluster)
        problem = pe.Problem.make(graph, cluster, budget=1000, evaluator=evaluator)
        search = evaluator(pe.solve("simulated_annealing_warm", problem).placement)
        started = time.perf_counter()
        exact = pe.solve_exact(graph, cluster, evaluator.costs, time_limit_s=time_limit_s, model="blocks",
                               start=search.placement if search.ok else None, workers=workers)
        placed = evaluator(exact.placement) if exact.placement is not None else None
        _append(path, {"task": task.name, "groups": graph.n_groups, "ops": graph.n_ops,
                       "blocks": int(block_count(graph, cluster, evaluator.costs.seconds)), "workers": workers,
                       "status": exact.status, "bound_s": exact.bound_s, "makespan_s": exact.makespan_s,
                       "solver_s": round(exact.solver_s, 2), "wall_s": round(time.perf_counter() - started, 2),
                       "simulated_s": placed.runtime_s if placed is not None and placed.ok else None,
                       "annealing_1000_s": search.runtime_s if search.ok else None})


def block_count(graph: pe.OpGraph, cluster: pe.Cluster, seconds: np.ndarray) -> int:
    from placement_env.exact.blocks import blocks as make_blocks
    return make_blocks(graph, cluster, seconds).n_blocks


def _every_placement(allowed: np.ndarray, chunk: int = 50_000) -> Iterator[np.ndarray]:
    options = [np.flatnonzero(a) for a in allowed]
    sizes = np.array([len(o) for o in options])
    total = int(np.prod(sizes))
    for start in range(0, total, chunk):
        index = np.arange(start, min(total, start + chunk))
        rows = np.empty((len(index), len(options)), np.int64)
        for g in range(len(options) - 1, -1, -1):
            rows[:, g] = np.asarray(options[g])[index % sizes[g]]
            index = index // sizes[g]
        yield rows


def _enumerated_optimum(evaluator: pe.Evaluator, allowed: np.ndarray) -> tuple[float | None, int]:
    best, count = np.inf, 0
    for rows in _every_placement(allowed):
        runtimes = np.array([m.runtime_s if m.ok else np.inf for m in evaluator.batch(rows)])
        best, count = min(best, float(runtimes.min())), count + len(rows)
    return (best if np.isfinite(best) else None), count


class _Recording(pe.Evaluator):
    """An Evaluator that keeps the lowest successful simulated step time it returned and how many it returned."""

    fastest = np.inf
    seen = 0

    def _keep(self, measurements: list) -> list:
        for m in measurements:
            self.seen += 1
            if m.ok:
                self.fastest = min(self.fastest, m.runtime_s)
        return measurements

    def __call__(self, placement: Any, *, schedule: bool = False) -> Any:
        return self._keep([super().__call__(placement, schedule=schedule)])[0]

    def batch(self, placements: Any) -> list:
        return self._keep(super().batch(placements))


def check(placements: int, time_limit_s: float) -> None:
    """Every stored simulated row against its task's window bound, then random placements (``placements`` in all,
    over the small tasks) and every placement simulated annealing and the cross-entropy method evaluate at 10,000
    on the paper's six as-built tasks; into docs/optimality/check.jsonl (one line per task)."""
    path = OUT / "check.jsonl"
    done = {row["part"] + ":" + row["task"] for row in _lines(path)}
    by_task: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for source in STORED:
        for row in read_rows(source):
            if current(row):
                by_task[row["benchmark"], row["cluster"]].append((row["runtime_s"], row["versions"].get("opgraph", "")))
    stored_bounds = OUT / "check_bounds.jsonl"
    for (benchmark, cluster), found in tqdm(sorted(by_task.items()), desc="stored rows"):
        if f"stored:{benchmark}@{cluster}" in done:
            continue
        graph = pe.load_benchmark(benchmark)
        runtimes = [runtime for runtime, digest in found if digest in ("", graph.digest)]  # rows of this graph
        if not runtimes:
            continue
        write_bounds("stored", stored_bounds, time_limit_s=time_limit_s, progress=False,
                     tasks=[Task(f"{benchmark}@{cluster}", benchmark, cluster)])
        value = read_bounds([stored_bounds]).get((benchmark, cluster, graph.digest))
        _append(path, {"part": "stored", "task": f"{benchmark}@{cluster}", "bound_s": value, "rows": len(runtimes),
                       "fastest_s": min(runtimes), "below": int(sum(r < value for r in runtimes)) if value else None})
    tasks = small_tasks()
    per_task = placements // len(tasks)
    for task in tqdm(tasks, desc="random placements"):
        if f"random:{task.name}" in done:
            continue
        graph, cluster = _graph(task), pe.load_cluster(task.cluster)
        evaluator = _Recording(graph, cluster)
        value = pe.bound(graph, cluster, evaluator.costs, method="windows", time_limit_s=time_limit_s).value_s
        rng = np.random.default_rng(0)
        below = 0
        for start in range(0, per_task, 20_000):
            rows = pe.random_placements(graph, cluster, min(20_000, per_task - start), rng)
            below += sum(m.ok and m.runtime_s < value for m in evaluator.batch(rows))
        _append(path, {"part": "random", "task": task.name, "bound_s": value, "rows": evaluator.seen,
                       "fastest_s": evaluator.fastest, "below": int(below)})
    for task in tqdm(load_suite("paper-k80"), desc="search placements"):
        if f"search:{task.name}" in done:
            continue
        graph, cluster = pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster)
        evaluator = _Recording(graph, cluster)
        value = pe.bound(graph, cluster, evaluator.costs, method="windows", time_limit_s=time_limit_s).value_s
        for method in ("simulated_annealing_warm", "cross_entropy"):
            pe.solve(method, pe.Problem.make(graph, cluster, budget=10_000, evaluator=evaluator, benchmark=task.benchmark))
        _append(path, {"part": "search", "task": task.name, "bound_s": value, "rows": evaluator.seen,
                       "fastest_s": evaluator.fastest, "below": int(evaluator.fastest < value)})


def orders(time_limit_s: float) -> None:
    """For the best known placement of each of the paper's as-built tasks: CP-SAT on the relaxed model with every
    group fixed to its device, i.e. the best order of its ops that the model admits (its proven bound: no order
    of this placement's ops is faster, whatever the executor); into docs/optimality/orders.jsonl."""
    path = OUT / "orders.jsonl"
    done = {row["task"] for row in _lines(path)}
    best_rows: dict[tuple[str, str], dict[str, Any]] = {}
    for source in STORED:
        for row in read_rows(source):
            key = (row["benchmark"], row["cluster"])
            if current(row) and (key not in best_rows or row["runtime_s"] < best_rows[key]["runtime_s"]):
                best_rows[key] = row
    for task in tqdm([t for t in load_suite("paper-k80") if t.name not in done], desc="orders of the best placements"):
        row = best_rows[task.benchmark, task.cluster]
        graph, cluster = pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster)
        evaluator = pe.Evaluator(graph, cluster)
        placement = np.asarray(row["placement"], np.int64)
        _, makespan = model_schedule(graph, cluster, evaluator.costs.seconds, placement)
        model = relax(graph, cluster, evaluator.costs.seconds, makespan)
        fixed = np.zeros_like(model.allowed)
        fixed[np.arange(graph.n_groups), placement] = True
        result = solve_isolated(dataclasses.replace(model, allowed=fixed), cluster, time_limit_s=time_limit_s,
                                hint=placement)
        _append(path, {"task": task.name, "placement_from": method_label(row) + f" @ {row['budget']}",
                       "simulated_s": row["runtime_s"], "best_order_s": result.makespan_s,
                       "proven_s": result.bound_s, "status": result.status})


SEARCHES = ("random_search", "hill_climbing", "simulated_annealing", "cross_entropy", "brkga", "hill_climbing_warm",
            "simulated_annealing_warm", "cross_entropy_warm", "brkga_warm")


def _cp_sat_against_search(found: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    """The cp_sat rows of the paper track (60 s of solver time) beside the best search at 10,000 evaluations (mean
    over seeds each) and the window bound."""
    rows = [r for r in read_rows(Path("docs/placebench/paper.jsonl")) if r["ok"]]
    means: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["method"] == "cp_sat" or (r["method"] in SEARCHES and r["budget"] == 10_000):
            means[r["task"], r["method"]].append(r["runtime_s"])
    tasks = sorted({task for task, method in means if method == "cp_sat"})
    if not tasks:
        return []
    lines = ["| task | cp_sat, 60 s (solver's bound) | best search at 10,000 | cp_sat vs it | window bound |",
             "|---|---|---|---|---|"]
    for task in tasks:
        cp = float(np.mean(means[task, "cp_sat"]))
        solver_bound = max(r.get("method_info", {}).get("solver_bound_s") or 0 for r in rows
                           if r["task"] == task and r["method"] == "cp_sat")
        method, best = min(((m, float(np.mean(v))) for (t, m), v in means.items() if t == task and m != "cp_sat"),
                           key=lambda item: item[1])
        benchmark, cluster = task.split("@")
        window = found.get((benchmark, cluster, "windows"), {}).get("bound_s")
        lines.append(f"| {task} | {cp:.4g} ({solver_bound:.3g}) | {best:.4g} ({method}) | {cp / best - 1:+.1%} | "
                     + ("-" if window is None else f"{window:.4g}") + " |")
    return lines


def _blocks_table(small_rows: list[dict[str, Any]]) -> list[str]:
    """The block model's rows beside each small task's enumerated optimum and annealing at 1,000."""
    rows = _lines(OUT / "blocks.jsonl")
    if not rows:
        return []
    optimum = {row["task"]: row.get("optimum_s") for row in small_rows}
    lines = ["| task | groups | blocks | CP-SAT status (solver s) | model makespan | model bound | its placement, "
             "simulated | annealing @ 1,000 | optimum (enumerated) | placement vs annealing |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        def cell(value: Any) -> str:
            return "-" if value is None else f"{value:.4g}"
        versus = ("-" if row["simulated_s"] is None or row["annealing_1000_s"] is None
                  else f"{row['simulated_s'] / row['annealing_1000_s'] - 1:+.1%}")
        lines.append(f"| {row['task']} | {row['groups']} | {row['blocks']} | {row['status']} ({row['solver_s']:.3g}) | "
                     f"{cell(row['makespan_s'])} | {cell(row['bound_s'])} | {cell(row['simulated_s'])} | "
                     f"{cell(row['annealing_1000_s'])} | {cell(optimum.get(row['task']))} | {versus} |")
    return lines


def table() -> str:
    """docs/optimality.md's tables from docs/optimality/*.jsonl."""
    best = best_known()
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in _lines(OUT / "bounds.jsonl"):
        found[row["benchmark"], row["cluster"], row["method"]] = row
    lines = ["| task | best known (method @ budget) | classic bound | gap | window bound (solver s, status) | gap |",
             "|---|---|---|---|---|---|"]
    for (benchmark, cluster, method), row in found.items():
        if method != "windows":
            continue
        classic = found.get((benchmark, cluster, "classic"))
        known, how = best.get((benchmark, cluster), (None, ""))
        cells = [f"{benchmark} on {cluster}", "-" if known is None else f"{known:.4g} ({how})"]
        for bound_row in (classic, row):
            value = None if bound_row is None else bound_row["bound_s"]
            cells.append("-" if value is None else f"{value:.4g}" + ("" if bound_row is classic else
                                                                     f" ({bound_row['solver_s']:.3g} s, {bound_row['status']})"))
            cells.append("-" if value is None or known is None else f"+{known / value - 1:.1%}")
        lines.append("| " + " | ".join(cells) + " |")
    small_rows = _lines(OUT / "small.jsonl")
    if small_rows:
        lines += ["", "| task | groups | optimum (enumerated) | annealing @ 1,000 | CP-SAT placement, simulated | "
                  "CP-SAT status | CP-SAT model makespan | CP-SAT bound | window bound | classic bound |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in small_rows:
            def cell(key: str) -> str:
                value = row.get(key)
                return "-" if value is None else f"{value:.4g}"
            lines.append("| " + " | ".join([row["task"], str(row["groups"]), cell("optimum_s"), cell("annealing_1000_s"),
                                             cell("cp_sat_simulated_s"), row["cp_sat_status"], cell("cp_sat_makespan_s"),
                                             cell("cp_sat_bound_s"), cell("windows_s"), cell("classic_s")]) + " |")
    lines += ["", *_blocks_table(small_rows)]
    lines += ["", *_cp_sat_against_search(found)]
    order_rows = _lines(OUT / "orders.jsonl")
    if order_rows:
        lines += ["", "| task | best known placement (simulated s) | best order CP-SAT found (s) | no order of its ops "
                  "below (s) | status |", "|---|---|---|---|---|"]
        lines += [f"| {r['task']} | {r['simulated_s']:.4g} ({r['placement_from']}) | {r['best_order_s']:.4g} | "
                  f"{r['proven_s']:.4g} | {r['status']} |" for r in order_rows]
    check_rows = _lines(OUT / "check.jsonl")
    if check_rows:
        total = defaultdict(int)
        below = defaultdict(int)
        for row in check_rows:
            total[row["part"]] += row["rows"]
            below[row["part"]] += row["below"] or 0
        lines += ["", "| placements checked | how many | simulated below the task's bound |", "|---|---|---|"]
        lines += [f"| {part} | {total[part]:,} | {below[part]} |" for part in total]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["bounds", "small", "blocks", "orders", "check", "table"])
    parser.add_argument("--time-limit", type=float, default=60.0, help="solver seconds per task")
    parser.add_argument("--workers", type=int, default=8, help="CP-SAT threads (blocks)")
    parser.add_argument("--placements", type=int, default=1_000_000, help="random placements in all (check)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.part == "bounds":
        bounds(args.time_limit)
    elif args.part == "small":
        small(args.time_limit)
    elif args.part == "blocks":
        blocks(args.time_limit, args.workers)
    elif args.part == "orders":
        orders(args.time_limit)
    elif args.part == "check":
        check(args.placements, args.time_limit)
    print(table())


if __name__ == "__main__":
    main()
