"""The link microbenchmark compared with two models of the loopback link: one worker sending a tensor to
several at once, against one transfer, measured and simulated.

    python -m experiments.link_microbenchmark [--megabytes 4 16 64] [--workers 3] [--steps 12]

The measuring is the library's (``placement-env linkbench``, :mod:`placement_env.calibration.link_bench`); this
script adds the simulator on two models of the loopback link:

* ``pairwise``: a private link per ordered worker pair (the ``local:N`` preset as it was);
* ``port``: one port per worker (send and receive directions), so a worker's outgoing tensors
  queue behind each other, as the sender's one gRPC thread serialises them.

Both use the bandwidth and per-transfer latency fitted to the one-destination rows alone (least
squares on time = overhead + bytes / bandwidth), so the several-destination rows are a prediction.
Run it on an otherwise idle machine: with 2 cores anything else running corrupts the times.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import numpy as np


def loopback_clusters(workers: int, bandwidth: float, overhead_s: float):
    """The ``pairwise`` and ``port`` models of ``local:N`` with the given link (see the module docstring)."""
    import dataclasses

    from placement_env.cluster import load_cluster
    from placement_env.cluster.model import topology_cluster
    from placement_env.cluster.topology import Link, Topology

    base = dataclasses.replace(load_cluster(f"local:{workers}"), host_transfer=None)  # links alone
    n = base.n_devices
    bw = np.full((n, n), bandwidth)
    np.fill_diagonal(bw, np.inf)
    lat = np.full((n, n), overhead_s)
    np.fill_diagonal(lat, 0.0)
    pairwise = dataclasses.replace(base, bandwidth=bw, latency=lat)
    links = tuple(Link(d.name, "loopback", bandwidth, overhead_s, f"{d.name}'s gRPC channel") for d in base.devices)
    port = topology_cluster(base.name, base.devices, Topology(("loopback",), links), local_workers=base.local_workers)
    return {"pairwise": pairwise, "port": port}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.link_microbenchmark", description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[4.0, 16.0, 64.0])
    parser.add_argument("--workers", type=int, default=3, help="local workers; destinations go up to workers - 1")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", default="runs/link_microbenchmark.json")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    from placement_env.calibration.link_bench import measure_links, write_link_runs
    from placement_env.costs import analytical_costs
    from placement_env.runtime.simulated import simulate

    rows = measure_links(args.megabytes, args.workers, args.steps)
    # the link from the one-destination rows: extra time over one worker = overhead + bytes / bandwidth
    ones = [r for r in rows if r["destinations"] == 1]
    x = np.array([r["bytes"] for r in ones], dtype=float)
    y = np.array([r["measured_s"] - r["one_worker_s"] for r in ones])
    slope, intercept = np.polyfit(x, y, 1)
    bandwidth, overhead = 1.0 / max(slope, 1e-15), max(intercept, 1e-7)
    models = loopback_clusters(args.workers, bandwidth, overhead)
    print(f"fitted on one destination: {bandwidth / 1e9:.2f} GB/s, {overhead * 1e6:.0f} us per transfer\n")
    print("| MB | destinations | measured ms | pairwise ms | port ms | measured / one destination | pairwise | port |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sims = {}
        for label, c in models.items():
            costs = analytical_costs(r["graph"], c).seconds
            sims[label] = simulate(r["graph"], c, costs, r["placement"]).runtime_s
        r.update({f"{label}_s": t for label, t in sims.items()})
    for r in rows:
        first = next(o for o in rows if o["bytes"] == r["bytes"] and o["destinations"] == 1)
        ratio = {key: r[key] / first[key] for key in ("measured_s", "pairwise_s", "port_s")}
        print(f"| {r['bytes'] / 1e6:.0f} | {r['destinations']} | {r['measured_s'] * 1e3:.2f} | {r['pairwise_s'] * 1e3:.2f} "
              f"| {r['port_s'] * 1e3:.2f} | {ratio['measured_s']:.2f} | {ratio['pairwise_s']:.2f} | {ratio['port_s']:.2f} |")
    write_link_runs(args.out, rows, bandwidth=bandwidth, overhead_s=overhead)
    return 0


if __name__ == "__main__":
    sys.exit(main())
