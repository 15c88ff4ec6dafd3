"""Train the seed paper's seq2seq REINFORCE agent on one benchmark and cluster, then compare it.

The agent (Mirhoseini et al., ICML 2017; ``agents/reinforce_seq2seq``) samples placements from an
attention seq2seq policy, measures them on the runtime (here the simulator) and takes REINFORCE steps.
This script trains it for a budget of runtime evaluations and prints its best step time against the
single-GPU placement and the lower bound (no placement can beat it).

    python examples/train_paper_agent.py                                  # rnnlm-tiny on paper-2gpu, ~10 s
    python examples/train_paper_agent.py --benchmark nmt --budget 10000   # the paper's scale (minutes)

The run folder (log, checkpoint, best placement, learning curve) goes to ``--out`` (default: a new temp folder).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Sequence

import placement_env as pe
from agents.reinforce_seq2seq import train


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--benchmark", default="rnnlm-tiny", help="a name from pe.benchmark_names()")
    parser.add_argument("--cluster", default="paper-2gpu", help="a cluster preset or JSON file")
    parser.add_argument("--budget", type=int, default=320, help="runtime evaluations (16 per update)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="run folder (default: a new temp folder)")
    args = parser.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="train_paper_agent-")

    # Train from scratch with the paper's setting (the default Config); runtime="sim" is the simulator.
    result = train(args.benchmark, args.cluster, "sim", budget=args.budget, seed=args.seed, out_dir=out,
                   progress=False)

    # The reference: everything on one GPU (ops without a GPU kernel stay on the CPU).
    graph, cluster = pe.load_benchmark(args.benchmark), pe.load_cluster(args.cluster)
    single_gpu = pe.solve("single_gpu", pe.Problem.make(graph, cluster)).placement
    gpu = pe.evaluate(graph, cluster, single_gpu)
    gpu_text = f"{gpu.runtime_s:.4g} s" if gpu.ok else f"fails ({gpu.failure})"

    print(f"{args.benchmark} on {args.cluster}: agent best {result.best_runtime_s:.4g} s after "
          f"{result.evaluations} evaluations ({result.updates} updates, {result.wall_s:.1f} s); "
          f"single GPU {gpu_text}; lower bound {result.lower_bound_s:.4g} s")
    print(f"run folder: {result.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
