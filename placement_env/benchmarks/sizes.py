"""Builder parameters of every benchmark, at paper scale and tiny, and the models' block layouts,
readable without TensorFlow.

Each model module takes its ``PAPER``/``TINY`` from here; the benchmark registry and the graph
cache read them without importing the builders (and TensorFlow).
"""
from __future__ import annotations

from typing import Any, Callable

RNNLM_PAPER: dict[str, Any] = {"batch": 64, "hidden": 2048, "vocab": 40000, "num_steps": 35, "num_layers": 2}

RNNLM_TINY: dict[str, Any] = {"batch": 4, "hidden": 16, "vocab": 50, "num_steps": 4, "num_layers": 2}

# The paper's RNNLM deepened to 8 layers over 105 unrolled steps: 50,808 ops, the scale at which the
# generalisation issue times the simulator (load it with max_groups=4000 for 860 groups).
RNNLM_DEEP: dict[str, Any] = {**RNNLM_PAPER, "num_steps": 105, "num_layers": 8}

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
    "layers": 2,  # encoder layers = decoder layers
}

NMT_TINY: dict[str, Any] = {"batch": 4, "hidden": 16, "src_vocab": 50, "tgt_vocab": 50, "src_len": 4, "tgt_len": 3,
                            "layers": 2}

# GNMT's published shape, 8 encoder + 8 decoder layers of 1,024 units with residual connections (Wu
# et al. 2016), with the batch of TensorFlow NMT's 8-layer GNMT recipe (128,
# standard_hparams/wmt16_gnmt_8_layer.json) and the paper's 40,000-word vocabularies. Sentences of
# 60 tokens a side (twice the paper's 30) give 67,639 ops and, with max_groups=4000, 1,139 groups:
# the scale at which the generalisation issue times the simulator (the recipe's longest training
# sentences, 50, give 56,429 ops but only 941 groups). In the simulator the expert's 4-GPU layer
# split fits paper-4gpu and k80-4gpu (10.4 GiB at most on a GPU) where one GPU needs 27.6 GiB.
NMT_DEEP: dict[str, Any] = {**NMT_PAPER, "batch": 128, "hidden": 1024, "src_len": 60, "tgt_len": 60, "layers": 8}

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


# The modern models at their published base configurations. Each batch is chosen so that one
# GPU of an older preset is out of memory in the simulator (grappler op costs) while a layer-wise
# split over several fits; the README's benchmark table gives the peaks.

# Transformer base; 128 sentence pairs of 128 tokens (16,384 tokens a side, two thirds of the
# paper's 25,000-token step): one GPU peaks at 18.1 GiB, out of memory on a K80 die and on a
# 16 GiB V100, while a 2-GPU layer split (9.5 + 8.8 GiB) fits the paper's K80 machine.
TRANSFORMER_PAPER: dict[str, Any] = {
    "batch": 128, "src_len": 128, "tgt_len": 128, "vocab": 37000,
    "d_model": 512, "heads": 8, "d_ff": 2048, "layers": 6, "dropout": 0.1,
}

TRANSFORMER_TINY: dict[str, Any] = {
    "batch": 2, "src_len": 6, "tgt_len": 5, "vocab": 50, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 2,
    "dropout": 0.1,
}

# GPT-2 small; 8 sequences of the full 1024-token context: 35.7 GiB on one GPU (only an 80 GiB
# H100 holds it), no 2-GPU layer split fits 16 GiB, a 4-GPU split on the V100 machine does.
GPT2_PAPER: dict[str, Any] = {
    "batch": 8, "context": 1024, "vocab": 50257, "d_model": 768, "heads": 12, "d_ff": 3072, "layers": 12,
    "dropout": 0.1,
}

GPT2_TINY: dict[str, Any] = {
    "batch": 2, "context": 8, "vocab": 50, "d_model": 16, "heads": 2, "d_ff": 64, "layers": 2, "dropout": 0.1,
}

# BERT-base pre-training at sequence 512; 16 sequences: 20.9 GiB on one GPU (BERT's README puts
# the most that fits a 12 GB GPU at 6 sequences of 512); a 2-GPU layer split takes 11.5 + 11.9
# GiB: it fits paper-2gpu's nominal 12 GiB K80 dies, not k80-2gpu's usable 10.5 GiB.
BERT_PAPER: dict[str, Any] = {
    "batch": 16, "seq_len": 512, "masked": 80, "vocab": 30522, "d_model": 768, "heads": 12, "d_ff": 3072,
    "layers": 12, "dropout": 0.1,
}

BERT_TINY: dict[str, Any] = {
    "batch": 2, "seq_len": 8, "masked": 2, "vocab": 50, "d_model": 16, "heads": 2, "d_ff": 64, "layers": 2,
    "dropout": 0.1,
}

