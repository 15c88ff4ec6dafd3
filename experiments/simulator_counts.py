"""The simulator's work per placement, counted: ``python -m experiments.simulator_counts`` (needs valgrind and cc).

Timings of the compiled loop on this VM drift by up to 1.5x between runs (docs/findings.md), more than the
10-20% a change to the loop is worth. This counts instead: each placement shape runs as a compiled batch in a
child process under valgrind's callgrind, with instrumentation switched on around the batch alone (two client
requests, built into a small shared library with the system's C compiler), and the script prints per placement
the compiled code's instructions, conditional branches and mispredicted branches, and its misses in a first-level
data cache and in a cache of ``--l2`` bytes (default this VM's 1 MiB of L2 per core). Only numba's compiled code
counts (valgrind's object ``???``: the JIT's anonymous memory), not Python around it. The same code and
placements give the same counts on every run, to within 0.05%.

The counts are of valgrind's model of a processor, not of this one: its branch predictor is a table of 2-bit
counters without history, so it also mispredicts patterns a real predictor learns (a scan of the devices in a
fixed order, where the same device ends every time); it has no prefetcher, so a sequential sweep's misses count
as misses. Compare placement shapes and versions of the code by them; a time is still for an idle machine.

The shapes are those ``experiments.large_graph_speed`` times (``--benchmark`` grouped with ``max_groups=4000``,
on ``--cluster``): all groups on the first GPU, 2 and 4 contiguous blocks over the GPUs (as many as there are
GPUs for), each group on a random GPU, and each group on a random device.
"""
from __future__ import annotations

import argparse
import ctypes
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from experiments.large_graph_speed import in_order_splits, on_random_gpus

# Two of valgrind's client requests (callgrind.h), callable through ctypes: zero the counts and switch the
# instrumentation on; switch it off and write the counts.
_SHIM = """#include <valgrind/callgrind.h>
void counts_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void counts_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
"""
_JIT_OBJECT = "???"  # callgrind's name for code outside any mapped file: numba's compiled functions
EVENTS = {"Ir": "instructions", "Bc": "branches", "Bcm": "mispredicted", "D1mr": "L1d read misses",
          "DLmr": "L2 read misses"}


def jit_counts(dump: Path) -> dict[str, int]:
    """Self costs of the compiled (JIT) code in a callgrind dump written with ``--compress-pos=no
    --compress-strings=no``: the lines of each ``ob=???`` block, not the inclusive costs that follow a
    ``calls=`` line."""
    events: list[str] = []
    totals = None
    in_jit = after_call = False
    for line in dump.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
            totals = np.zeros(len(events), np.int64)
        elif line.startswith("ob="):
            in_jit = line[3:].strip() == _JIT_OBJECT
        elif line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit():
            if after_call:
                after_call = False
            elif in_jit:
                values = [int(v) for v in line.split()[1:]]  # the position (a line number), then the costs
                totals[:len(values)] += values
    if totals is None:
        raise ValueError(f"{dump} is not a callgrind dump (no events line)")
    return dict(zip(events, totals.tolist()))


def _child(work: Path, shape: str) -> int:
    """Under callgrind: the plan's batch of ``shape`` once to load the compiled code, then counted."""
    plan = pickle.loads((work / "plan.pkl").read_bytes())
    placements = np.load(work / f"{shape}.npy")
    requests = ctypes.CDLL(str(work / "requests.so"))
    plan.run_batch(placements[:1])
    requests.counts_start()
    plan.run_batch(placements)
    requests.counts_stop()
    return 0


def _shapes(graph, cluster, allowed: np.ndarray, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    gpus = [d for d in range(cluster.n_devices) if cluster.devices[d].kind == "GPU"]
    shapes = {name: np.repeat(split[None], k, axis=0) for name, split in in_order_splits(allowed, gpus).items()}
    shapes["each group on a random GPU"] = on_random_gpus(allowed, gpus, k, rng)
    anywhere = rng.integers(0, cluster.n_devices, (k, graph.n_groups))
    shapes["each group on a random device"] = np.where(allowed[np.arange(graph.n_groups), anywhere], anywhere, 0)
    return shapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="nmt-deep", help="a benchmark name (default: %(default)s)")
    parser.add_argument("--cluster", default="k80-4gpu", help="a cluster preset (default: %(default)s)")
    parser.add_argument("--placements", type=int, default=4, help="placements per shape (default: %(default)s)")
    parser.add_argument("--l2", type=int, default=2**20, help="bytes of the second cache (default: %(default)s)")
    parser.add_argument("--child", nargs=2, metavar=("WORK", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(Path(args.child[0]), args.child[1])
    if args.placements < 1:
        parser.error(f"--placements must be at least 1, got {args.placements}")
    if args.l2 < 2**15 or args.l2 & (args.l2 - 1):
        parser.error(f"--l2 must be a power of two of at least 32768 bytes (valgrind's cache model), got {args.l2}")
    missing = [tool for tool in ("valgrind", "cc") if shutil.which(tool) is None]
    if missing:
        parser.error(f"needs {' and '.join(missing)} on the PATH (Debian: apt install valgrind gcc)")
    from tqdm import tqdm

    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from placement_env.costs import analytical_costs
    from placement_env.runtime.simulated import SimulationPlan

    graph = pe.load_benchmark(args.benchmark, max_groups=4000)
    cluster = pe.load_cluster(args.cluster)
    if not any(device.kind == "GPU" for device in cluster.devices):
        parser.error(f"--cluster {args.cluster} has no GPU; the placement shapes are over a cluster's GPUs")
    plan = SimulationPlan(graph, cluster, analytical_costs(graph, cluster).seconds)
    shapes = _shapes(graph, cluster, pe.allowed_devices(graph, cluster), args.placements, np.random.default_rng(0))
    print(f"{args.benchmark} on {args.cluster}: {graph.n_ops:,} ops, {graph.n_groups:,} groups; per placement, "
          f"mean of {args.placements} (valgrind's model: 2-bit branch counters, L1d 32 KiB, L2 {args.l2:,} B)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "requests.c").write_text(_SHIM)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(work / "requests.so"), str(work / "requests.c")],
                       check=True)
        (work / "plan.pkl").write_bytes(pickle.dumps(plan))
        rows = {}
        for shape, placements in tqdm(shapes.items(), desc="shapes under callgrind", unit="shape"):
            np.save(work / f"{shape}.npy", placements)
            dump = work / "callgrind.out"
            child = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=yes",
                                    "--branch-sim=yes", "--D1=32768,8,64", f"--LL={args.l2},8,64", "--compress-pos=no",
                                    "--compress-strings=no", f"--callgrind-out-file={dump}", sys.executable, "-m",
                                    "experiments.simulator_counts", "--child", str(work), shape],
                                   capture_output=True, text=True)
            if child.returncode != 0:
                sys.exit(f"valgrind's run of {shape!r} failed (exit {child.returncode}):\n{child.stderr[-3000:]}")
            dumps = sorted(work.glob("callgrind.out*"))  # the client request's dump is callgrind.out.1
            rows[shape] = {name: count / args.placements for name, count in jit_counts(dumps[-1]).items()}
            for file in dumps:
                file.unlink()
    reference = rows["one GPU"]
    for shape, row in rows.items():
        cells = [f"{label} {row[event] / 1e6:.2f} M ({row[event] / graph.n_ops:.1f}/op, "
                 f"{row[event] / reference[event]:.2f}x)" for event, label in EVENTS.items()]
        print(f"{shape}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
