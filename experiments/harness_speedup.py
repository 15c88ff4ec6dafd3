"""How much faster the harness makes a fixed set of rows on worker processes than in one process:
``python -m experiments.harness_speedup`` (``--workers 2`` by default; ``--ray-address local`` for a local Ray).

The same rows (``--suite`` x ``--methods`` x ``--seeds`` at ``--budget``) are made by ``run_suite`` serially and
with ``--workers``, each into a fresh results file, ``--repeat`` times in alternation, and the wall time of each run
is printed with the serial / parallel ratio. The graphs and op costs are built (and cached) by a warm-up run of
``single_gpu`` first, so neither timed run pays for them; the workers' start-up (spawning, imports, each worker
loading its tasks' graphs and compiled simulator from the caches) is part of the parallel time, as it is for a user.
The two runs' rows must agree but for their wall times (the script stops otherwise). Beside each time goes the CPU
time the run (with its workers, for Ray actors only the driver's) used per second of wall time, the cores it had on
average, and with the machine's core count and load averages, so a run on a busy machine shows as such.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from placement_env.harness import read_rows, run_suite

SUITE = "paper"
METHODS = ("hill_climbing", "random_search")
BUDGET = 2000
SEEDS = (0, 1, 2)


def _comparable(rows: list[dict]) -> list[str]:
    """The rows without their wall times, in a fixed order."""
    out = []
    for row in rows:
        row = {key: value for key, value in row.items() if key != "wall_s"}
        row["anytime"] = [entry[:2] for entry in row.get("anytime", [])]
        out.append(json.dumps(row, sort_keys=True))
    return sorted(out)


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the worker processes, once stopped)."""
    return sum(usage.ru_utime + usage.ru_stime
               for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def _timed(folder: Path, name: str, args: argparse.Namespace, **parallel: object) -> tuple[float, float, list[dict]]:
    """Wall seconds and CPU seconds of one run of the rows into a fresh file under ``folder``, and its rows."""
    path = folder / f"{name}.jsonl"
    start, cpu = time.perf_counter(), _cpu_s()
    run_suite(args.suite, list(args.methods), path, budget=args.budget, seeds=list(args.seeds), **parallel)
    return time.perf_counter() - start, _cpu_s() - cpu, read_rows(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=SUITE, help="the suite whose tasks make the rows (default: %(default)s)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), help="(default: %(default)s)")
    parser.add_argument("--budget", type=int, default=BUDGET, help="evaluations per row (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="(default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default: %(default)s)")
    parser.add_argument("--ray-address", default=None, help="time Ray actors instead of processes ('local' for a "
                        "Ray instance of this machine on 127.0.0.1)")
    parser.add_argument("--repeat", type=int, default=1, help="serial and parallel runs, alternated (default: 1)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.workers < 1:
        parser.error(f"--repeat {args.repeat}, --workers {args.workers}: expected integers >= 1")
    loads = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="harness-speedup-") as folder:
        folder = Path(folder)
        run_suite(args.suite, ["single_gpu"], folder / "warm-up.jsonl", budget=0)  # graphs and costs into the caches
        times = []  # (serial wall s, serial CPU s, parallel wall s, parallel CPU s) per repeat
        for k in range(args.repeat):
            serial_s, serial_cpu, serial = _timed(folder, f"serial-{k}", args)
            parallel_s, parallel_cpu, parallel = _timed(folder, f"parallel-{k}", args, workers=args.workers,
                                                        ray_address=args.ray_address)
            if _comparable(serial) != _comparable(parallel):
                raise SystemExit("the parallel run's rows differ from the serial run's (beyond wall times)")
            times.append((serial_s, serial_cpu, parallel_s, parallel_cpu))
    how = f"{args.workers} {'Ray actors' if args.ray_address else 'worker processes'}"
    print(f"{len(serial)} rows: suite {args.suite}, methods {' '.join(args.methods)}, budget {args.budget}, seeds "
          f"{' '.join(map(str, args.seeds))}; {os.cpu_count()} cores, load average {loads[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    for k, (serial_s, serial_cpu, parallel_s, parallel_cpu) in enumerate(times):
        # CPU s / wall s: the cores a run had on average (below 1 and 2 when other jobs share the machine)
        print(f"run {k + 1}: serial {serial_s:.1f} s ({serial_cpu / serial_s:.2f} cores busy), {how} "
              f"{parallel_s:.1f} s ({parallel_cpu / parallel_s:.2f} cores busy), speed-up {serial_s / parallel_s:.2f}x")


if __name__ == "__main__":
    main()
