"""How many threads torch runs the agents on.

A seeded run's float sums, so what it learns, depend on torch's thread count, and torch's default is
one thread per core: the same seed would give another run on a machine with another number of cores
(the seq2seq agent on NMT / 2 GPUs, seed 0: one thread and two part at the 6th update). So the harness
adapters run on :data:`HARNESS_THREADS`, and the command lines take ``--threads``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

# What docs/*_results.jsonl were made with (torch's default on the 2-core machine that ran them): their
# agent rows reproduce with two threads (rnnlm-2gpu at 1,000 evaluations, seeds 0-2: every seq2seq and
# A2C placement), and not all of them with one.
HARNESS_THREADS = 2


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch on ``threads`` threads inside (or in the function it decorates), back as it was after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
