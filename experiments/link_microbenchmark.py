"""Link microbenchmark on real local TF workers: one worker sending a tensor to several at once,
against one transfer, measured and simulated.

    python -m experiments.link_microbenchmark [--megabytes 4 16 64] [--workers 3] [--steps 12]

Each graph has a producer on worker 0 (``payload * 1.5``, a variable of the given size) and one
consumer per destination on workers 1..k (``reduce_sum`` of the product, added into a scalar
variable there: a stateful end, so grappler cannot prune the consumer). A step sends the product
once to each destination. The measured step times (median after warm-up) are compared with the
simulator on two models of the loopback link:

* ``pairwise``: a private link per ordered worker pair (the ``local:N`` preset as it was);
* ``port``: one port per worker (send and receive directions), so a worker's outgoing tensors
  queue behind each other, as the sender's one gRPC thread serialises them.

Both use the bandwidth and per-transfer latency fitted to the one-destination rows alone (least
squares on time = overhead + bytes / bandwidth), so the several-destination rows are a prediction.
Run it on an otherwise idle machine: with 2 cores anything else running corrupts the times.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np


def fanout_graph(n_bytes: int, destinations: int):
    """The OpGraph of one step: a producer and ``destinations`` consumers; (graph, producer ops, consumer ops)."""
    import tensorflow as tf

    from placement_env.tf_import import from_tf

    graph = tf.Graph()
    with graph.as_default():
        payload = tf.compat.v1.get_variable("payload", [n_bytes // 4], initializer=tf.compat.v1.zeros_initializer())
        product = tf.multiply(payload, 1.5, name="product")
        updates = []
        for i in range(destinations):
            with tf.compat.v1.variable_scope(f"consumer_{i}"):
                total = tf.compat.v1.get_variable("total", [], initializer=tf.compat.v1.zeros_initializer())
                updates.append(total.assign_add(tf.reduce_sum(product), read_value=False))
        train_op = tf.group(*updates, name="train_op")
        tf.compat.v1.add_to_collection("train_op", train_op)
        tf.compat.v1.global_variables_initializer()
    init = [op.name for op in graph.get_operations() if op.type == "NoOp" and op.name.startswith("init")][0]
    return from_tf(graph, name=f"fanout-{destinations}x{n_bytes}", init_op=init, max_groups=10_000)


def fanout_placement(graph, destinations: int) -> np.ndarray:
    """The groups of consumer i's ops on worker i + 1; everything else on worker 0."""
    placement = np.zeros(graph.n_groups, dtype=np.int64)
    for i in range(destinations):
        ops = [k for k, name in enumerate(graph.op_names) if str(name).startswith(f"consumer_{i}/")]
        placement[np.unique(graph.group[ops])] = i + 1
    return placement


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
    from tqdm import tqdm

    from placement_env.cluster import load_cluster
    from placement_env.costs import analytical_costs
    from placement_env.runtime.measured import MeasuredRuntime
    from placement_env.runtime.simulated import simulate

    cluster = load_cluster(f"local:{args.workers}")
    cases = [(int(mb * 1e6) // 4 * 4, k) for mb in args.megabytes for k in range(1, args.workers)]
    rows = []
    with MeasuredRuntime(cluster, steps=args.steps, warmup=args.steps // 3) as runtime:
        for n_bytes, k in tqdm(cases, desc="measure", unit="graph"):
            graph = fanout_graph(n_bytes, k)
            placement = fanout_placement(graph, k)
            single = np.zeros_like(placement)
            split, local = runtime.measure(graph, placement), runtime.measure(graph, single)
            rows.append({"bytes": n_bytes, "destinations": k, "measured_s": split.runtime_s,
                         "one_worker_s": local.runtime_s, "graph": graph, "placement": placement})
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
    out = []
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
        out.append({k: v for k, v in r.items() if k not in ("graph", "placement")})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"bandwidth": bandwidth, "overhead_s": overhead, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
