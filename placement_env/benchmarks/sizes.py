"""Builder parameters of every benchmark, at paper scale and tiny, and the models' block layouts,
readable without TensorFlow.

Each model module takes its ``PAPER``/``TINY`` from here; the benchmark registry and the graph
cache read them without importing the builders (and TensorFlow).
"""
from __future__ import annotations

from typing import Any

RNNLM_PAPER: dict[str, Any] = {"batch": 64, "hidden": 2048, "vocab": 40000, "num_steps": 35, "num_layers": 2}

RNNLM_TINY: dict[str, Any] = {"batch": 4, "hidden": 16, "vocab": 50, "num_steps": 4, "num_layers": 2}

# Chosen so the paper's table shape holds in the simulator: one 12 GiB GPU is out of memory
# (13.5 GiB peak) while the expert's layer-wise 2-GPU split fits (7.3 + 9.3 GiB). Longer sentences
# or larger vocabularies push even the 2-GPU split over 12 GiB per GPU: every unrolled step keeps
# its own [2 x hidden, 4 x hidden] weight-gradient tensor until they are summed.
NMT_PAPER: dict[str, Any] = {
    "batch": 64,
    "hidden": 2048,
    "src_vocab": 40000,
    "tgt_vocab": 40000,
    "src_len": 30,
    "tgt_len": 30,
}

NMT_TINY: dict[str, Any] = {"batch": 4, "hidden": 16, "src_vocab": 50, "tgt_vocab": 50, "src_len": 4, "tgt_len": 3}

INCEPTION_V3_PAPER: dict[str, Any] = {
    "image_size": 299,
    "batch": 32,
    "num_classes": 1000,
    "depth_multiplier": 1.0,
    "min_depth": 16,
    "dropout_keep_prob": 0.8,
}

INCEPTION_V3_TINY: dict[str, Any] = {
    "image_size": 75,
    "batch": 2,
    "num_classes": 10,
    "depth_multiplier": 0.1,
    "min_depth": 8,
    "dropout_keep_prob": 0.8,
}

SYNTHETIC_PAPER: dict[str, Any] = {"seed": 0, "layers": 12, "width": 8, "dim": 256, "batch": 32, "fan_in": 2}

SYNTHETIC_TINY: dict[str, Any] = {"seed": 0, "layers": 4, "width": 3, "dim": 16, "batch": 4, "fan_in": 2}


PARAMS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "rnnlm": (RNNLM_PAPER, RNNLM_TINY),
    "nmt": (NMT_PAPER, NMT_TINY),
    "inception_v3": (INCEPTION_V3_PAPER, INCEPTION_V3_TINY),
    "synthetic": (SYNTHETIC_PAPER, SYNTHETIC_TINY),
}

# Inception-V3's top-level name scopes in forward order (TF-slim names); AuxLogits sits right after
# Mixed_6e, its only input. The expert placement splits the network along these blocks.
INCEPTION_V3_BLOCKS: tuple[str, ...] = (
    "inputs",
    "Conv2d_1a_3x3",
    "Conv2d_2a_3x3",
    "Conv2d_2b_3x3",
    "MaxPool_3a_3x3",
    "Conv2d_3b_1x1",
    "Conv2d_4a_3x3",
    "MaxPool_5a_3x3",
    "Mixed_5b",
    "Mixed_5c",
    "Mixed_5d",
    "Mixed_6a",
    "Mixed_6b",
    "Mixed_6c",
    "Mixed_6d",
    "Mixed_6e",
    "AuxLogits",
    "Mixed_7a",
    "Mixed_7b",
    "Mixed_7c",
    "Logits",
    "loss",
)

# Block layouts by model module, for benchmark_blocks().
BLOCKS: dict[str, tuple[str, ...]] = {"inception_v3": INCEPTION_V3_BLOCKS}
