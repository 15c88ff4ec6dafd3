"""Command line: ``placement-env`` / ``python -m placement_env``."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import date

import numpy as np
from tqdm import tqdm

from .benchmarks import load_benchmark
from .cluster import load_cluster, preset_names
from .errors import LinkRunsError, PlacementEnvError
from .grouping import DEFAULT_MAX_GROUPS, group_ops
from .harness.results import expected_number, method_label, show
from .harness.suites import SUITES
from .opgraph import DEVICE_KINDS, OpGraph
from .output_paths import check_output_file, check_output_folder, write_output_file
from .quiet_tf import import_tensorflow_quietly

DEFAULT_BENCHMARK = "nmt"
# The range of every numeric flag: {command: ((attribute, flag, limits for expected_number, why), ...)}.
NUMBER_FLAGS: dict[str, tuple[tuple[str, str, dict, str], ...]] = {
    "info": (("max_groups", "--max-groups", {"integer": True, "minimum": 1}, ""),
             ("top", "--top", {"integer": True}, "")),
    "calibrate": (("placements", "-n/--placements", {"integer": True, "minimum": 4},
                   " (the fit has 4 or more free parameters and needs at least as many measurements)"),
                  ("seed", "--seed", {"integer": True}, "")),
    "fit-paper-machine": (("starts", "--starts", {"integer": True, "minimum": 1}, " (optimiser starts)"),),
    "run": (("budget", "--budget", {"integer": True}, " (runtime evaluations; 0 for zero-shot methods)"),
            ("seeds", "--seeds", {"integer": True}, ""),
            ("workers", "--workers", {"integer": True, "minimum": 1}, " (worker processes, or Ray actors)")),
    "validate": (("tolerance", "--tolerance", {}, " (relative: 0.2 is 20%)"),
                 ("row_timeout", "--row-timeout", {"above": True}, " (seconds)")),
    "bound": (("time_limit", "--time-limit", {"above": True}, " (solver seconds per task)"),),
}
NUMBER_FLAGS["linkbench"] = (("megabytes", "--megabytes", {"above": True, "maximum": 1e5}, " (MB per tensor)"),
                             ("workers", "--workers", {"integer": True, "minimum": 2}, " (a sender and a receiver)"),
                             ("steps", "--steps", {"integer": True, "minimum": 1}, ""))
# Flags that take several values, each of which may be given once: {command: ((attribute, flag), ...)}.
LIST_FLAGS = {"calibrate": (("benchmarks", "benchmarks"), ("link_runs", "--link-runs")),
              "run": (("methods", "--methods"), ("seeds", "--seeds"), ("budget", "--budget"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="placement-env", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="summarise a benchmark graph and its co-location groups")
    info.add_argument("benchmark", nargs="?", default=DEFAULT_BENCHMARK,
                      help=f"benchmark name, <model>-batch<N>, synthetic:<seed>, or a .npz OpGraph file (default: {DEFAULT_BENCHMARK})")
    info.add_argument("--max-groups", type=int, default=DEFAULT_MAX_GROUPS, help="group count cap (default: %(default)s)")
    info.add_argument("--top", type=int, default=10, help="how many op types and groups to list (default: %(default)s)")
    clusters = commands.add_parser("cluster", help="describe a cluster preset, local:N, or a cluster JSON file")
    clusters.add_argument("name", nargs="?", help="preset name (omit to list the presets)")
    clusters.add_argument("--plot", metavar="FILE", help="also draw the cluster's interconnect into this PNG file")
    cal = commands.add_parser("calibrate", help="measure random placements on local TF workers and fit the simulator")
    cal.add_argument("benchmarks", nargs="*", default=["rnnlm-tiny"], metavar="BENCHMARK",
                     help="small benchmarks, each measured and all fitted at once (default: rnnlm-tiny)")
    cal.add_argument("--link-runs", nargs="+", default=[], metavar="FILE",
                     help="link microbenchmark results (placement-env linkbench -o FILE): the host "
                          "transfer's bandwidth comes from their large tensors instead of the fit")
    cal.add_argument("--cluster", default="local:2", help="a local:N cluster, or a JSON of one (default: %(default)s)")
    cal.add_argument("-n", "--placements", type=int, default=30, help="random placements to measure (default: %(default)s)")
    cal.add_argument("--seed", type=int, default=0)
    cal.add_argument("-o", "--output", help="write the calibrated cluster JSON here (use it as cluster=<path>)")
    fit = commands.add_parser("fit-paper-machine", help="fit the K80 machine to the seed paper's measured table "
                              "and predict each model with a fit that left it out")
    fit.add_argument("--starts", type=int, default=3, help="optimiser starts per fit (default: %(default)s)")
    fit.add_argument("--save", action="store_true", help="store the all-model fit as the K80 machine's parameters")
    run = commands.add_parser("run", help="run placement methods over a benchmark suite into a results file")
    run.add_argument("--suite", default="tiny", help=f"a track of the versioned benchmark (placebench-v1/paper, "
                     "placebench-v1/modern, placebench-v1/generalisation, placebench-v1/measured; 'placement-env "
                     f"placebench' lists them), one of {', '.join(SUITES)}, a suite file of your own tasks "
                     "(.toml or .json; its methods, budgets and seeds are used where these flags are not given), or "
                     "'package.module:attribute' for a tuple of Task (default: %(default)s)")
    run.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                     help="built-in method names or presets, 'package.module:callable', each with keyword arguments "
                          "as NAME@key=value,key=value (values JSON or bare words: hill_climbing@start=best_heuristic,"
                          "max_groups=2), or all: the built-in methods and their presets (default, unless a suite "
                          "file gives methods)")
    run.add_argument("--budget", type=int, nargs="+", default=None, metavar="N",
                     help="runtime evaluations per method and task, one or several budgets; 0 for zero-shot methods "
                          "(default: a suite file's budgets, else 100)")
    run.add_argument("--seeds", type=int, nargs="+", default=None, help="(default: a suite file's seeds, else 0)")
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help="make the rows in N worker processes on this machine (with --ray-address: N Ray actors, "
                          "default one per CPU of the cluster); measured tasks still run one at a time, first")
    run.add_argument("--ray-address", default=None, metavar="ADDR",
                     help="spread the rows over the Ray cluster at ADDR (auto, host:port, ray://host:port), or "
                          "'local' for a Ray instance of this machine on 127.0.0.1 only; a Ray cluster runs code for "
                          "whoever reaches it (docs/security.md)")
    run.add_argument("-o", "--results", default="results.jsonl", help="results file; rerun to resume (default: %(default)s)")
    check = commands.add_parser("validate", help="replay the placements of a results file and flag mismatches")
    check.add_argument("results")
    check.add_argument("--tolerance", type=float, default=0.2, help="relative, for measured runtimes (default: %(default)s)")
    check.add_argument("--row-timeout", type=float, default=None, metavar="SECONDS",
                       help="time limit of each measured replay; a row past it is skipped (default: the measured "
                            "runtime's, scaled to the graph)")
    report = commands.add_parser("report", help="the paper-style table and plots of a results file")
    report.add_argument("results")
    report.add_argument("-o", "--out-dir", default="report", help="where report.md and the plots go (default: %(default)s)")
    board = commands.add_parser("leaderboard", help="scores per track and budget (95%% intervals), as a Markdown "
                                "page, a CSV and a plot per track")
    board.add_argument("results", nargs="+", metavar="FILE", help="results files (built-in rows and submissions)")
    board.add_argument("-o", "--out-dir", default="leaderboard", help="where the page goes (default: %(default)s)")
    board.add_argument("--submission", nargs="+", default=[], metavar="JSON",
                       help="declared fields of submitted methods (docs/submitting.md), shown beside them")
    board.add_argument("--bounds", nargs="+", default=[], metavar="FILE",
                       help="lower bounds per task (placement-env bound): each method's gap to them")
    report.add_argument("--bounds", nargs="+", default=[], metavar="FILE",
                        help="lower bounds per task (placement-env bound) in place of the rows' classic one")
    lower = commands.add_parser("bound", help="a lower bound per task of a suite that no successful simulated "
                                "placement beats, into a bounds file")
    lower.add_argument("--suite", required=True, help="a suite name, a placebench track or a suite file")
    lower.add_argument("-o", "--out", required=True, help="bounds file (JSON lines; tasks already there are skipped)")
    lower.add_argument("--method", default="windows", choices=["classic", "windows", "cp_sat"],
                       help="the bound (default: %(default)s; docs/optimality.md)")
    lower.add_argument("--time-limit", type=float, default=60.0, help="solver seconds per task (default: %(default)s)")
    bench = commands.add_parser("placebench", help="the versioned benchmark: its tracks, budgets, seeds, tasks and "
                                "digest")
    bench.add_argument("version", nargs="?", default="placebench-v1", help="benchmark version (default: %(default)s)")
    bench.add_argument("--track", help="only this track")
    bench.add_argument("--verify", action="store_true", help="also rebuild every graph and cluster and compare them "
                       "with the frozen fingerprints (minutes)")
    _add_linkbench(commands)
    args = parser.parse_args(argv)
    try:
        _check_flags(args)
        if args.command != "cluster":
            import_tensorflow_quietly()  # graphs and op costs need TF; keep its start-up notices off the screen
        if args.command == "info":
            print(describe_graph(_load_graph(args.benchmark, args.max_groups), top=args.top))
        elif args.command == "calibrate":
            _calibrate(args)
        elif args.command == "fit-paper-machine":
            _fit_paper_machine(args)
        elif args.command == "linkbench":
            _linkbench(args)
        elif args.command == "placebench":
            return _placebench(args)
        elif args.command == "leaderboard":
            from .harness.leaderboard_page import write_leaderboard

            page = write_leaderboard(args.results, check_output_folder(args.out_dir, "-o/--out-dir"),
                                     submissions=args.submission, bounds=args.bounds)
            print(page.read_text())
        elif args.command == "bound":
            _bound(args)
        elif args.command in ("run", "validate", "report"):
            return _harness(args)
        else:
            _cluster(args)
    except (PlacementEnvError, TypeError, ValueError, KeyError) as error:
        print(f"placement-env: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a file that cannot be read or written after all (e.g. under /proc)
        where = f"{error.filename}: " if error.filename else ""
        print(f"placement-env: error: {where}{error.strerror or error}", file=sys.stderr)
        return 2
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    """ValueError naming the flag, its value and what is accepted, for a number out of its range
    (``NUMBER_FLAGS``) or a value given twice to a flag that takes several (``LIST_FLAGS``): before any work."""
    for attribute, flag, limits, why in NUMBER_FLAGS.get(args.command, ()):
        given = getattr(args, attribute)
        for value in given if isinstance(given, list) else [given]:
            expected = "" if value is None else expected_number(value, **limits)
            if expected:
                raise ValueError(f"{flag} {value!r}: {expected}{why}")
    for attribute, flag in LIST_FLAGS.get(args.command, ()):
        values = getattr(args, attribute) or []  # None: not given
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"{flag} {', '.join(repeated)} given more than once: give each once")


def _load_graph(benchmark: str, max_groups: int) -> OpGraph:
    if benchmark.endswith(".npz"):
        return group_ops(OpGraph.load(benchmark), max_groups=max_groups)
    return load_benchmark(benchmark, max_groups=max_groups)


def _harness(args: argparse.Namespace) -> int:
    from . import harness
    from .harness.score import steadiness_lines
    from .harness.suite_file import run_settings

    if args.command == "run":
        check_output_file(args.results, "-o/--results")
        settings = run_settings(args.suite, args.methods, args.budget, args.seeds)  # a suite file's, where not given
        written = harness.run_suite(results=args.results, **settings, workers=args.workers,
                                    ray_address=args.ray_address)
        print(f"{len(written)} new rows in {args.results}")
        print(harness.markdown_table(harness.read_rows(args.results)))
        print("\n".join(steadiness_lines(written)))
        return 0
    if args.command == "validate":
        return _validate(args)
    path = harness.write_report(args.results, check_output_folder(args.out_dir, "-o/--out-dir"), bounds=args.bounds)
    print(path.read_text())
    return 0


def _bound(args: argparse.Namespace) -> None:
    """Append the bound of every simulated task of --suite to --out and print them."""
    from .harness.bounds_file import write_bounds
    from .harness.suite_file import run_settings

    check_output_file(args.out, "-o/--out")
    settings = run_settings(args.suite, ["single_gpu"], None, None)  # the suite's tasks (a suite file's too)
    written = write_bounds(settings["suite"], args.out, method=args.method, time_limit_s=args.time_limit,
                           tasks=settings.get("tasks"))
    for row in written:
        print(f"{row['task']}: {row['bound_s']} s ({row['status']}, {row['solver_s']:g} s; parts {row['parts']})")
    print(f"{len(written)} new bounds in {args.out}")


def _placebench(args: argparse.Namespace) -> int:
    """Print a benchmark version (or one track of it); with --verify, 1 if anything differs from the frozen file."""
    from .harness import placebench

    benchmark = placebench.load_placebench(args.version)
    if args.track is not None and args.track not in benchmark.tracks:
        raise ValueError(f"--track {args.track!r}: {benchmark.name} has the tracks "
                         f"{', '.join(map(repr, benchmark.tracks))}")
    print(placebench.describe(benchmark, args.track))
    if not args.verify:
        return 0
    found = placebench.verify(benchmark)
    print("\n".join(found) or f"every graph, cluster and version matches {benchmark.name}'s fingerprints")
    return 1 if found else 0


def _validate(args: argparse.Namespace) -> int:
    """Print every row that does not reproduce, is stale or was skipped, then a summary; 1 if any row
    does not reproduce (stale and skipped rows are listed, not judged)."""
    from . import harness

    checked, mismatches = harness.validate(args.results, tolerance=args.tolerance, row_timeout_s=args.row_timeout)
    for mismatch in mismatches:
        row = mismatch.row
        label = "stale, not replayed: " if mismatch.stale else "skipped, not replayed: " if mismatch.skipped else ""
        print(f"line {mismatch.line} (task {show(row['task'])}, method {show(method_label(row))}, seed {row['seed']}): "
              f"{label}{mismatch.reason}")
    failed = sum(m.failed for m in mismatches)
    stale = sum(m.stale for m in mismatches)
    skipped = sum(m.skipped for m in mismatches)
    print(f"{checked} placements replayed, {failed} do not reproduce"
          + (f"; {stale} rows come from another simulator version or cluster definition, or a changed graph file"
             if stale else "")
          + (f"; {skipped} rows skipped (not replayable here, see above)" if skipped else ""))
    return 1 if failed else 0


# ---- linkbench: the link microbenchmark whose files calibrate --link-runs reads ----
def _add_linkbench(commands: argparse._SubParsersAction) -> None:
    from .calibration.link_bench import DEFAULT_MEGABYTES, DEFAULT_STEPS, DEFAULT_WORKERS

    bench = commands.add_parser("linkbench", help="measure one worker sending a large tensor to others on local TF "
                                "workers, for calibrate --link-runs (on an idle machine)")
    bench.add_argument("--megabytes", type=float, nargs="+", default=list(DEFAULT_MEGABYTES), metavar="MB",
                       help="tensor sizes (default: %(default)s)")
    bench.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                       help="local workers; destinations go up to workers - 1 (default: %(default)s)")
    bench.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                       help="measured steps per graph (default: %(default)s)")
    bench.add_argument("-o", "--output", default="link_runs.json",
                       help="where the rows go, for calibrate --link-runs (default: %(default)s)")


def _linkbench(args: argparse.Namespace) -> None:
    """Measure the link rows, print them and the host transfer's bandwidth they give, and write them."""
    from .calibration.link_bench import measure_links, write_link_runs
    from .calibration.link_rows import host_bandwidth_from_links

    check_output_file(args.output, "-o/--output")  # before minutes of measuring, not after
    rows = measure_links(args.megabytes, args.workers, args.steps)
    print("| MB | destinations | measured ms | one worker ms |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['bytes'] / 1e6:.0f} | {row['destinations']} | {row['measured_s'] * 1e3:.2f} "
              f"| {row['one_worker_s'] * 1e3:.2f} |")
    write_link_runs(args.output, rows)
    try:
        bandwidth = f"{host_bandwidth_from_links(rows) / 1e9:.3g} GB/s at each end"
    except ValueError as error:
        bandwidth = f"none ({error})"
    print(f"rows written to {args.output}; host transfer bandwidth from them: {bandwidth} "
          f"(placement-env calibrate --link-runs {args.output} uses it)")


