"""The command line, ``python -m agents.reinforce_seq2seq`` (``--help``): train on one benchmark and cluster,
then print a table against the baselines and write ``best_placement.pb`` (the placed TF graph).

By default the agent is warm-started from the fastest zero-budget heuristic and fine-tuned (``FINE_TUNING``);
``--paper`` is the paper's setting (from scratch, plain REINFORCE). The final table puts the agent next to the
heuristics and next to the search baselines run with the same number of runtime evaluations the agent spent.

Exit codes: 0 done, 2 a bad flag or a refused resume, 130 interrupted (Ctrl-C or SIGTERM; the checkpoint and
log are kept)."""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

from agents.common.arguments import (add_threads_argument, add_timeout_argument, check_out_dir, check_task_arguments,
                              measured_options, non_negative_float, non_negative_int, positive_float, positive_int)
from agents.common.report import baseline_table, curve_references, plot_curve
from agents.common.run_files import BEST_PB, CURVE, export_best, export_written_best
from agents.common.torch_threads import HARNESS_THREADS, start_command
from placement_env import (RUNTIMES, CheckpointMismatchError, MeasuredRuntime, ParallelEvaluator, PlacementEnvError,
                           load_benchmark, load_cluster)
from placement_env.parallel import BACKENDS, DEFAULT_TIMEOUT_S

from .config import FINE_TUNING, Config, field_error, warm_start_choices
from .trainer import MAX_IMITATION_STEPS
from .training import DEFAULT_MINUTES, TrainResult, default_out_dir, train
from .warm_start import WARM_START_CANDIDATES

