"""Import your own Keras model, place its training step on a cluster, and export the placed TF graph.

``pe.from_tf`` builds one training step of the model (forward, loss, gradients, SGD-momentum update), reads
it as an OpGraph and cuts it into co-location groups. Any method of ``pe.METHODS`` (or your own
``method(problem) -> placement``) then places the groups; ``pe.evaluate`` gives the step time on the
simulator, and ``pe.export_placed_graph`` writes the GraphDef with every op's ``device`` set, ready to run.
``pe.from_tf`` also takes a GraphDef, a ``.pb``/``.pbtxt``/``.meta`` file, a ``tf.Graph`` or a ``tf.function``.

    python examples/place_my_model.py                              # a small MLP on paper-2gpu, ~15 s
    python examples/place_my_model.py --method hill_climbing --budget 500 --out placed/
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import placement_env as pe  # first: it keeps TensorFlow's start-up log lines quiet

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402


def build_model(width: int, layers: int) -> keras.Model:
    """Your model: here an MLP classifier over 256 features."""
    inputs = keras.Input((256,))
    x = inputs
    for _ in range(layers):
        x = keras.layers.Dense(width, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x), name="my_mlp")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=2048, help="units per hidden layer")
    parser.add_argument("--layers", type=int, default=4, help="hidden layers")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--cluster", default="paper-2gpu", help="a cluster preset or JSON file")
    parser.add_argument("--method", default="hill_climbing", choices=sorted(pe.METHODS), help="a built-in method")
    parser.add_argument("--budget", type=int, default=200, help="evaluations for a searching method")
    parser.add_argument("--out", default=None, help="output folder (default: a new temp folder)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="place_my_model-"))

    # 1. Import one training step of the model; the input and target specs fix the batch size.
    model = build_model(args.width, args.layers)
    graph = pe.from_tf(model, input_spec=tf.TensorSpec([args.batch, 256], tf.float32),
                       target_spec=tf.TensorSpec([args.batch], tf.int32),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    cluster = pe.load_cluster(args.cluster)
    print(f"{graph.name}: {graph.n_ops} ops in {graph.n_groups} groups; {cluster.name}: {cluster.n_devices} devices")

    # 2. Place it, and compare with everything on one GPU.
    solution = pe.solve(args.method, pe.Problem.make(graph, cluster, budget=args.budget))
    placed = pe.evaluate(graph, cluster, solution.placement)
    one_gpu = pe.evaluate(graph, cluster, pe.solve("single_gpu", pe.Problem.make(graph, cluster)).placement)
    print(f"{args.method}: {placed.runtime_s * 1e3:.3f} ms per step; single GPU {one_gpu.runtime_s * 1e3:.3f} ms; "
          f"lower bound {pe.lower_bound(graph, cluster) * 1e3:.3f} ms")

    # 3. Export the placed graph: a GraphDef whose ops carry their devices (.pb binary, .pbtxt text).
    path = pe.export_placed_graph(graph, cluster, solution.placement, out / f"{graph.name}-placed.pb")
    print(f"placed graph: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
