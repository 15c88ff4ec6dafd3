"""What the analytical costs leave out of variable updates: ``python -m experiments.update_traffic``.

grappler's analytical estimate of a ``ResourceApply*`` op sees the variables it updates as resource handles (no
bytes) and costs only the update's arithmetic; a dense embedding gradient (``UnsortedSegmentSum``) is costed by its
arithmetic as well. For each benchmark on the first GPU of ``--cluster``, this prints these op classes' modelled
seconds against a memory-traffic floor at the GPU's achieved bandwidth (``costs.achieved_rates``): an update reads
its data inputs (the gradient) and reads and writes every variable whose handle it takes (the variable and its
optimiser slots); a segment sum reads its inputs and writes its output; a sparse update (``ResourceScatterAdd``,
DLRM's tables) reads its inputs and reads and writes the rows it updates, as many bytes as its largest input. The floor's excess over the model is given
as a share of the step's op seconds on that GPU (every op the GPU can run, one after another). The costs are not
changed by this: it measures the gap that docs/findings.md describes.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

BENCHMARKS = ("rnnlm", "nmt", "inception_v3", "transformer", "gpt2", "bert", "resnet50", "mlp_mixer", "dlrm")
UPDATE_PREFIX = "ResourceApply"
SEGMENT_SUM = "UnsortedSegmentSum"
SCATTER = "ResourceScatterAdd"


def traffic_floor_bytes(graph, op: int) -> int:
    """Bytes ``op`` must move at least: its data inputs read, each variable whose handle it takes read and written
    (an update), the rows it updates read and written (a sparse update), or its data inputs read and its outputs
    written (a segment sum)."""
    inputs = np.flatnonzero(np.asarray(graph.edge_dst) == op)
    sources = np.asarray(graph.edge_src)[inputs]
    edge_bytes = np.asarray(graph.edge_bytes, np.int64)[inputs]
    data = np.asarray(graph.edge_src_output)[inputs] >= 0
    variables = data & (edge_bytes == 0) & (np.asarray(graph.persistent_bytes)[sources] > 0)
    read = int(edge_bytes[data & ~variables].sum())
    if graph.op_types[op].startswith(UPDATE_PREFIX):
        return read + 2 * int(np.asarray(graph.persistent_bytes, np.int64)[sources[variables]].sum())
    if graph.op_types[op] == SCATTER:
        return read + 2 * int(edge_bytes[data & ~variables].max(initial=0))
    outputs = np.asarray(graph.output_bytes, np.int64)[graph.output_ptr[op]:graph.output_ptr[op + 1]]
    return read + int(outputs.sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="k80-2gpu", help="a cluster preset with a GPU (default: %(default)s)")
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS))
    args = parser.parse_args(argv)
    from placement_env.quiet_tf import import_tensorflow_quietly

    import_tensorflow_quietly()
    import placement_env as pe
    from placement_env.costs import achieved_rates, analytical_costs

    cluster = pe.load_cluster(args.cluster)
    gpus = np.flatnonzero(cluster.is_gpu)
    if not gpus.size:
        raise SystemExit(f"cluster {args.cluster!r} has no GPU; pick one that has (e.g. k80-2gpu)")
    gpu = int(gpus[0])
    bandwidth = achieved_rates(cluster.devices[gpu])[1]
    print(f"{args.cluster}, {cluster.devices[gpu].name}: achieved memory bandwidth {bandwidth / 1e9:.0f} GB/s")
    print("| benchmark | op class | ops | modelled (ms) | traffic floor (ms) | floor - modelled, share of the step's op "
          "time |")
    print("|---|---|---|---|---|---|")
    for name in args.benchmarks:
        graph = pe.load_benchmark(name)
        seconds = analytical_costs(graph, cluster).seconds[:, gpu]
        on_gpu = pe.allowed_devices(graph, cluster)[graph.group, gpu]
        step = float(seconds[on_gpu].sum())
        types = np.asarray(graph.op_types, dtype=str)
        classes = (("updates", np.char.startswith(types, UPDATE_PREFIX)), ("segment sums", types == SEGMENT_SUM),
                   ("sparse updates", types == SCATTER))
        for label, members in classes:
            ops = np.flatnonzero(members & on_gpu)
            if not ops.size:
                continue
            floor = np.array([traffic_floor_bytes(graph, int(op)) for op in ops]) / bandwidth
            gap = float(np.maximum(floor - seconds[ops], 0.0).sum())
            print(f"| {name} | {label} | {ops.size} | {seconds[ops].sum() * 1e3:.2f} | {floor.sum() * 1e3:.2f} | "
                  f"{gap * 1e3:.1f} ms, {gap / step:.2%} of {step:.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
