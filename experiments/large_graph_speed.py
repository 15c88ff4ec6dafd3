"""The simulator at 50,000+ ops: ``python -m experiments.large_graph_speed`` (run it on an otherwise idle machine).

The graph is ``--benchmark`` grouped with ``max_groups=4000`` (built once, then cached): ``nmt-deep`` by
default, GNMT's 8 + 8 layers over 60 + 60 steps (67,639 ops, 1,139 groups), or ``rnnlm-deep``, the RNNLM with
8 layers unrolled over 105 steps (50,808 ops, 860 groups). For each cluster it
times, per placement, a batch of 64 random placements (each group on a device that can run it) on one
thread and on ``--threads`` threads (``SimulationPlan.run_batch(..., threads=N)``), alternated over
``--rounds`` rounds, best and median of 5 batches each; then, on one thread, placements that split the groups
in index order as layer-wise splits do: all on GPU 0, and 2 or 4 contiguous blocks over the GPUs, and 16 placements
of each group on a random GPU; and the expert's and MinCut's placements, each alone and 64 placements one group
away from it (what local search and annealing evaluate; one thread and ``--threads``). Each line gives the
placement's tensor transfers (the first of 16 random ones), what a placement's time grows with (docs/findings.md).
Last, the
GNN placer's network (the committed checkpoint, and a network of its shape with the sequential decoder; one
torch thread) on the same graph and each cluster: best of 5 of its forward pass, and of forward, 16 samples and
backward (an update's work without the simulator). With ``--save-batches FOLDER`` it also writes each cluster's
batches and the compiled loop's arrays there, which ``python -m experiments.batch_timing FOLDER`` times on a machine
without TensorFlow.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments.batch_timing import save as save_batches


def _per_placement(plan, placements: np.ndarray, threads: int, repeats: int = 5) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan.run_batch(placements, threads=threads)
        times.append((time.perf_counter() - start) / len(placements))
    return times


def _policy_times(problem, net, repeats: int = 5) -> tuple[float, float]:
    """Best seconds of the GNN placer network ``net``'s forward pass on ``problem``, and of forward + 16 samples +
    backward."""
    import torch

    from agents.gnn_placer import make_task
    from agents.gnn_placer.policy import sample

    inputs = make_task(problem).inputs
    forward, update = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            net(inputs)
        forward.append(time.perf_counter() - start)
        start = time.perf_counter()
        net.zero_grad()
        drawn = sample(net, net(inputs), 16, torch.Generator().manual_seed(0))
        (drawn.log_prob.mean() + drawn.entropy).backward()
        update.append(time.perf_counter() - start)
    return min(forward), min(update)


def _transfers(plan, placement: np.ndarray) -> int:
    """The tensor transfers of one simulated step of ``placement``."""
    return len(plan.run(placement, schedule=True).schedule.transfer_bytes)


def in_order_splits(allowed: np.ndarray, gpus: list[int]) -> dict[str, np.ndarray]:
    """All groups on the first GPU, and 2 or 4 contiguous blocks of groups over the GPUs, as many as there are
    GPUs for (a group a GPU cannot run goes to device 0, the CPU)."""
    n = allowed.shape[0]
    rows = np.arange(n)
    splits = {"one GPU": np.full(n, gpus[0])}
    for k in [k for k in (2, 4) if k <= len(gpus)]:
        splits[f"{k} blocks"] = np.array(gpus[:k])[np.minimum(rows * k // n, k - 1)]
    return {name: np.where(allowed[rows, p], p, 0) for name, p in splits.items()}


def on_random_gpus(allowed: np.ndarray, gpus: list[int], k: int, rng: np.random.Generator) -> np.ndarray:
    """[k, n_groups]: each group on a GPU drawn at random (device 0, the CPU, where that GPU cannot run it)."""
    drawn = np.array(gpus)[rng.integers(0, len(gpus), (k, allowed.shape[0]))]
    return np.where(allowed[np.arange(allowed.shape[0]), drawn], drawn, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="nmt-deep", help="a benchmark name (default: %(default)s)")
    parser.add_argument("--clusters", nargs="+", default=["paper-4gpu", "k80-4gpu"])
    parser.add_argument("--threads", type=int, default=2, help="threads of the parallel batch (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save-batches", metavar="FOLDER", help="also write each cluster's batches and the compiled "
                        "loop's arrays there, for experiments.batch_timing on a machine without TF")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from placement_env.costs import analytical_costs
    from placement_env.runtime.simulated import SimulationPlan, check_threads

    from baselines.expert import expert
    from baselines.partition import mincut
    from baselines.search import Moves

    check_threads(args.threads)
    if args.save_batches:
        Path(args.save_batches).mkdir(parents=True, exist_ok=True)
    graph = pe.load_benchmark(args.benchmark, max_groups=4000)
    print(f"{args.benchmark}: {graph.n_ops:,} ops, {graph.n_groups:,} groups, {graph.n_edges:,} edges")
    for name in args.clusters:
        cluster = pe.load_cluster(name)
        plan = SimulationPlan(graph, cluster, analytical_costs(graph, cluster).seconds)
        allowed = pe.allowed_devices(graph, cluster)
        rng = np.random.default_rng(0)
        rows = np.arange(graph.n_groups)
        drawn = rng.integers(0, cluster.n_devices, (64, graph.n_groups))
        random = np.where(allowed[rows, drawn], drawn, 0)
        plan.run_batch(random[:2])  # compile (or load the compiled code) outside the timing
        plan.run_batch(random[:2], threads=args.threads)
        for r in range(args.rounds):
            cells = []
            for threads in (1, args.threads):
                times = _per_placement(plan, random, threads)
                cells.append(f"{threads} thread(s): best {min(times) * 1e3:.2f}, median "
                             f"{statistics.median(times) * 1e3:.2f} ms")
            print(f"{name}, random placements, round {r + 1}: " + " | ".join(cells))
        gpus = [d for d in range(cluster.n_devices) if cluster.devices[d].kind == "GPU"]
        shapes = {split: np.repeat(placement[None], 16, axis=0)
                  for split, placement in in_order_splits(allowed, gpus).items()}
        shapes["each group on a random GPU"] = on_random_gpus(allowed, gpus, 16, rng)
        batches = {"random placements": random, **shapes}
        for split, placements in shapes.items():
            times = _per_placement(plan, placements, 1)
            print(f"{name}, {split}: best {min(times) * 1e3:.2f} ms per placement (one thread), "
                  f"{_transfers(plan, placements[0]):,} transfers")
        problem = pe.Problem.make(graph, cluster)
        for label, placement in (("expert", expert(problem)), ("MinCut", mincut(problem))):
            batches[label] = np.repeat(placement[None], 16, axis=0)
            times = _per_placement(plan, batches[label], 1)
            move = Moves(allowed, rng)  # local search's and annealing's moves, one group each here
            moves = np.array([move(placement, 1) for _ in range(64 if move.possible else 0)])
            if len(moves):
                batches[f"one-group moves from {label}"] = moves
            cells = [f"{threads} thread(s) best {min(t) * 1e3:.2f} ms" for threads in (1, args.threads)
                     for t in [_per_placement(plan, moves, threads)]] if len(moves) else ["no group can move"]
            print(f"{name}, {label}: best {min(times) * 1e3:.2f} ms per placement (one thread), "
                  f"{_transfers(plan, placement):,} transfers; {len(moves)} one-group moves from it: "
                  + ", ".join(cells))
        if args.save_batches:
            save_batches(Path(args.save_batches) / f"{name}.npz", plan, batches)
    import dataclasses

    import torch

    from agents.gnn_placer import load_network

    torch.set_num_threads(1)
    committed, config, _ = load_network(None)
    sequential = dataclasses.replace(config, decoder="sequential").network(committed.feature_dim)
    for name in args.clusters:
        problem = pe.Problem.make(graph, pe.load_cluster(name))
        for label, net in (("committed", committed), ("sequential decoder, same shape", sequential)):
            forward, update = _policy_times(problem, net)
            print(f"{name}, GNN placer, {label} (one torch thread): forward {forward * 1e3:.1f} ms, forward + 16 "
                  f"samples + backward {update * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
