"""Cross-graph fidelity on real local TF workers: calibrate on some graphs, predict others.

    python -m experiments.cross_graph_fidelity [--cluster local:2] [--fit rnnlm-tiny synthetic-tiny]
        [--predict nmt-tiny inception_v3-tiny keras-branches] [--placements 16] [--reuse FILE]

1. Every graph (``--fit`` and ``--predict``) gets ``--placements`` random placements (Dirichlet
   spread, seeded) plus one single-worker placement per worker, measured on the real workers of
   ``--cluster`` (one set of workers for all graphs), and one profile of its ops on a single worker
   (:func:`placement_env.calibration.measured_costs`: each op's kernel time from traced steps).
2. One set of simulator parameters (op-cost scale and per-op overhead per device type, one link) is
   fitted to the ``--fit`` graphs' measurements pooled (:func:`placement_env.calibration.fit_datasets`).
3. Every graph is predicted with that fit and with the uncalibrated cluster, and scored (Spearman,
   MAPE). The ``--predict`` graphs took no part in the fit (with ``--costs measured``, only their
   single-worker op profile enters their prediction, as an op cost table, never their placements).

``--costs``: the op costs the simulator scales, grappler's ``analytical`` ones (default) or the
``measured`` profiles, which are the workers' own kernel times and so are kept at scale 1 unless
``--measured-scale fitted``. ``--link-runs``: link microbenchmark results from which the host
transfer's bandwidth is taken (:func:`placement_env.calibration.host_bandwidth_from_files`)
instead of fitted. ``placement-env calibrate BENCH [BENCH ...] --link-runs FILE`` is the same fit as a
command (analytical costs, K-fold held-out scores per graph instead of held-out graphs).

``keras-branches`` is a user's Keras model (three parallel dense branches, concatenated) imported
with ``pe.from_tf``. The measurements are written to ``--out`` as JSON; ``--reuse`` refits and
rescores a previous file without measuring again. Measure on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

KERAS_BRANCHES = "keras-branches"


def keras_branches_graph():
    """A user's Keras model, imported: input [64, 512] -> three Dense(1024) branches -> concat -> Dense(10)."""
    import keras
    import tensorflow as tf

    from placement_env.tf_import import from_tf

    inputs = keras.Input(shape=(512,), batch_size=64)
    branches = [keras.layers.Dense(1024, activation="relu", name=f"branch_{i}")(inputs) for i in range(3)]
    merged = keras.layers.Concatenate()(branches)
    outputs = keras.layers.Dense(10, name="head")(merged)
    model = keras.Model(inputs, outputs, name=KERAS_BRANCHES)
    return from_tf(model, input_spec=tf.TensorSpec([64, 512], tf.float32))


def load_graph(name: str):
    from placement_env.benchmarks import load_benchmark

    return keras_branches_graph() if name == KERAS_BRANCHES else load_benchmark(name)


def placements_for(graph, cluster, n: int, seed: int) -> np.ndarray:
    """``n`` random placements (Dirichlet spread) and one single-worker placement per device."""
    from placement_env.placement import random_placements

    singles = np.repeat(np.arange(cluster.n_devices)[:, None], graph.n_groups, axis=1)
    return np.vstack([random_placements(graph, cluster, n, seed, spread="dirichlet"), singles]).astype(np.int64)


