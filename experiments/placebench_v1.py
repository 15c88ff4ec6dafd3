"""The definition of placebench-v1, and the command that froze it into placement_env/harness/benchmarks/.

    python -m experiments.placebench_v1 --check     # rebuild and compare with the frozen file (prints differences)
    python -m experiments.placebench_v1 --write     # (re)freeze: only for a new version, never to edit a frozen one

Freezing builds every graph (about 160; an hour or more on two cores the first time, minutes from the cache) and
runs the built-in zero-budget heuristics on each scored and validation task for its reference step time.

The choices:

- ``paper``: the seed paper's three models on 2 and 4 GPUs of its machine as built (``k80-*``).
- ``modern``: today's models on a DGX-1 (V100, 16 GB) and a DGX H100 (80 GB), each at a batch where one GPU runs
  out of memory (on the H100 machine, four to ten times the published batch) except DLRM on the H100 machine, whose
  tables fit one GPU but whose split pays (the best zero-budget heuristic is 1.37x faster than one GPU).
- ``generalisation``: 102 train graphs from five families (random CNNs, random Transformers, random LSTM /
  seq2seq models, random layered DAGs, and the paper's models and GPT-2 at three batches each); validation on
  held-out seeds of the four generators; test on seven named architectures that no train graph comes from
  (ResNet-50, the encoder-decoder Transformer, BERT, VGG-16, MobileNetV2, MLP-Mixer, DLRM), two batches each
  (DLRM one) chosen so that one K80 die holds the graph at one and not at the other, on both K80 machines.
- ``measured``: real execution on local TF workers, graphs whose measured step takes 5-200 ms on this machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date

from placement_env.harness import placebench
from placement_env.harness.score import REFERENCE_HEURISTICS

NAME = "placebench-v1"
SEEDS = [0, 1, 2]
SIM_BUDGETS = [0, 100, 1000, 10000]
HEURISTICS = REFERENCE_HEURISTICS  # the reference of a task: the best of these at zero budget (a score divides by it)


def _tasks(models: list[tuple[str, str]], clusters: list[str], runtime: str = "sim") -> list[dict]:
    return [{"name": f"{benchmark}@{cluster}", "benchmark": benchmark, "cluster": cluster, "runtime": runtime,
             "model": label} for label, benchmark in models for cluster in clusters]


PAPER = [("RNNLM", "rnnlm"), ("NMT", "nmt"), ("Inception-V3", "inception_v3")]
MODERN_V100 = [("Transformer", "transformer"), ("GPT-2", "gpt2"), ("BERT", "bert"), ("ResNet-50", "resnet50"),
               ("DLRM", "dlrm"), ("MLP-Mixer, batch 48", "mlp_mixer-batch48")]
MODERN_H100 = [("Transformer, batch 640", "transformer-batch640"), ("GPT-2, batch 24", "gpt2-batch24"),
               ("BERT, batch 80", "bert-batch80"), ("ResNet-50, batch 1280", "resnet50-batch1280"),
               ("DLRM", "dlrm"), ("MLP-Mixer, batch 256", "mlp_mixer-batch256")]
TRAIN = ([(f"random_cnn:{seed}", "random CNN") for seed in range(25)]
         + [(f"random_transformer:{seed}", "random Transformer") for seed in range(25)]
         + [(f"random_rnn:{seed}", "random LSTM / seq2seq") for seed in range(25)]
         + [(f"synthetic:{seed}", "random layered DAG") for seed in range(15)]
         + [(f"{model}-batch{batch}", "named model") for model, batches in
            (("rnnlm", (32, 64, 96)), ("nmt", (32, 64, 96)), ("inception_v3", (64, 128, 192)), ("gpt2", (2, 4, 6)))
            for batch in batches])
VALIDATION = [(f"{generator}:{seed}", f"{generator}:{seed}") for generator in
              ("random_cnn", "random_transformer", "random_rnn", "synthetic") for seed in (100, 101, 102)]
TEST = [("ResNet-50, batch 96", "resnet50-batch96"), ("ResNet-50, batch 160", "resnet50-batch160"),
        ("Transformer, batch 56", "transformer-batch56"), ("Transformer, batch 96", "transformer-batch96"),
        ("BERT, batch 6", "bert-batch6"), ("BERT, batch 10", "bert-batch10"),
        ("VGG-16, batch 128", "vgg16-batch128"), ("VGG-16, batch 192", "vgg16-batch192"),
        ("MobileNetV2, batch 160", "mobilenet_v2-batch160"), ("MobileNetV2, batch 256", "mobilenet_v2-batch256"),
        ("MLP-Mixer, batch 20", "mlp_mixer-batch20"), ("MLP-Mixer", "mlp_mixer"), ("DLRM", "dlrm")]
# One measured step of these on one local worker of this 2-core machine: synthetic:<seed> 45-85 ms,
# Inception-V3 tiny 10 ms, the tiny random CNN 6 ms (gpt2-tiny's 4 ms is below the track's 5 ms).
MEASURED = [("synthetic:20", "synthetic:20"), ("synthetic:21", "synthetic:21"),
            ("Inception-V3 tiny", "inception_v3-tiny"), ("Random CNN tiny", "random_cnn-tiny")]
K80 = ["k80-2gpu", "k80-4gpu"]

DEFINITION = {
    "description": "Device placement of TensorFlow training steps: scored by the step time of the placement, "
                   "against the best built-in zero-budget heuristic, at fixed budgets of runtime evaluations.",
    "tracks": {
        "paper": {"description": "The seed paper's six tasks (Mirhoseini et al. 2017) on its machine as built: "
                                 "K80 boards behind shared PCIe slots (k80-2gpu, k80-4gpu).",
                  "budgets": SIM_BUDGETS, "seeds": SEEDS, "tasks": _tasks(PAPER, K80)},
        "modern": {"description": "Today's models on today's machines, at batches where one GPU runs out of "
                                  "memory or a split pays: a DGX-1 with four V100s and a DGX H100 with eight H100s.",
                   "budgets": SIM_BUDGETS, "seeds": SEEDS,
                   "tasks": _tasks(MODERN_V100, ["dgx1-v100-4gpu"]) + _tasks(MODERN_H100, ["dgx-h100-8gpu"])},
        "generalisation": {"description": "Placers that learn from other graphs: train on the train graphs (five "
                                          "families), choose on the validation tasks (held-out seeds of the "
                                          "generators), scored on test tasks from seven named architectures that "
                                          "no train graph comes from, on both K80 machines.",
                           "budgets": [0, 100, 1000], "seeds": SEEDS, "tasks": _tasks(TEST, K80),
                           "validation": _tasks(VALIDATION, K80),
                           "train": [{"benchmark": b, "family": f} for b, f in TRAIN], "train_clusters": K80},
        "measured": {"description": "Real execution on local TensorFlow workers (local:2, local:3), where every "
                                    "evaluation costs a measured step: few-shot placers show their worth here. "
                                    "Run on an otherwise idle machine; each row's simulated step time is beside "
                                    "its measured one.",
                     "budgets": [0, 10, 100], "seeds": SEEDS, "tasks": _tasks(MEASURED, ["local:2", "local:3"],
                                                                              runtime="measured")},
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help=f"freeze {NAME} into the package (a new version only)")
    action.add_argument("--check", action="store_true", help="rebuild and list what differs from the frozen file")
    args = parser.parse_args(argv)
    if args.check:
        found = placebench.verify(placebench.load_placebench(NAME))
        print("\n".join(found) or f"{NAME} reproduces here")
        return 1 if found else 0
    data = placebench.freeze(NAME, json.loads(json.dumps(DEFINITION)), heuristics=HEURISTICS,
                             frozen=date.today().isoformat())
    path = placebench.BENCHMARK_DIR / f"{NAME}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{path}: digest {data['digest']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
