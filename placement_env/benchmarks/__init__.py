"""The benchmark graphs: a registry by name (``load_benchmark``) and the TF code that builds them.

``registry`` resolves a name (``rnnlm``, ``nmt``, ``inception_v3``, ``transformer``, ``gpt2``,
``bert``, ``resnet50``, ``vgg16``, ``vgg16_bn``, ``mobilenet_v2``, ``mlp_mixer``, ``dlrm``, their ``-tiny`` variants,
``rnnlm-deep``, ``nmt-deep``, ``<model>-batch<N>``, ``synthetic:<seed>``, ``random_cnn:<seed>``,
``random_transformer:<seed>``, ``random_rnn:<seed>``),
builds the graph once
and caches it on disk. The other modules are the builders, in TF1-style graph mode: each exposes
``PAPER`` and ``TINY`` parameter dicts and ``build(**params) -> TrainingStep``. The graphs are
self-contained: inputs are generated in-graph by random ops, variables live in the graph, and one
run of ``train_op`` (after ``init_op``) is one full training step (forward, backward, momentum
update). Gradients are built with ``colocate_gradients_with_ops=True`` so TF writes the ``_class``
co-location attributes the grouping honours. Importing this package does not import TensorFlow;
building a graph does.
"""
from __future__ import annotations

from .registry import BUILDER_VERSION, EXTRA_MODELS, MODERN_MODELS, PAPER_MODELS, benchmark_blocks, benchmark_names, load_benchmark

__all__ = ["BUILDER_VERSION", "EXTRA_MODELS", "MODERN_MODELS", "PAPER_MODELS", "benchmark_blocks", "benchmark_names",
           "load_benchmark"]
