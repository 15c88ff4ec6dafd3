"""Speed and shape of the runtimes, measured side by side in one run: ``python -m experiments.bench``.

For every benchmark it draws random placements (each group on a device that can run it), then
times, on the same placements and in the same process:

* the simulator through ``pe.Evaluator`` one placement at a time, and through its batch call;
* grappler's VirtualCluster (``runtime="grappler"``) on the first few of them, against the
  simulator on the same placements (median of 5 back-to-back runs each, as an agent would call it);
* a oneshot ``env.step`` against a bare ``pe.evaluate`` of the same placement;
* the placed step on real local TF workers (``runtime="measured"``, a tiny graph on ``local:2``).

It prints medians, evaluations per second and the grappler / simulator ratio, plus the simulated
single-CPU and single-GPU step times (the shape of the paper's table). By default the process is
pinned to one core so that every runtime gets the same machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
from tqdm import tqdm

import placement_env as pe

SIM_TARGET_MS = 2.0  # issue target: nmt under 2 ms per placement on one core
RATIO_TARGET = 200.0  # and at least 200x faster than grappler


def _timed(function: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def _describe(m: pe.Measurement) -> str:
    return f"{m.runtime_s:.4g} s" if m.ok else f"{m.failure} ({m.message[:60]})"


def bench_graph(name: str, cluster_name: str, n_sim: int, n_grappler: int, seed: int) -> dict[str, Any]:
    """Simulator and grappler timings on ``n_sim`` / ``n_grappler`` random placements of one benchmark."""
    graph = pe.load_benchmark(name)
    cluster = pe.load_cluster(cluster_name)
    sim = pe.Evaluator(graph, cluster, "sim")
    grappler = pe.Evaluator(graph, cluster, "grappler", costs=sim.costs)
    placements = pe.random_placements(graph, cluster, n_sim, np.random.default_rng(seed))
    sim(placements[0])  # compile and build the plan outside the timings
    sim.batch(placements[:1])
    sim_times = [_timed(sim, p)[1] for p in tqdm(placements, desc=f"{name}: simulator", leave=False)]
    _, batch_s = _timed(sim.batch, placements)
    grappler(placements[0])  # TF start-up outside the timings
    grappler_s, paired_sim_s = [], []
    for p in tqdm(placements[:n_grappler], desc=f"{name}: grappler", leave=False):
        grappler_s.append(_timed(grappler, p)[1])
        # the simulator on the same placement, warm (as in RL use: evaluations back to back)
        paired_sim_s.append(statistics.median(_timed(sim, p)[1] for _ in range(5)))
    env_over_evaluate = _env_step_over_evaluate(graph, cluster, placements[: min(len(placements), 100)])
    gpu = next((d for d in range(cluster.n_devices) if cluster.devices[d].kind == "GPU"), 0)
    single = {kind: sim(pe.single_device(graph, cluster, d)) for kind, d in (("cpu", 0), ("gpu", gpu))}
    return {
        "benchmark": name, "cluster": cluster_name, "ops": graph.n_ops, "groups": graph.n_groups,
        "sim_median_ms": 1e3 * statistics.median(sim_times), "sim_evals_per_s": 1.0 / statistics.median(sim_times),
        "sim_batch_evals_per_s": n_sim / batch_s,
        "grappler_median_ms": 1e3 * statistics.median(grappler_s),
        "grappler_over_sim": statistics.median(grappler_s) / statistics.median(paired_sim_s),
        "single_cpu": _describe(single["cpu"]), "single_gpu": _describe(single["gpu"]),
        "single_cpu_s": single["cpu"].runtime_s if single["cpu"].ok else None,
        "single_gpu_s": single["gpu"].runtime_s if single["gpu"].ok else None,
        "lower_bound_s": sim.lower_bound(), "env_step_over_evaluate": env_over_evaluate,
    }


def _env_step_over_evaluate(graph: pe.OpGraph, cluster: pe.Cluster, placements: np.ndarray) -> float:
    """Median over placements of (oneshot env.step time) / (bare pe.evaluate time), alternated."""
    env = pe.DevicePlacementEnv(graph, cluster)
    env.reset(seed=0)
    env.step(placements[0])
    ratios = []
    for p in placements:
        env.reset()
        _, step_s = _timed(env.step, p)
        _, evaluate_s = _timed(pe.evaluate, graph, cluster, p)
        ratios.append(step_s / evaluate_s)
    return statistics.median(ratios)


def bench_measured(name: str, n: int, seed: int) -> dict[str, Any]:
    """Measured runtime on ``local:2`` against the simulator, on ``n`` random placements of a small graph."""
    graph = pe.load_benchmark(name)
    cluster = pe.load_cluster("local:2")
    placements = pe.random_placements(graph, cluster, n + 1, np.random.default_rng(seed))
    sim = pe.Evaluator(graph, cluster, "sim")
    with pe.Evaluator(graph, cluster, "measured") as measured:
        measured(placements[0])  # workers start outside the timings,
        sim(placements[0])  # and the simulator's costs, plan and compiled code load outside them
        rows = []
        for p in tqdm(placements[1:], desc=f"{name}: measured on local:2", leave=False):
            m, m_s = _timed(measured, p)
            s, s_s = _timed(sim, p)
            rows.append((m_s, s_s, m.runtime_s if m.ok else float("nan"), s.runtime_s))
    return {
        "benchmark": name, "cluster": "local:2", "placements": n,
        "measured_eval_median_s": statistics.median(r[0] for r in rows),
        "measured_over_sim": statistics.median(r[0] / r[1] for r in rows),
        "measured_step_median_s": float(np.nanmedian([r[2] for r in rows])),
        "sim_step_median_s": statistics.median(r[3] for r in rows),
    }


def report(graphs: list[dict[str, Any]], measured: dict[str, Any] | None, one_core: bool) -> str:
    lines = [f"experiments.bench: {'one core (pinned)' if one_core else 'all cores'}, "
             f"{os.cpu_count()} cores on this machine", "",
             "| benchmark | cluster | ops | groups | sim ms/placement | sim evals/s (batch) | grappler ms | "
             "grappler / sim | env.step / evaluate | 1 CPU | 1 GPU | lower bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in graphs:
        lines.append(f"| {r['benchmark']} | {r['cluster']} | {r['ops']:,} | {r['groups']} | {r['sim_median_ms']:.3f} | "
                     f"{r['sim_evals_per_s']:,.0f} ({r['sim_batch_evals_per_s']:,.0f}) | {r['grappler_median_ms']:.0f} | "
                     f"{r['grappler_over_sim']:,.0f}x | {r['env_step_over_evaluate']:.2f}x | {r['single_cpu']} | {r['single_gpu']} | "
                     f"{r['lower_bound_s']:.4g} s |")
    nmt = next((r for r in graphs if r["benchmark"] == "nmt"), None)
    if nmt is not None:
        lines += ["", f"target nmt: sim median {nmt['sim_median_ms']:.3f} ms (target < {SIM_TARGET_MS} ms: "
                      f"{'met' if nmt['sim_median_ms'] < SIM_TARGET_MS else 'MISSED'}), grappler / sim "
                      f"{nmt['grappler_over_sim']:,.0f}x (target >= {RATIO_TARGET:.0f}x: "
                      f"{'met' if nmt['grappler_over_sim'] >= RATIO_TARGET else 'MISSED'})"]
        lines.append(f"target nmt: env.step / pe.evaluate {nmt['env_step_over_evaluate']:.2f}x (target < 1.5x: "
                     f"{'met' if nmt['env_step_over_evaluate'] < 1.5 else 'MISSED'})")
    rnnlm = next((r for r in graphs if r["benchmark"] == "rnnlm"), None)
    if rnnlm is not None and rnnlm["single_cpu_s"] and rnnlm["single_gpu_s"]:
        lines.append(f"rnnlm single CPU / single GPU: {rnnlm['single_cpu_s'] / rnnlm['single_gpu_s']:.2f}x")
    if measured is not None:
        lines += ["", f"measured ({measured['benchmark']} on local:2, {measured['placements']} placements): "
                      f"{measured['measured_eval_median_s']:.2f} s per evaluation (step {measured['measured_step_median_s'] * 1e3:.1f} ms "
                      f"measured vs {measured['sim_step_median_s'] * 1e3:.1f} ms simulated, uncalibrated); "
                      f"measured / sim evaluation time {measured['measured_over_sim']:,.0f}x"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", nargs="+", default=["rnnlm", "nmt", "inception_v3"])
    parser.add_argument("--cluster", default="paper-2gpu")
    parser.add_argument("--placements", type=int, default=300, help="simulator placements per benchmark")
    parser.add_argument("--grappler-placements", type=int, default=5)
    parser.add_argument("--measured-benchmark", default="rnnlm-tiny", help="small graph for the measured runtime")
    parser.add_argument("--measured-placements", type=int, default=3, help="0 skips the measured runtime")
    parser.add_argument("--all-cores", action="store_true", help="do not pin the process to one core")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    if min(args.placements, args.grappler_placements) < 1 or args.measured_placements < 0:
        parser.error("--placements and --grappler-placements must be >= 1, --measured-placements >= 0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    one_core = not args.all_cores and hasattr(os, "sched_setaffinity")
    if one_core:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    graphs = [bench_graph(name, args.cluster, args.placements, args.grappler_placements, args.seed)
              for name in args.benchmarks]
    measured = bench_measured(args.measured_benchmark, args.measured_placements, args.seed) \
        if args.measured_placements else None
    print(report(graphs, measured, one_core))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"graphs": graphs, "measured": measured, "one_core": one_core}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
