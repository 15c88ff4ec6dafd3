"""Benchmark suites: named lists of tasks (a benchmark on a cluster with a runtime)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnknownSuiteError


@dataclass(frozen=True)
class Task:
    """One row of a suite: place ``benchmark`` on ``cluster``, scored by ``runtime``."""

    name: str
    benchmark: str
    cluster: str
    runtime: str = "sim"
    model: str = ""  # row label in reports, e.g. "RNNLM"
    gpus: int = 0


PAPER_MODELS = (("RNNLM", "rnnlm"), ("NMT", "nmt"), ("Inception-V3", "inception_v3"))


def _paper() -> tuple[Task, ...]:
    return tuple(Task(f"{benchmark}-{gpus}gpu", benchmark, f"paper-{gpus}gpu", model=label, gpus=gpus)
                 for label, benchmark in PAPER_MODELS for gpus in (2, 4))


def _tiny() -> tuple[Task, ...]:
    return (Task("rnnlm-tiny-2gpu", "rnnlm-tiny", "paper-2gpu", model="RNNLM-tiny", gpus=2),
            Task("inception_v3-tiny-2gpu", "inception_v3-tiny", "paper-2gpu", model="Inception-V3-tiny", gpus=2),
            Task("synthetic-tiny-2gpu", "synthetic-tiny", "paper-2gpu", model="synthetic-tiny", gpus=2))


def _generalisation() -> tuple[Task, ...]:
    return tuple(Task(f"synthetic:{seed}-{gpus}gpu", f"synthetic:{seed}", f"paper-{gpus}gpu",
                      model=f"synthetic:{seed}", gpus=gpus) for seed in range(10) for gpus in (2, 4))


# The train / test split of real TF training graphs, on the physically modelled K80 machines: the
# families differ between the two (LSTMs, Inception and a decoder-only Transformer to learn from;
# a CNN of another family, an encoder-decoder Transformer and an encoder-only one held out).
# Two train graphs come again at other batches so that the train tasks' memory pressure (the
# single-GPU peak over the GPUs' memory) covers the range between the paper's models (0.15-0.64 of
# two K80 dies) and GPT-2 (1.70): Inception-V3 at batch 192 and 240 (0.82, 1.02), GPT-2 at batch
# 4 and 6 (0.88, 1.29).
GENERALISATION_TRAIN = (("RNNLM", "rnnlm"), ("NMT", "nmt"), ("Inception-V3", "inception_v3"), ("GPT-2", "gpt2"),
                        ("Inception-V3, batch 192", "inception_v3-batch192"),
                        ("Inception-V3, batch 240", "inception_v3-batch240"),
                        ("GPT-2, batch 4", "gpt2-batch4"), ("GPT-2, batch 6", "gpt2-batch6"))
GENERALISATION_TEST = (("ResNet-50", "resnet50"), ("Transformer", "transformer"), ("BERT", "bert"))
# An experiment on the train split (docs/findings.md): the same tasks plus a CNN without branches,
# VGG-16, at its own batch of 256 and at 352 (single-GPU peak over two dies 0.73 and about 1.0).
GENERALISATION_TRAIN_VGG = (*GENERALISATION_TRAIN, ("VGG-16", "vgg16"), ("VGG-16, batch 352", "vgg16-batch352"))
# Another: VGG-16 with batch norm, whose groups hold the same kinds of ops as ResNet-50's and Inception-V3's, at
# batch 128 and 176 (single-GPU peak over two dies 0.73 and about 1.0).
GENERALISATION_TRAIN_VGG_BN = (*GENERALISATION_TRAIN, ("VGG-16-BN, batch 128", "vgg16_bn-batch128"),
                               ("VGG-16-BN, batch 176", "vgg16_bn-batch176"))
# And another: MobileNetV2, a chain of inverted residual units with identity shortcuts (another family than
# ResNet-50's), at batch 320 and 416 (single-GPU peak over two dies 0.77 and 1.00).
GENERALISATION_TRAIN_MOBILENET = (*GENERALISATION_TRAIN, ("MobileNetV2, batch 320", "mobilenet_v2-batch320"),
                                  ("MobileNetV2, batch 416", "mobilenet_v2-batch416"))


def _with_random_cnns(count: int) -> tuple[tuple[str, str], ...]:
    """The train split plus the random CNNs of seeds 0 .. count - 1 (batch 256)."""
    return (*GENERALISATION_TRAIN, *((f"Random CNN {seed}", f"random_cnn:{seed}") for seed in range(count)))


# And a family drawn at random: four random CNNs (seeds 0-3, batch 256: single-GPU peak over two dies 0.56-0.78),
# each a mix of plain, residual and branched units in its own proportions, so that structure rather than the
# family's name decides a placement.
GENERALISATION_TRAIN_RANDOM_CNN = _with_random_cnns(4)
# ... and twice as many (seeds 0-7; seeds 4-7: 0.54-0.77).
GENERALISATION_TRAIN_RANDOM_CNN_8 = _with_random_cnns(8)
# Not a generalisation experiment but a diagnostic: the train split with the test graph ResNet-50 among it, to tell a
# zero-shot miss on ResNet-50 that comes from what the train families teach from one the network or its training
# cannot avoid (docs/findings.md).
GENERALISATION_TRAIN_PLUS_RESNET50 = (*GENERALISATION_TRAIN, ("ResNet-50", "resnet50"))
# A validation split for choices about the zero-shot method (its memory repairs, its refinement): families in neither
# split nor among the cost model's train graphs, each at a single-GPU peak of about 0.75 and 1.0 of two dies: three
# CNNs at the batches of the experiments above (VGG-16, VGG-16-BN, MobileNetV2) and MLP-Mixer (layers of a
# Transformer encoder's shape without attention; batch 48 and 60: 0.79 and 0.99). The train tasks are a biased judge
# of such choices, since the placer learned their placements (docs/findings.md), and the test tasks must not be one.
GENERALISATION_VALIDATION = (("VGG-16", "vgg16"), ("VGG-16, batch 352", "vgg16-batch352"),
                             ("VGG-16-BN, batch 128", "vgg16_bn-batch128"),
                             ("VGG-16-BN, batch 176", "vgg16_bn-batch176"),
                             ("MobileNetV2, batch 320", "mobilenet_v2-batch320"),
                             ("MobileNetV2, batch 416", "mobilenet_v2-batch416"),
                             ("MLP-Mixer, batch 48", "mlp_mixer-batch48"), ("MLP-Mixer, batch 60", "mlp_mixer-batch60"))


# A recommendation model whose embedding tables (16.1 GiB) pass one K80 die's memory (10.5 GiB) but fit on two:
# which tables go where, and where the MLPs run beside them.
RECOMMENDATION = (("DLRM", "dlrm"),)


def _on_k80(models: tuple[tuple[str, str], ...]) -> tuple[Task, ...]:
    return tuple(Task(f"{benchmark}-k80-{gpus}gpu", benchmark, f"k80-{gpus}gpu", model=label, gpus=gpus)
                 for label, benchmark in models for gpus in (2, 4))


SUITES = {
    "paper": _paper,  # the paper's table: 3 models x {2, 4} GPUs on the paper's machine (ideal links)
    "paper-k80": lambda: _on_k80(PAPER_MODELS),  # the same tasks on the K80 machines as built (k80.py)
    "tiny": _tiny,  # small graphs, for tests and quick tries
    "generalisation": _generalisation,  # 10 seeded random layered graphs x {2, 4} GPUs
    "generalisation-train": lambda: _on_k80(GENERALISATION_TRAIN),  # what a generalising placer learns from
    "generalisation-test": lambda: _on_k80(GENERALISATION_TEST),  # held-out families, placed after training
    "generalisation-validation": lambda: _on_k80(GENERALISATION_VALIDATION),  # other families, to choose methods by
    "generalisation-train-vgg": lambda: _on_k80(GENERALISATION_TRAIN_VGG),  # the train split + VGG-16 (an experiment)
    "generalisation-train-vgg-bn": lambda: _on_k80(GENERALISATION_TRAIN_VGG_BN),  # ... + VGG-16-BN (another)
    "generalisation-train-mobilenet": lambda: _on_k80(GENERALISATION_TRAIN_MOBILENET),  # ... + MobileNetV2 (another)
    "generalisation-train-random-cnn": lambda: _on_k80(GENERALISATION_TRAIN_RANDOM_CNN),  # ... + random CNNs (another)
    "generalisation-train-random-cnn-8": lambda: _on_k80(GENERALISATION_TRAIN_RANDOM_CNN_8),  # ... + 8 of them
    "generalisation-train-plus-resnet50": lambda: _on_k80(GENERALISATION_TRAIN_PLUS_RESNET50),  # a diagnostic
    "dlrm": lambda: _on_k80(RECOMMENDATION),  # DLRM's tables spread over the K80 machines' devices
}


def load_suite(name: str) -> tuple[Task, ...]:
    """The tasks of suite ``name``."""
    if name not in SUITES:
        raise UnknownSuiteError(f"unknown suite {name!r}; expected one of {', '.join(map(repr, SUITES))}")
    return SUITES[name]()
