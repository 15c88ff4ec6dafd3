"""VGG-16 with batch norm: :mod:`placement_env.benchmarks.vgg16` (configuration D, the same sizes and blocks) with
batch norm in training mode, learned scale and offset, between each of the 13 convolutions and its ReLU in place of
the convolution's bias, as torchvision's ``vgg16_bn``. A sequential CNN whose groups hold the same kinds of ops as
ResNet-50's and Inception-V3's (convolutions, fused batch norm, ReLU).

Parameters: 138.4 M (138,361,768: VGG-16's, less the 13 convolution biases, plus a scale and an offset per
convolution channel).
"""
from __future__ import annotations

from . import common
from .vgg16 import BLOCKS, MIN_IMAGE_SIZE, PAPER, STAGES, TINY, build_vgg

__all__ = ["PAPER", "TINY", "STAGES", "BLOCKS", "MIN_IMAGE_SIZE", "build"]


def build(**params) -> common.TrainingStep:
    """One VGG-16-BN training step on random images and labels; keyword parameters default to :data:`PAPER`."""
    return build_vgg("vgg16_bn", True, params)