# ResNet-50 at 224x224 with the published minibatch of 256 as one step (He et al. spread it over 8
# GPUs): 20.6 GiB on one GPU; most activation memory sits in the early, wide layers, so a 2-GPU
# split balanced by compute (16.5 + 5.0 GiB) is out of memory on 16 GiB V100s where one balanced
# by memory (12.4 + 10.1 GiB) fits.
RESNET50_PAPER: dict[str, Any] = {"image_size": 224, "batch": 256, "num_classes": 1000, "depth_multiplier": 1.0,
                                  "min_depth": 8}

RESNET50_TINY: dict[str, Any] = {"image_size": 32, "batch": 2, "num_classes": 10, "depth_multiplier": 0.125,
                                 "min_depth": 8}

# VGG-16 at 224x224 with the paper's minibatch of 256.
VGG16_PAPER: dict[str, Any] = {"image_size": 224, "batch": 256, "num_classes": 1000, "depth_multiplier": 1.0,
                               "min_depth": 8}

VGG16_TINY: dict[str, Any] = {"image_size": 32, "batch": 2, "num_classes": 10, "depth_multiplier": 0.125,
                              "min_depth": 8}


# MobileNetV2 at 224x224 with the paper's batch of 96 per worker (Sandler et al. 2018, section 6.1).
MOBILENET_V2_PAPER: dict[str, Any] = {"image_size": 224, "batch": 96, "num_classes": 1000, "depth_multiplier": 1.0,
                                      "min_depth": 8}

# TINY at 64x64: at 32x32 the last units run at 1x1 pixels, where an offset before their 3x3 depthwise convolution
# and batch norm is a constant that batch norm removes, so four batch-norm offsets would get no gradient.
MOBILENET_V2_TINY: dict[str, Any] = {"image_size": 64, "batch": 2, "num_classes": 10, "depth_multiplier": 0.125,
                                     "min_depth": 8}


# Random CNNs (random_cnn.py): 4 stages of 1-5 units each, widths 128 to 1024, 224x224 ImageNet, batch 256 (ResNet-50's).
RANDOM_CNN_PAPER: dict[str, Any] = {"seed": 0, "stages": 4, "units": 3, "width": 128, "image_size": 224, "batch": 256,
                                    "num_classes": 1000, "depth_multiplier": 1.0, "min_depth": 8}

RANDOM_CNN_TINY: dict[str, Any] = {"seed": 0, "stages": 4, "units": 3, "width": 64, "image_size": 32, "batch": 2,
                                   "num_classes": 10, "depth_multiplier": 0.125, "min_depth": 8}


# Random Transformers (random_transformer.py): None keeps the size the seed draws (the batch meets a drawn memory
# target); TINY keeps the seed's kind, norm, tying, activation, positions and dropout at tiny sizes.
RANDOM_TRANSFORMER_PAPER: dict[str, Any] = {"seed": 0, "batch": None, "layers": None, "d_model": None,
                                            "heads": None, "seq_len": None, "vocab": None}

RANDOM_TRANSFORMER_TINY: dict[str, Any] = {"seed": 0, "batch": 2, "layers": 2, "d_model": 16, "heads": 2,
                                           "seq_len": 8, "vocab": 50}

# Random RNNs (random_rnn.py): None keeps the size the seed draws (the batch meets a drawn memory target); TINY keeps
# the seed's kind, cell and attention at tiny sizes.
RANDOM_RNN_PAPER: dict[str, Any] = {"seed": 0, "batch": None, "layers": None, "units": None, "steps": None,
                                    "vocab": None}

RANDOM_RNN_TINY: dict[str, Any] = {"seed": 0, "batch": 2, "layers": 2, "units": 16, "steps": 4, "vocab": 50}

# MLP-Mixer B/16 (Tolstikhin et al. 2021, Table 1): 16x16 patches of 224x224 images, 12 layers of width 768, token
# MLP 384, channel MLP 3072, 1000 classes; batch 32, at which one K80 die (10.5 GiB) runs out of memory and two hold it.
MLP_MIXER_PAPER: dict[str, Any] = {"image_size": 224, "patch": 16, "batch": 32, "d_model": 768, "layers": 12,
                                   "token_mlp": 384, "channel_mlp": 3072, "num_classes": 1000}

MLP_MIXER_TINY: dict[str, Any] = {"image_size": 32, "patch": 8, "batch": 2, "d_model": 16, "layers": 2,
                                  "token_mlp": 8, "channel_mlp": 32, "num_classes": 10}

# DLRM at MLPerf's shape (dimension 128, bottom MLP 13-512-256-128, top MLP 1024-1024-512-256-1) over the 26
# categorical features of the Criteo Kaggle dataset at their row counts (as the DLRM reference's preprocessing counts
# them: 33.8 M rows, 16.1 GiB of float32 tables, more than one K80 die holds); batch 2,048.
CRITEO_KAGGLE_ROWS: tuple[int, ...] = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593,
                                       3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105,
                                       142572)