def _calibrate(args: argparse.Namespace) -> None:
    """One benchmark without link runs: :func:`calibrate`; else one fit to all (:func:`calibrate_graphs`).
    Every argument is checked before the workers start."""
    from .calibration import calibrate, calibrate_graphs, host_bandwidth_from_files

    cluster = load_cluster(args.cluster)
    if cluster.local_workers == 0 and not cluster.remote_target:
        raise ValueError(f"--cluster {args.cluster}: calibrate measures on TF workers, and this cluster has none; "
                         "give local:N, or the JSON of a local:N or remote TF cluster")
    host_bandwidth = None
    if args.link_runs:
        if cluster.host_transfer is None:
            raise ValueError(f"--link-runs: cluster {args.cluster} has no host transfer for their bandwidth "
                             "(local:N clusters have one)")
        try:
            host_bandwidth = host_bandwidth_from_files(args.link_runs)
        except LinkRunsError as error:
            raise LinkRunsError(f"--link-runs: {error}") from None
        print(f"host transfer bandwidth from {len(args.link_runs)} link run(s): {host_bandwidth / 1e9:.3g} GB/s "
              "at each end")
    if args.output:
        check_output_file(args.output, "-o/--output")  # before minutes of measuring, not after
    graphs = [_load_graph(b, DEFAULT_MAX_GROUPS) for b in args.benchmarks]
    if len(graphs) == 1 and host_bandwidth is None:
        result = calibrate(graphs[0], cluster, n_placements=args.placements, seed=args.seed)
    else:
        result = calibrate_graphs(graphs, cluster, n_placements=args.placements, seed=args.seed,
                                  host_bandwidth=host_bandwidth)
    print(result.summary())
    if args.output:
        write_output_file(args.output, result.cluster.to_json().encode("utf-8"))
        print(f"calibrated cluster written to {args.output}")


