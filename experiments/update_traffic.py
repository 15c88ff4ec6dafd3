"""What the analytical costs leave out of variable updates, and what a floor on their traffic gives:
``python -m experiments.update_traffic`` (``--measure``: against real TF kernels on this CPU, run it alone;
``--replay FILE ...``: stored results under the floor).

grappler's analytical estimate of a ``ResourceApply*`` op sees the variables it updates as resource handles (no
bytes) and costs only the update's arithmetic; a dense embedding gradient (``UnsortedSegmentSum``) and a sparse
update (``ResourceScatterAdd``) are costed by their arithmetic as well. ``placement_env.costs.update_traffic_bytes``
counts the bytes each must move, and a cluster with ``update_traffic`` charges every such op at least those bytes
at its device's achieved bandwidth.

Without ``--measure``, for each benchmark on the first GPU of ``--cluster``, this prints these op classes'
modelled seconds (grappler's, the cluster's ``update_traffic`` off) against that floor, and the floor's excess over
the model as a share of the step's op seconds on that GPU (every op the GPU can run, one after another).

With ``--measure``, it checks the floor against real kernels: for plain SGD, momentum and Adam updates of one
variable of 64 and 256 MiB (``--mib``), a training step whose gradient is the sum of two filled tensors is profiled on a
``local:1`` worker (one TF thread; ``pe.measured_costs``, the kernels' times from a trace), and each update's
measured time is printed against grappler's cost and the floor's, both at the bandwidth the step's own ``AddV2``
reached (two tensors read, one written, in its measured time), so no constant is fitted to the updates. The
floor counts the bytes the CPU kernels move (``update_traffic_bytes(graph, "CPU")``).

With ``--replay``, every simulated row of the results files is evaluated again on its cluster with and without
``update_traffic`` (a row that does not reproduce without it is an error: the rows replayed are those made before
the presets turned it on), and per task this prints how much
slower the placements get, the rank correlation of their runtimes (Kendall's tau) and whether the fastest row
changes (and by how much the old fastest then trails). It replays the placements found without the floor; a
search run with it may find others.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

BENCHMARKS = ("rnnlm", "nmt", "inception_v3", "transformer", "gpt2", "bert", "resnet50", "mlp_mixer", "dlrm")
OPTIMIZERS = ("GradientDescent", "Momentum", "Adam")
MEASURED_MIB = (64, 256)


def optimizer_step(optimizer: str, n: int):
    """An OpGraph of one training step that applies ``optimizer`` (one of ``OPTIMIZERS``) to a float32 variable of
    ``n`` elements, with the gradient ``fill(a) + fill(b)`` of two scalar feeds (two feeds, so that grappler
    cannot fold the sum into a product), so the step holds one ``AddV2`` that streams as many bytes as the update."""
    import tensorflow as tf

    import placement_env as pe

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer = {optimizer!r}: must be one of {', '.join(OPTIMIZERS)}")
    make = {"GradientDescent": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1),
            "Momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
            "Adam": lambda: tf.compat.v1.train.AdamOptimizer(0.1)}[optimizer]
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [], name="a")
        b = tf.compat.v1.placeholder(tf.float32, [], name="b")
        var = tf.compat.v1.get_variable("var", [n], initializer=tf.compat.v1.zeros_initializer(), use_resource=True)
        grad = tf.add(tf.fill([n], a), tf.fill([n], b), name="grad")
        train = make().apply_gradients([(grad, var)], name="train")
        init = tf.compat.v1.global_variables_initializer()
    return pe.from_tf(graph, fetches=[train.name], init_op=init.name, name=f"{optimizer.lower()}-{n}")


def _gap_table(cluster_name: str, benchmarks: list[str]) -> None:
    import placement_env as pe
    from placement_env.costs import SCATTER, SEGMENT_SUM, UPDATE_PREFIX, achieved_rates, analytical_costs
    from placement_env.costs import update_traffic_bytes

    cluster = dataclasses.replace(pe.load_cluster(cluster_name), update_traffic=False)  # grappler's alone
    gpus = np.flatnonzero(cluster.is_gpu)
    if not gpus.size:
        raise SystemExit(f"cluster {cluster_name!r} has no GPU; pick one that has (e.g. k80-2gpu)")
    gpu = int(gpus[0])
    bandwidth = achieved_rates(cluster.devices[gpu])[1]
    print(f"{cluster_name}, {cluster.devices[gpu].name}: achieved memory bandwidth {bandwidth / 1e9:.0f} GB/s")
    print("| benchmark | op class | ops | modelled (ms) | traffic floor (ms) | floor - modelled, share of the step's "
          "op time |")
    print("|---|---|---|---|---|---|")
    for name in benchmarks:
        graph = pe.load_benchmark(name)
        seconds = analytical_costs(graph, cluster).seconds[:, gpu]
        floor_all = update_traffic_bytes(graph, "GPU") / bandwidth
        on_gpu = pe.allowed_devices(graph, cluster)[graph.group, gpu]
        step = float(seconds[on_gpu].sum())
        types = np.asarray(graph.op_types, dtype=str)
        classes = (("updates", np.char.startswith(types, UPDATE_PREFIX)), ("segment sums", types == SEGMENT_SUM),
                   ("sparse updates", types == SCATTER))
        for label, members in classes:
            ops = np.flatnonzero(members & on_gpu)
            if not ops.size:
                continue
            floor = floor_all[ops]
            gap = float(np.maximum(floor - seconds[ops], 0.0).sum())
            print(f"| {name} | {label} | {ops.size} | {seconds[ops].sum() * 1e3:.2f} | {floor.sum() * 1e3:.2f} | "
                  f"{gap * 1e3:.1f} ms, {gap / step:.2%} of {step:.3f} s |")


def _measure(sizes_mib: list[int]) -> None:
    from tqdm import tqdm

    import placement_env as pe
    from placement_env.calibration import measured_costs
    from placement_env.costs import UPDATE_PREFIX, analytical_costs, update_traffic_bytes

    local = pe.load_cluster("local:1")
    print("one local:1 worker (one TF thread); bandwidth: what the step's AddV2 reached (3 tensors of the variable's "
          "size in its measured time); grappler and floor: analytical_costs at that bandwidth, without and with "
          "update_traffic")
    print("| update | variable | update's traffic | AddV2: measured / modelled (ms) | bandwidth | update measured (ms) "
          "| grappler (ms, x measured) | with the floor (ms, x measured) |")
    print("|---|---|---|---|---|---|---|---|")
    cases = [(optimizer, mib) for optimizer in OPTIMIZERS for mib in sizes_mib]
    for optimizer, mib in tqdm(cases, desc="profiling updates", unit="step", leave=False):
        graph = optimizer_step(optimizer, mib * 2**20 // 4)
        types = np.asarray(graph.op_types, dtype=str)
        add = int(np.flatnonzero(types == "AddV2")[0])
        update = int(np.flatnonzero(np.char.startswith(types, UPDATE_PREFIX))[0])
        measured = measured_costs(graph, local).seconds[:, 0]
        bandwidth = 3 * mib * 2**20 / measured[add]
        device = dataclasses.replace(local.devices[0], memory_bandwidth=bandwidth, memory_efficiency=1.0)
        at_bandwidth = dataclasses.replace(local, devices=(device,))
        grappler = analytical_costs(graph, at_bandwidth).seconds[:, 0]
        floored = analytical_costs(graph, dataclasses.replace(at_bandwidth, update_traffic=True)).seconds[:, 0]
        traffic = update_traffic_bytes(graph, "CPU")[update]
        tqdm.write(f"| {types[update]} | {mib} MiB | {traffic / 2**20:.0f} MiB | {measured[add] * 1e3:.2f} / "
                   f"{grappler[add] * 1e3:.2f} | {bandwidth / 1e9:.1f} GB/s | {measured[update] * 1e3:.2f} | "
                   f"{grappler[update] * 1e3:.2f} ({grappler[update] / measured[update]:.2f}x) | "
                   f"{floored[update] * 1e3:.2f} ({floored[update] / measured[update]:.2f}x) |")


def _replay(paths: list[str]) -> None:
    from scipy.stats import kendalltau

    import placement_env as pe
    from placement_env.harness.results import read_rows

    evaluators: dict[str, tuple] = {}
    print("| results | task | rows | runtime with / without the floor | Kendall's tau | fastest row |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        runs: dict[str, list[tuple]] = {}
        for row in read_rows(path, must_exist=True):
            if row["runtime"] != "sim" or not row["ok"]:
                continue
            key = json.dumps([row["benchmark"], row["cluster"]])
            if key not in evaluators:
                graph, cluster = pe.load_benchmark(row["benchmark"]), pe.load_cluster(row["cluster"])
                evaluators[key] = (pe.Evaluator(graph, dataclasses.replace(cluster, update_traffic=False)),
                                   pe.Evaluator(graph, dataclasses.replace(cluster, update_traffic=True)))
            without, floored = (evaluator.batch([row["placement"]])[0] for evaluator in evaluators[key])
            if not np.isclose(without.runtime_s, row["runtime_s"], rtol=1e-9, atol=0.0):
                raise SystemExit(f"{path}: a {row['method']} row of {row['task']} gives {without.runtime_s} s here, "
                                 f"not its {row['runtime_s']} s: validate the file first")
            runs.setdefault(row["task"], []).append(
                (row["method"], row["seed"], without.runtime_s, floored.runtime_s if floored.ok else np.inf))
        for task, rows in runs.items():
            before = np.array([r[2] for r in rows])
            after = np.array([r[3] for r in rows])
            ratio = after / before
            old, new = int(np.argmin(before)), int(np.argmin(after))
            fastest = ("the same" if old == new else f"{rows[old][0]} (seed {rows[old][1]}) -> {rows[new][0]} (seed "
                       f"{rows[new][1]}); the old one {after[old] / after[new] - 1:.2%} behind")
            print(f"| {path} | {task} | {len(rows)} | {ratio.min():.4f}-{ratio.max():.4f}x (median "
                  f"{np.median(ratio):.4f}) | {kendalltau(before, after).statistic:.3f} | {fastest} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="k80-2gpu", help="a cluster preset with a GPU (default: %(default)s)")
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--measure", action="store_true",
                      help="time real updates on a local:1 worker instead (about a minute; run it alone)")
    parser.add_argument("--mib", nargs="+", type=int, default=list(MEASURED_MIB),
                        help="with --measure: the variables' sizes in MiB (default: %(default)s)")
    mode.add_argument("--replay", nargs="+", metavar="FILE", help="replay these results files' simulated rows "
                      "with and without the floor instead")
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    if args.measure:
        _measure(args.mib)
    elif args.replay:
        _replay(args.replay)
    else:
        _gap_table(args.cluster, args.benchmarks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
