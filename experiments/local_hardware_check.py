"""Real-hardware check of the seq2seq agent: learn on the calibrated simulator, confirm on real TF workers.

    python -m experiments.local_hardware_check [--benchmark rnnlm-tiny] [--cluster local:2] [--budget 1500]

1. Calibrate the simulator on ``cluster`` (random placements measured on local TF workers).
2. Train ``reinforce_seq2seq`` on the calibrated simulator for ``--budget`` evaluations.
3. Measure a few candidates for real (the simulator's best and ``--candidates`` samples of the trained
   policy); the fastest measured one is the learned placement.
4. Export it as a placed TF graph (``.pb``), and measure that exported graph as written (every node's
   device read back from the file) against the expert placement, alternating ``--rounds`` times.

Prints the medians and their ratio; writes ``learned.pb`` and ``check.json`` to ``--out-dir``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np


def measure_exported(runtime, graph, pb_path: Path) -> float:
    """Step time of the exported GraphDef, each node on the device written in the file (median after warm-up)."""
    from tensorflow.core.framework import graph_pb2

    data = pb_path.read_bytes()
    devices = {node.name: node.device for node in graph_pb2.GraphDef.FromString(data).node if node.device}
    answer = runtime.workers.measure(data, devices, train_op=graph.train_op, init_op=graph.init_op,
                                     feeds=graph.feeds, steps=runtime.steps, timeout_s=runtime.timeout_s)
    if not answer.get("ok"):
        raise RuntimeError(f"the exported graph {pb_path} did not run: {answer.get('message', answer)}")
    return float(np.median(answer["step_times_s"][runtime.warmup:]))


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from agents.common.arguments import positive_int
    from agents.reinforce_seq2seq import train
    from placement_env.problem import Problem, solve
    from placement_env.benchmarks import load_benchmark
    from placement_env.calibration import calibrate
    from placement_env.cluster import load_cluster
    from placement_env.evaluation import Evaluator
    from placement_env.runtime.measured import MeasuredRuntime
    from placement_env.tf_import.export import export_placed_graph

    parser = argparse.ArgumentParser(prog="python -m experiments.local_hardware_check", description=__doc__.split("\n")[0])
    parser.add_argument("--benchmark", default="rnnlm-tiny")
    parser.add_argument("--cluster", default="local:2", help="a local:N cluster (default: local:2)")
    parser.add_argument("--budget", type=positive_int, default=1500, help="simulated evaluations to train for")
    parser.add_argument("--calibration-placements", type=positive_int, default=30)
    parser.add_argument("--candidates", type=positive_int, default=8, help="policy samples measured for real")
    parser.add_argument("--rounds", type=positive_int, default=5, help="alternating real measurements per placement")
    parser.add_argument("--out-dir", default="runs/local_hardware_check")
    parser.add_argument("--resume", action="store_true", help="continue the training in OUT_DIR/training")
    args = parser.parse_args(argv)
    if not args.cluster.startswith("local:"):
        parser.error(f"argument --cluster: {args.cluster!r}; this check starts its own workers, use local:N")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graph, cluster = load_benchmark(args.benchmark), load_cluster(args.cluster)

    calibration = calibrate(graph, cluster, n_placements=args.calibration_placements)
    print(calibration.summary())
    result = train(args.benchmark, calibration.cluster, "sim", budget=args.budget, out_dir=out / "training",
                   resume=args.resume)

    runtime = MeasuredRuntime(cluster, steps=20, warmup=5, timeout_s=120.0)
    try:
        # local:N workers are CPUs; the expert splits the model over them as it would over N GPUs (simulated
        # only to name the placement, so without the CPU workers' host transfers, which GPUs do not take)
        as_gpus = dataclasses.replace(cluster, devices=tuple(dataclasses.replace(d, kind="GPU")
                                                             for d in cluster.devices), host_transfer=None)
        problem = Problem.make(graph, as_gpus, benchmark=args.benchmark, evaluator=Evaluator(graph, as_gpus))
        expert = np.asarray(solve("expert", problem).placement)
        trainer = result.trainer
        with torch.no_grad():
            samples, _, _ = trainer.policy(trainer.features, trainer.allowed, samples=args.candidates)
        candidates = np.unique(np.vstack([result.best_placement[None], samples.numpy(), trainer.greedy()[None]]), axis=0)
        measured = [runtime.measure(graph, p) for p in candidates]
        ok = [i for i, m in enumerate(measured) if m.ok]
        if not ok:
            raise RuntimeError("no learned candidate ran on the real workers")
        learned = candidates[min(ok, key=lambda i: measured[i].runtime_s)]
        pb = export_placed_graph(graph, cluster, learned, out / "learned.pb")
        expert_pb = export_placed_graph(graph, cluster, expert, out / "expert.pb")
        times = {"learned": [], "expert": []}
        for _ in range(args.rounds):
            times["learned"].append(measure_exported(runtime, graph, pb))
            times["expert"].append(measure_exported(runtime, graph, expert_pb))
    finally:
        runtime.close()
    medians = {k: float(np.median(v)) for k, v in times.items()}
    record = {"benchmark": args.benchmark, "cluster": args.cluster, "budget": args.budget,
              "calibration": {"before": calibration.before, "after": calibration.after, "heldout": calibration.heldout},
              "simulated_best_s": result.best_runtime_s, "candidates_measured_s": [m.runtime_s for m in measured],
              "measured_s": times, "median_s": medians, "learned_over_expert": medians["learned"] / medians["expert"],
              "learned_placement": learned.tolist(), "expert_placement": expert.tolist()}
    (out / "check.json").write_text(json.dumps(record, indent=1))
    print(f"\nexported graphs measured for real on {args.cluster}, {args.rounds} alternating rounds of 20 steps:")
    print(f"  learned {medians['learned'] * 1e3:.3f} ms, expert {medians['expert'] * 1e3:.3f} ms, "
          f"learned / expert = {record['learned_over_expert']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