def _fit_paper_machine(args: argparse.Namespace) -> None:
    from .calibration import paper_machine
    from .cluster.k80 import DEFAULT_PARAMETERS, k80_machine
    from .problem import Problem, solve

    machine = k80_machine(2, DEFAULT_PARAMETERS)  # the placements are made once, on the prior machine
    models = []
    for name in tqdm(paper_machine.SEED_TABLE, desc="placements", unit="model"):
        graph = load_benchmark(name)
        placements = {m: solve(m, Problem.make(graph, machine, benchmark=name)).placement
                      for m in paper_machine.METHODS}
        models.append(paper_machine.prepare(name, graph, placements))
    bar = tqdm(total=4 * args.starts, desc="fits (all models, then each left out)", unit="start")
    options = {"starts": args.starts, "progress": lambda _: bar.update()}
    all_fit = paper_machine.fit(models, **options)
    in_sample = [paper_machine.Prediction(m.name, all_fit, m.runtimes(all_fit)) for m in models]
    held_out = paper_machine.leave_one_model_out(models, **options)
    bar.close()
    print(paper_machine.report(all_fit, in_sample, held_out))
    if args.save:
        path = paper_machine.save(all_fit, {"command": "placement-env fit-paper-machine --save",
                                            "date": date.today().isoformat(), "starts": args.starts})
        print(f"parameters written to {path}")


