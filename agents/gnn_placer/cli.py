"""``python -m agents.gnn_placer``: pre-train the GNN placer across a suite's graphs (default
``generalisation-train``) and write its run folder (see :mod:`.training`). Bad flags exit 2 naming the flag,
before anything is built."""
from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from pathlib import Path

from agents.common.arguments import (add_threads_argument, check_out_dir, non_negative_float, non_negative_int, positive_float,
                              positive_int)
from agents.common.run_files import run_dir
from agents.common.torch_threads import start_command

from .network import DECODERS
from .trainer import Config


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agents.gnn_placer", description=(
        "Pre-train the GNN placer across the graphs of a suite: imitate each task's best heuristic, then "
        "REINFORCE with self-imitation; writes log.csv, learning_curve.png and checkpoint.pt to --out-dir."))
    p.add_argument("--suite", default="generalisation-train",
                   help="the suite to train on: a name of placement_env.harness.SUITES or 'package.module:attribute' "
                        "(default: %(default)s)")
    p.add_argument("--minutes", type=positive_float, default=12.0,
                   help="wall-time limit, loading the graphs aside (default: %(default)s, as the committed checkpoint)")
    p.add_argument("--budget", type=positive_int, default=None,
                   help="limit on runtime evaluations over all tasks (default: none, --minutes alone)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="network and sampling seed (default: %(default)s)")
    p.add_argument("--out-dir", default=None, help="run folder (default: runs/gnn_placer/<suite>-seed<seed>)")
    p.add_argument("--samples", type=positive_int, default=Config.samples, help="placements per graph and update")
    p.add_argument("--graphs", type=positive_int, default=Config.graphs_per_update, help="graphs per update")
    p.add_argument("--lr", type=positive_float, default=Config.lr, help="Adam's learning rate")
    p.add_argument("--imitation-steps", type=non_negative_int, default=500,
                   help="steps of the warm start that imitates each task's best heuristic; 0: none (default: %(default)s)")
    p.add_argument("--layers", type=non_negative_int, default=Config.layers,
                   help="rounds of message passing over the group graph (default: %(default)s)")
    p.add_argument("--decoder", choices=DECODERS, default=Config.decoder,
                   help="independent: one device choice per group given the encoding; sequential: groups placed in "
                        "topological order, each seeing where the ones before went (default: %(default)s)")
    p.add_argument("--entropy", type=non_negative_float, default=Config.entropy, help="entropy bonus")
    add_threads_argument(p, default=1)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def prepare_suite_run(p: argparse.ArgumentParser, args: argparse.Namespace,
                      agent: str) -> tuple[Path, threading.Event]:
    """For a command line that trains on ``args.suite``: exit 2 naming a bad suite or ``--out-dir``, import TF and
    set torch's threads (:func:`agents.common.torch_threads.start_command`), and make Ctrl-C and SIGTERM set the returned event (the run stops after the step in hand and writes
    everything); the run folder is ``--out-dir`` or ``runs/<agent>/<suite>-seed<seed>``."""
    from placement_env.harness import UnknownSuiteError, load_suite

    try:
        load_suite(args.suite)
    except UnknownSuiteError as error:
        p.error(f"argument --suite: {error}")
    check_out_dir(p, args)
    start_command(args.threads)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return Path(args.out_dir) if args.out_dir else run_dir(agent, args.suite, f"seed{args.seed}"), stop


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    out_dir, stop = prepare_suite_run(p, args, "gnn_placer")
    from .training import pretrain

    config = Config(samples=args.samples, graphs_per_update=args.graphs, lr=args.lr, entropy=args.entropy,
                    layers=args.layers, decoder=args.decoder)
    result = pretrain(out_dir, suite=args.suite, minutes=args.minutes, budget=args.budget, seed=args.seed,
                      config=config, imitation_steps=args.imitation_steps, progress=not args.no_progress,
                      stop=stop)
    print(f"imitation: {result.imitation[0]} steps (lowest accuracy {result.imitation[1]:.3f}); "
          f"{result.updates} updates, {result.evaluations} evaluations, {result.seconds:.0f} s; "
          f"run folder {result.out_dir}")
    print("| task | best heuristic | greedy placement vs it |\n|---|---|---|")
    for task, ratio in result.greedy.items():
        reference = result.heuristics[task]
        verdict = "failed" if not math.isfinite(ratio) else f"{ratio:.3f}x"
        print(f"| {task} | {reference.method} {reference.runtime_s:.4g} s | {verdict} |")
    return 0



if __name__ == "__main__":
    sys.exit(main())
