"""Builders of the benchmark training steps, in TF1-style graph mode.

Each module exposes ``PAPER`` and ``TINY`` parameter dicts and ``build(**params) -> TrainingStep``.
The graphs are self-contained: inputs are generated in-graph by random ops, variables live in the
graph, and one run of ``train_op`` (after ``init_op``) is one full training step (forward, backward,
momentum update). Gradients are built with ``colocate_gradients_with_ops=True`` so TF writes the
``_class`` co-location attributes the grouping honours.
"""