TUNED_FLAGS = ("lr", "self_imitation", "elites", "explore", "local_moves")  # default: FINE_TUNING's unless --paper


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agents.reinforce_seq2seq",
        description="Train the paper's seq2seq placement policy with REINFORCE and compare it with the baselines.")
    parser.add_argument("--benchmark", default="nmt", help="benchmark name (default: nmt)")
    parser.add_argument("--cluster", default="k80-2gpu", help="cluster name or spec (default: k80-2gpu, the paper's machine as built)")
    parser.add_argument("--runtime", default="sim", choices=RUNTIMES, help="runtime (default: sim)")
    add_timeout_argument(parser)
    parser.add_argument("--budget", type=positive_int, default=None,
                        help="stop after this many runtime evaluations in total (default: none)")
    parser.add_argument("--minutes", type=positive_float, default=None,
                        help=f"wall budget of this session in minutes (default: {DEFAULT_MINUTES:g} if no --budget)")
    parser.add_argument("--samples", type=positive_int, default=16, help="placements per update, K (default: 16)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--out-dir", default=None,
                        help="output folder (default: runs/reinforce_seq2seq/<benchmark>-<cluster>-<runtime>)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT_DIR/checkpoint.pt")
    def default(name: str) -> str:
        return f"default: {FINE_TUNING[name]:g}, or {getattr(Config, name):g} with --paper"

    parser.add_argument("--lr", type=positive_float, default=None, help=f"Adam learning rate ({default('lr')})")
    parser.add_argument("--self-imitation", type=non_negative_float, default=None, metavar="WEIGHT",
                        help="weight of the log-probability of the elite placements in the loss "
                             f"({default('self_imitation')})")
    parser.add_argument("--elites", type=positive_int, default=None,
                        help=f"fastest distinct placements self-imitation pulls towards ({default('elites')})")
    parser.add_argument("--explore", type=non_negative_float, default=None, metavar="GROUPS",
                        help="per sampled placement, the expected number of groups put on a uniformly random device "
                             f"({default('explore')})")
    parser.add_argument("--local-moves", type=non_negative_int, default=None, metavar="PLACEMENTS",
                        help="of the K placements per update, how many are the best so far with 1-4 groups moved, "
                             f"guided by the policy ({default('local_moves')})")
    parser.add_argument("--warm-start", default=None, metavar="METHOD",
                        help="first imitate this baseline's placement ('best': the fastest of "
                             f"{', '.join(WARM_START_CANDIDATES)}); default: best, or none with --paper")
    parser.add_argument("--warm-start-prob", type=positive_float, default=Config.warm_start_prob, metavar="P",
                        help="the warm start imitates until the policy gives its teacher's placement this probability "
                             f"per group, or {MAX_IMITATION_STEPS} steps ({Config.warm_start_prob:g})")
    parser.add_argument("--paper", action="store_true",
                        help="the paper's setting: from scratch, plain REINFORCE (no warm start, self-imitation, "
                             "exploration floor or local moves)")
    parser.add_argument("--entropy", type=non_negative_float, default=Config.entropy,
                        help=f"entropy bonus ({Config.entropy:g})")
    parser.add_argument("--hidden", type=positive_int, default=Config.hidden, help=f"LSTM size ({Config.hidden})")
    parser.add_argument("--backend", default="local", choices=("local",) + BACKENDS,
                        help="where the K samples of an update are evaluated: in this process (local), on worker "
                             "processes (process) or on Ray actors (ray) (default: local)")
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="worker processes or Ray actors for --backend process|ray (default: 2)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster address (host:port, ray://host:port or auto); implies --backend ray")
    add_threads_argument(parser, default=HARNESS_THREADS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-baselines", action="store_true", help="skip the baseline table")
    return parser


def _check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``parser.error`` (exit 2, naming the flag) for flag values the argparse types cannot check alone (the
    hyper-parameters by Config's own checks, which a resumed checkpoint's config also passes)."""
    for name in (*TUNED_FLAGS, "entropy", "hidden", "warm_start_prob"):
        value = getattr(args, name)
        accepted = None if value is None else field_error(name, value)
        if accepted:
            parser.error(f"argument --{name.replace('_', '-')}: expected {accepted}, got {value}")
    check_task_arguments(parser, args)
    if args.warm_start is not None and args.warm_start not in warm_start_choices():
        parser.error(f"argument --warm-start: unknown method {args.warm_start!r}; choose from "
                     f"{', '.join(warm_start_choices())}")
    check_out_dir(parser, args)
    if args.paper and args.warm_start is not None:
        parser.error("argument --paper: the paper's setting starts from scratch; drop --warm-start")
    if args.ray_address and args.backend == "process":
        parser.error("argument --ray-address: needs --backend ray (or no --backend), not --backend process")


def _config(args: argparse.Namespace) -> Config:
    """The Config the flags ask for: a warm start from the best heuristic with FINE_TUNING (or, with
    ``--paper``, the paper's defaults), then the flags given."""
    warm_start = None if args.paper else (args.warm_start or "best")
    flags = {name: getattr(args, name) for name in TUNED_FLAGS}
    return Config(**{**(FINE_TUNING if warm_start else {}), **{k: v for k, v in flags.items() if v is not None},
                     "entropy": args.entropy, "hidden": args.hidden, "warm_start": warm_start,
                     "warm_start_prob": args.warm_start_prob})


def _interrupted(signum: int, frame: Any) -> None:
    """SIGTERM (e.g. a timeout) ends like Ctrl-C: the checkpoint is kept."""
    raise KeyboardInterrupt


def _placement_limit_s(args: argparse.Namespace, options: dict[str, Any] | None) -> float:
    """How long a parallel worker may take over one placement: with the measured runtime, the longest its
    own tries can take (so its timeout, not the worker's, decides); else ParallelEvaluator's default."""
    if args.runtime != "measured":
        return DEFAULT_TIMEOUT_S
    runtime = MeasuredRuntime(load_cluster(args.cluster), **(options or {}))  # starts no worker
    return runtime.longest_s(load_benchmark(args.benchmark))


def _train(args: argparse.Namespace, config: Config, out: Path, options: dict[str, Any] | None) -> TrainResult:
    """Train as the flags say, on the chosen backend (whose workers are closed afterwards)."""
    seconds = args.minutes * 60 if args.minutes is not None else (None if args.budget else DEFAULT_MINUTES * 60)
    backend = "ray" if args.ray_address else args.backend
    evaluator = None
    try:
        if backend != "local":
            evaluator = ParallelEvaluator(args.benchmark, args.cluster, args.runtime, backend=backend,
                                          workers=args.workers, address=args.ray_address, measured_options=options,
                                          timeout_s=_placement_limit_s(args, options))
        result = train(args.benchmark, args.cluster, args.runtime, budget=args.budget, seconds=seconds,
                       samples=args.samples, seed=args.seed, out_dir=out, resume=args.resume,
                       progress=not args.no_progress, config=config, evaluator=evaluator, measured_options=options)
        if backend == "ray":
            print("evaluations per Ray node: " + ", ".join(
                f"{node} {count}" for node, count in sorted(evaluator.evaluations_per_node.items())))
        return result
    finally:
        if evaluator is not None:
            evaluator.close()


def _report(args: argparse.Namespace, result: TrainResult, out: Path, options: dict[str, Any] | None) -> None:
    """The summary line, the table against the baselines (and the curve with their lines), the placed graph."""
    print(f"\n{result.updates} updates, {result.evaluations} evaluations, {result.wall_s:.0f} s; "
          f"best {result.best_runtime_s:.4f} s; outputs in {out}")
    if not args.no_baselines:
        table, values = baseline_table(args.benchmark, args.cluster, args.runtime, result.best_runtime_s,
                                       search_budget=result.evaluations, progress=not args.no_progress,
                                       measured_options=options)
        print()
        print(table)
        plot_curve(out / CURVE, result.history, title=f"{args.benchmark} on {args.cluster} ({args.runtime})",
                   references=curve_references(values))
    if result.best_placement is not None:
        print(export_best(args.benchmark, args.cluster, result.best_placement, out / BEST_PB))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    _check_flags(parser, args)
    options = measured_options(parser, args)
    start_command(args.threads)
    config = _config(args)
    signal.signal(signal.SIGTERM, _interrupted)
    out = Path(args.out_dir) if args.out_dir else default_out_dir(args.benchmark, args.cluster, args.runtime)
    try:
        result = _train(args, config, out, options)
    except (CheckpointMismatchError, FileNotFoundError, PlacementEnvError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted; checkpoint and log written to {out}", file=sys.stderr)
        exported = export_written_best(args.benchmark, args.cluster, out)  # the best so far, as after a full run
        if exported is not None:
            print(exported, file=sys.stderr)
        return 130
    _report(args, result, out, options)
    return 0