DLRM_PAPER: dict[str, Any] = {"batch": 2048, "dense_features": 13, "dim": 128, "table_rows": CRITEO_KAGGLE_ROWS,
                              "bottom_mlp": (512, 256, 128), "top_mlp": (1024, 1024, 512, 256, 1)}

DLRM_TINY: dict[str, Any] = {"batch": 4, "dense_features": 13, "dim": 8, "table_rows": (50, 20, 10, 5),
                             "bottom_mlp": (16, 8), "top_mlp": (16, 1)}

# "<model>-deep": larger variants for the simulator at scale.
DEEP: dict[str, dict[str, Any]] = {"rnnlm": RNNLM_DEEP, "nmt": NMT_DEEP}

PARAMS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "rnnlm": (RNNLM_PAPER, RNNLM_TINY),
    "nmt": (NMT_PAPER, NMT_TINY),
    "inception_v3": (INCEPTION_V3_PAPER, INCEPTION_V3_TINY),
    "transformer": (TRANSFORMER_PAPER, TRANSFORMER_TINY),
    "gpt2": (GPT2_PAPER, GPT2_TINY),
    "bert": (BERT_PAPER, BERT_TINY),
    "resnet50": (RESNET50_PAPER, RESNET50_TINY),
    "vgg16": (VGG16_PAPER, VGG16_TINY),
    "vgg16_bn": (VGG16_PAPER, VGG16_TINY),
    "mobilenet_v2": (MOBILENET_V2_PAPER, MOBILENET_V2_TINY),
    "mlp_mixer": (MLP_MIXER_PAPER, MLP_MIXER_TINY),
    "dlrm": (DLRM_PAPER, DLRM_TINY),
    "synthetic": (SYNTHETIC_PAPER, SYNTHETIC_TINY),
    "random_cnn": (RANDOM_CNN_PAPER, RANDOM_CNN_TINY),
    "random_transformer": (RANDOM_TRANSFORMER_PAPER, RANDOM_TRANSFORMER_TINY),
    "random_rnn": (RANDOM_RNN_PAPER, RANDOM_RNN_TINY),
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

# ResNet-50's stages: (scope, bottleneck units, bottleneck width); the output has 4 x width channels.
RESNET50_STAGES: tuple[tuple[str, int, int], ...] = (("block1", 3, 64), ("block2", 4, 128), ("block3", 6, 256),
                                                      ("block4", 3, 512))

# VGG-16's stages (configuration D): (3x3 convolutions, channels), each followed by a 2x2 max pool.
VGG16_STAGES: tuple[tuple[int, int], ...] = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))

# MobileNetV2's stages (Sandler et al. 2018, Table 2): (expansion t, output channels c, inverted residual units n,
# stride s of the first unit).
MOBILENET_V2_STAGES: tuple[tuple[int, int, int, int], ...] = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2),
                                                              (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                                                              (6, 320, 1, 1))


def _layers(prefix: str, p: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"{prefix}layer_{k}" for k in range(p["layers"]))


# Block layouts by model module, for benchmark_blocks(): the name scopes of a built graph's blocks
# in forward order, from its parameters (the attention models' layer count is a parameter).
BLOCKS: dict[str, Callable[[dict[str, Any]], tuple[str, ...]]] = {
    "inception_v3": lambda p: INCEPTION_V3_BLOCKS,
    "transformer": lambda p: ("inputs", "embedding", *_layers("encoder/", p), *_layers("decoder/", p),
                              "softmax", "loss"),
    "gpt2": lambda p: ("inputs", "embedding", *_layers("", p), "softmax", "loss"),
    "mlp_mixer": lambda p: ("inputs", "stem", *_layers("", p), "head", "loss"),
    "dlrm": lambda p: ("inputs", "bottom_mlp", *(f"table_{k}" for k in range(len(p["table_rows"]))), "interaction",
                       "top_mlp", "loss"),
    "bert": lambda p: ("inputs", "embeddings", *_layers("encoder/", p), "pooler", "masked_lm", "next_sentence",
                       "loss"),
    "resnet50": lambda p: ("inputs", "conv1", "pool1",
                           *(f"{stage}/unit_{u + 1}" for stage, units, _ in RESNET50_STAGES for u in range(units)),
                           "logits", "loss"),
    "vgg16": lambda p: ("inputs", *(f"conv{s + 1}" for s in range(len(VGG16_STAGES))), "fc6", "fc7", "fc8", "loss"),
}
BLOCKS["vgg16_bn"] = BLOCKS["vgg16"]
BLOCKS["mobilenet_v2"] = lambda p: ("inputs", "conv1",
                                    *(f"block{s + 1}/unit_{u + 1}"
                                      for s, (_, _, units, _) in enumerate(MOBILENET_V2_STAGES)
                                      for u in range(units)),
                                    "conv_last", "logits", "loss")
