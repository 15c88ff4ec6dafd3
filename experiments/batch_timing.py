"""The simulator's compiled batch timed from saved arrays, without TensorFlow: ``python -m experiments.batch_timing DIR``.

``python -m experiments.large_graph_speed --save-batches DIR`` writes, per cluster, the compiled batch's arguments and
every batch of placements it times (``DIR/<cluster>.npz``, a few MB), with the runtimes the simulator gave them. This
times the same batches with nothing but numpy, numba and the compiled loop's modules (no TensorFlow, no graph, no
Scotch), so the one-thread speed at 1,000+ groups can be measured on another machine, e.g. the device machine, where TF
is not installed: the same loop on the same arrays, so a time differs only by the machine. It checks that every
placement's simulated runtime is the saved one (the loop's arithmetic is the same everywhere) and prints, per batch,
the best and median of ``--repeats`` runs per placement, on each of ``--threads``.

A placement's arrays (about 3 MB at 67,639 ops) are freed at its end; where glibc hands such blocks back to the
system, the next placement faults them in again, 13-19% of its time (docs/findings.md). Importing TensorFlow raises
glibc's thresholds as a side effect, and every path of the package imports it; this script does not, so it raises
them itself (``mallopt``) before timing, to time the loop as the package runs it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

_CORE = "core"  # saved names: core00, core01, ... (the core's arguments in order), then per batch placements / runtimes


def save(path: str | Path, plan, batches: dict[str, np.ndarray]) -> None:
    """Write ``plan``'s compiled-batch arguments (a ``SimulationPlan``) and each of ``batches`` (label -> int array
    [k, n_groups]) with the runtimes ``plan`` gives them, to ``path`` (an ``.npz``)."""
    arrays = {"group": plan.group, "capacity": plan.capacity, "labels": np.array(list(batches))}
    for i, argument in enumerate(plan.core_arguments()):
        arrays[f"{_CORE}{i:02d}"] = np.asarray(argument)
    for i, placements in enumerate(batches.values()):
        arrays[f"placements{i}"] = np.asarray(placements, np.int64)
        arrays[f"runtimes{i}"] = np.array([m.runtime_s for m in plan.run_batch(placements)])
    np.savez_compressed(path, **arrays)


def load(path: str | Path) -> tuple[tuple, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(the arguments of ``simulate_many`` after the placements, {label: (placements, saved runtimes)})."""
    with np.load(path, allow_pickle=False) as data:
        n_core = sum(1 for name in data.files if name.startswith(_CORE))
        core = [data[f"{_CORE}{i:02d}"] for i in range(n_core)]
        # scalars were saved as 0-d arrays: back to the Python numbers the plan passes
        core = [a.item() if a.ndim == 0 else a for a in core]
        arguments = (data["group"], data["capacity"], *core)
        batches = {str(label): (data[f"placements{i}"], data[f"runtimes{i}"])
                   for i, label in enumerate(data["labels"])}
    return arguments, batches


def run(arguments: tuple, placements: np.ndarray, threads: int) -> np.ndarray:
    """The simulated runtimes of ``placements``, from the compiled batch on ``threads`` of numba's threads."""
    from placement_env.runtime.simulated import simulate_compiled

    return simulate_compiled(placements, arguments, threads)[0]


def per_placement(arguments: tuple, placements: np.ndarray, threads: int, repeats: int) -> list[float]:
    """Seconds per placement of each of ``repeats`` runs of the batch."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(arguments, placements, threads)
        times.append((time.perf_counter() - start) / len(placements))
    return times


def keep_freed_memory() -> None:
    """Raise glibc's mmap and trim thresholds (64 and 256 MiB), so that freed per-placement arrays stay in the
    process; nothing where the C library is not glibc's."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "mallopt"):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    libc.mallopt(m_mmap_threshold, 64 << 20)
    libc.mallopt(m_trim_threshold, 256 << 20)


def main(argv: list[str] | None = None) -> int:
    from placement_env.runtime.simulated import check_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="what large_graph_speed --save-batches wrote")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="(default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each batch (default: %(default)s)")
    args = parser.parse_args(argv)
    files = sorted(Path(args.folder).glob("*.npz"))
    if not files:
        raise SystemExit(f"{args.folder}: no .npz files; write them with python -m experiments.large_graph_speed "
                         "--save-batches FOLDER")
    try:
        for threads in args.threads:
            check_threads(threads)
    except ValueError as error:
        parser.error(f"--threads: {error}")
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: at least one")
    keep_freed_memory()
    for path in files:
        arguments, batches = load(path)
        for label, (placements, saved) in batches.items():
            cells = []
            for threads in args.threads:
                same = np.array_equal(run(arguments, placements, threads), saved)  # also compiles outside the timing
                times = per_placement(arguments, placements, threads, args.repeats)
                cells.append(f"{threads} thread(s): best {min(times) * 1e3:.2f}, median "
                             f"{statistics.median(times) * 1e3:.2f} ms" + ("" if same else " (RUNTIMES DIFFER)"))
            print(f"{path.stem}, {label} ({len(placements)}): " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