def measure_all(names: list[str], cluster, n: int, seed: int, steps: int) -> dict:
    """{graph name: {"placements": [...], "measured_s": [...], "op_seconds": [...]}} measured on one set of workers."""
    from placement_env.calibration import measured_costs
    from placement_env.calibration.samples import measure_placements
    from placement_env.runtime.measured import MeasuredRuntime

    data = {}
    with MeasuredRuntime(cluster, steps=steps, warmup=steps // 3, timeout_s=120.0) as runtime:
        for name in names:
            graph = load_graph(name)
            placements = placements_for(graph, cluster, n, seed)
            samples = measure_placements(graph, placements, runtime, desc=f"measuring {name}")
            profile = measured_costs(graph, cluster, runtime=runtime)
            data[name] = {"placements": placements.tolist(), "measured_s": samples.measured_s.tolist(),
                          "failures": samples.failures, "op_seconds": profile.seconds.tolist()}
    return data


def score(fit_names: list[str], names: list[str], cluster, data: dict, costs: str = "analytical",
          host_bandwidth: float | None = None, fit_scale: bool = True) -> list[dict]:
    """Fit on ``fit_names``; Spearman and MAPE of every graph before and after calibration, with
    ``costs`` ("analytical" or "measured") as the op costs at scale 1, ``host_bandwidth`` (if
    given) as the host transfer's bandwidth instead of a fitted one, and the op-cost scale fitted
    or kept at 1 (``fit_scale``)."""
    from placement_env.calibration import fit_datasets, measured_dataset, score_graph
    from placement_env.costs import OpCosts, analytical_costs

    datasets = {}
    for name in names:
        graph = load_graph(name)
        op_costs = (OpCosts(data[name]["op_seconds"], source=f"measured on {cluster.name}")  # kernel times
                    if costs == "measured" else analytical_costs(graph, cluster))
        datasets[name] = measured_dataset(graph, cluster, op_costs, data[name]["placements"], data[name]["measured_s"])
    fit = fit_datasets([datasets[n] for n in fit_names], cluster, host_bandwidth=host_bandwidth, fit_scale=fit_scale)
    rows = []
    for name in names:
        scored = score_graph(datasets[name], cluster, fit)
        before, after = scored.before, scored.after
        rows.append({"graph": name, "role": "fit" if name in fit_names else "held out", "n": after["n"],
                     "measured_min_s": float(scored.measured_s.min()), "measured_max_s": float(scored.measured_s.max()),
                     "spearman_before": before["spearman"], "spearman_after": after["spearman"],
                     "mape_before": before["mape"], "mape_after": after["mape"]})
    host = fit.host_transfer
    rows.append({"fit": {"scale": fit.scale.tolist(), "overhead_s": fit.overhead.tolist(),
                         "bandwidth": fit.bandwidth, "latency_s": fit.latency, "loss": fit.loss,
                         "host_transfer": None if host is None else host.to_dict()}})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| graph | role | placements | measured (ms) | Spearman before / after | MAPE before / after |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "graph" not in r:
            fit = r["fit"]
            host = fit["host_transfer"]
            transfer = (f"link {fit['bandwidth'] / 1e9:.3g} GB/s and {fit['latency_s'] * 1e6:.0f} us per transfer"
                        if host is None else
                        f"link {fit['latency_s'] * 1e6:.0f} us per transfer, and at each end {host['per_tensor_s'] * 1e6:.0f} us "
                        f"+ bytes at {host['bandwidth'] / 1e9:.3g} GB/s of the worker's CPU")
            lines.append(f"\nfit: scale {fit['scale'][0]:.3g}, per-op overhead {fit['overhead_s'][0] * 1e6:.1f} us, "
                         + transfer)
            continue
        lines.append(f"| {r['graph']} | {r['role']} | {r['n']} | {r['measured_min_s'] * 1e3:.2f}-{r['measured_max_s'] * 1e3:.2f} "
                     f"| {r['spearman_before']:.2f} / {r['spearman_after']:.2f} "
                     f"| {r['mape_before']:.0%} / {r['mape_after']:.0%} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.cross_graph_fidelity",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--fit", nargs="+", default=["rnnlm-tiny", "synthetic-tiny"])
    parser.add_argument("--predict", nargs="+", default=["nmt-tiny", "inception_v3-tiny", KERAS_BRANCHES])
    parser.add_argument("--placements", type=int, default=16, help="random placements per graph (plus single workers)")
    parser.add_argument("--steps", type=int, default=6, help="measured steps per placement (a third are warm-up)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/cross_graph_fidelity.json")
    parser.add_argument("--costs", choices=("analytical", "measured"), default="analytical",
                        help="op costs at scale 1: grappler's or the measured single-worker profiles")
    parser.add_argument("--measured-scale", choices=("kept", "fitted"), default="kept",
                        help="with --costs measured: keep the traced kernel times as they are (scale 1: they are "
                             "the worker's own op times; only the executor's per-op overhead is fitted) or fit a scale")
    parser.add_argument("--reuse", help="a previous --out file: refit and rescore without measuring")
    parser.add_argument("--link-runs", nargs="+", default=[], metavar="FILE",
                        help="link microbenchmark results (experiments.link_microbenchmark --out): the host "
                             "transfer's bandwidth comes from their large tensors instead of the fit")
    args = parser.parse_args(argv)
    if args.placements < 4:
        parser.error(f"--placements {args.placements}: need at least 4")
    overlap = sorted(set(args.fit) & set(args.predict))
    if overlap:
        parser.error(f"{overlap} both fitted and predicted: a predicted graph must take no part in the fit")
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    from placement_env.cluster import load_cluster

    cluster = load_cluster(args.cluster)
    names = [*args.fit, *args.predict]
    if args.reuse:
        data = json.loads(Path(args.reuse).read_text())["measurements"]
        missing = [n for n in names if n not in data]
        if missing:
            parser.error(f"--reuse {args.reuse} has no measurements of {missing}; it has {sorted(data)}")
    else:
        data = measure_all(names, cluster, args.placements, args.seed, args.steps)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"cluster": args.cluster, "measurements": data}))
    host_bandwidth = None
    if args.link_runs:
        from placement_env.calibration import host_bandwidth_from_files

        host_bandwidth = host_bandwidth_from_files(args.link_runs)
        print(f"host transfer bandwidth from {len(args.link_runs)} link run(s): {host_bandwidth / 1e9:.3g} GB/s at each end")
    fit_scale = args.costs == "analytical" or args.measured_scale == "fitted"
    rows = score(args.fit, names, cluster, data, args.costs, host_bandwidth, fit_scale)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
