"""The suites of one-off experiments on the GNN placer's train split (docs/findings.md), named by import path:
``--suite experiments.suites:GENERALISATION_TRAIN_VGG`` (``placement-env run``, ``python -m agents.gnn_placer``,
the experiment scripts), which ``placement_env.harness.load_suite`` resolves.

Each is the train split (``generalisation-train``) plus graphs of one more family, on the K80 machines; the
split itself and the test and validation splits are the library's suites.
"""
from __future__ import annotations

from placement_env.harness import GENERALISATION_TRAIN, Task, k80_tasks

# The train split plus a CNN without branches, VGG-16, at its own batch of 256 and at 352 (single-GPU peak over
# two dies 0.73 and about 1.0).
GENERALISATION_TRAIN_VGG = k80_tasks((*GENERALISATION_TRAIN, ("VGG-16", "vgg16"),
                                      ("VGG-16, batch 352", "vgg16-batch352")))
# ... plus VGG-16 with batch norm, whose groups hold the same kinds of ops as ResNet-50's and Inception-V3's, at
# batch 128 and 176 (0.73 and about 1.0).
GENERALISATION_TRAIN_VGG_BN = k80_tasks((*GENERALISATION_TRAIN, ("VGG-16-BN, batch 128", "vgg16_bn-batch128"),
                                         ("VGG-16-BN, batch 176", "vgg16_bn-batch176")))
# ... plus MobileNetV2, a chain of inverted residual units with identity shortcuts (another family than
# ResNet-50's), at batch 320 and 416 (0.77 and 1.00).
GENERALISATION_TRAIN_MOBILENET = k80_tasks((*GENERALISATION_TRAIN, ("MobileNetV2, batch 320", "mobilenet_v2-batch320"),
                                            ("MobileNetV2, batch 416", "mobilenet_v2-batch416")))
# ... plus a family drawn at random: four random CNNs (seeds 0-3, batch 256: 0.56-0.78), each a mix of plain,
# residual and branched units in its own proportions, so that structure rather than the family's name decides a
# placement.
def GENERALISATION_TRAIN_RANDOM_CNN() -> tuple[Task, ...]:  # noqa: N802 - named as the other suites
    from agents.gnn_placer.cost_training import random_cnns  # torch, only for this suite

    return k80_tasks((*GENERALISATION_TRAIN, *random_cnns(4)))


# ... and twice as many (seeds 0-7; seeds 4-7: 0.54-0.77): the GNN placer's cost model's train suite.
def GENERALISATION_TRAIN_RANDOM_CNN_8() -> tuple[Task, ...]:  # noqa: N802
    from agents.gnn_placer.cost_training import COST_MODEL_SUITE

    return COST_MODEL_SUITE


# Not a generalisation experiment but a diagnostic: the train split with the test graph ResNet-50 among it, to tell
# a zero-shot miss on ResNet-50 that comes from what the train families teach from one the network or its training
# cannot avoid.
GENERALISATION_TRAIN_PLUS_RESNET50 = k80_tasks((*GENERALISATION_TRAIN, ("ResNet-50", "resnet50")))