def _cluster(args: argparse.Namespace) -> None:
    """Describe a cluster (or list the presets) and, with --plot, draw its interconnect."""
    if args.name is None:
        if args.plot:
            raise ValueError("--plot needs a cluster: give a preset name, local:N or a cluster .json file")
        print("cluster presets: " + ", ".join(preset_names()) + "\nalso: local:N, or a path to a cluster .json file")
        return
    if args.plot:
        check_output_file(args.plot, "--plot")
    cluster = load_cluster(args.name)
    print(cluster.describe())
    if args.plot:
        from .render.topology import save_cluster_picture

        print(f"picture written to {save_cluster_picture(cluster, args.plot)}")


def _mb(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def describe_graph(graph: OpGraph, top: int = 10) -> str:
    """A text summary: sizes, op types, memory and the largest groups."""
    grouping = graph.meta.get("grouping", {})
    cpu_only = int(np.count_nonzero(graph.device_mask == 0b01))
    lines = [
        f"benchmark   {graph.name}",
        f"ops         {graph.n_ops:,} ({cpu_only:,} CPU-only), edges {graph.n_edges:,} "
        f"({int(graph.is_control_edge.sum()):,} control)",
        f"groups      {graph.n_groups:,} (co-location components {grouping.get('colocation_components', '?'):,}, "
        f"after heuristics {grouping.get('after_heuristics', '?'):,}, cap {grouping.get('max_groups', '?')})",
        f"compute     {graph.flops.sum() / 1e9:,.1f} GFLOP estimated per step",
        f"parameters  {_mb(graph.persistent_bytes.sum())} resident (variables and optimizer slots)",
        f"activations {_mb(graph.output_bytes.sum())} produced per step (all op outputs; an upper bound on transient memory)",
    ]
    if graph.meta.get("params"):
        lines.append("built with  " + ", ".join(f"{k}={v}" for k, v in sorted(graph.meta["params"].items())))
    lines += ["", f"op types (top {top} of {len(set(graph.op_types.tolist()))}):"]
    for op_type, count in Counter(graph.op_types.tolist()).most_common(top):
        lines.append(f"  {op_type:<28}{count:>8,}")
    lines += ["", f"largest groups by estimated compute (top {top}):",
              f"  {'group':>5} {'ops':>6} {'GFLOP':>9} {'params':>12} {'outputs':>12}  kinds    first op"]
    group_output = graph.group_output_bytes
    for g in np.argsort(-graph.group_flops, kind="stable")[:top]:
        kinds = "+".join(k for bit, k in enumerate(DEVICE_KINDS) if graph.group_device_mask[g] >> bit & 1)
        first = graph.op_names[graph.ops_of_group(g)[0]]
        lines.append(f"  {g:>5} {graph.group_sizes[g]:>6,} {graph.group_flops[g] / 1e9:>9,.2f} "
                     f"{_mb(graph.group_persistent_bytes[g]):>12} {_mb(group_output[g]):>12}  {kinds:<8} {first}")
    return "\n".join(lines)
