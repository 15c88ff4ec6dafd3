"""What a harness method's evaluations look like over its budget: ``python -m experiments.agent_samples``.

Runs ``--method`` (default the seq2seq agent from scratch, ``agents.reinforce_seq2seq:place``) on one task of a
suite with the harness's budget and seed, as ``placement-env run`` does (so its best is the row that command writes),
and prints, per ``--window`` evaluations, the share of placements that fit (ran without failure), the fastest that
ran, and the mean number of groups on each device. On ``dlrm-k80-2gpu`` (seed 1) it shows the agent's policy
collapsing onto one out-of-memory placement.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from agents.common.arguments import positive_int


class _Recorder:
    """The runtime a problem is made with, keeping every Measurement it returns (single and batched calls alike:
    a method may use either)."""

    def __init__(self, runtime) -> None:
        self._inner, self.seen = runtime, []
        self.runtime = runtime.runtime

    @property
    def costs(self):
        return self._inner.costs

    def lower_bound(self) -> float:
        return self._inner.lower_bound()

    def __call__(self, placement):
        measurement = self._inner(placement)
        self.seen.append(measurement)
        return measurement

    def batch(self, placements):
        measurements = self._inner.batch(placements)
        self.seen.extend(measurements)
        return measurements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="dlrm")
    parser.add_argument("--task", default="dlrm-k80-2gpu")
    parser.add_argument("--method", default="agents.reinforce_seq2seq:place")
    parser.add_argument("--budget", type=positive_int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--window", type=positive_int, default=100)
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from placement_env.harness import load_suite

    tasks = {task.name: task for task in load_suite(args.suite)}
    if args.task not in tasks:
        raise SystemExit(f"task {args.task!r} is not in suite {args.suite!r}; its tasks: {', '.join(tasks)}")
    task = tasks[args.task]
    graph, cluster = pe.load_benchmark(task.benchmark), pe.load_cluster(task.cluster)
    runtime = pe.Evaluator(graph, cluster, task.runtime)
    recorder = _Recorder(runtime)
    problem = pe.Problem.make(graph, cluster, benchmark=task.benchmark, budget=args.budget, seed=args.seed,
                              evaluator=recorder)
    answer = pe.resolve_method(args.method)(problem)
    seen = [(m.ok, m.runtime_s, np.bincount(m.placement, minlength=cluster.n_devices)) for m in recorder.seen]
    print(f"{args.method} on {args.task}, seed {args.seed}: {len(seen)} evaluations")
    devices = ", ".join(d.name for d in cluster.devices)
    print(f"| evaluations | fit | fastest that ran (ms) | mean groups per device ({devices}) |")
    print("|---|---|---|---|")
    for lo in range(0, len(seen), args.window):
        window = seen[lo:lo + args.window]
        ok = np.array([s[0] for s in window])
        ran = [s[1] * 1e3 for s in window if s[0]]
        groups = np.mean([s[2] for s in window], axis=0)
        print(f"| {lo + 1}-{lo + len(window)} | {ok.mean():.0%} | {f'{min(ran):.1f}' if ran else '-'} | "
              f"{' / '.join(f'{g:.1f}' for g in groups)} |")
    final = runtime(answer)
    print(f"answer: {final.runtime_s * 1e3:.1f} ms" + ("" if final.ok else f" ({final.failure})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
