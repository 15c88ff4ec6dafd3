"""Local moves around the best placement so far, guided by a policy: what both agents' fine-tuning spends a few
of each update's evaluations on (the seq2seq agent's ``--local-moves``, the GNN placer's ``Config.local_moves``).

A move changes 1-4 groups of the best placement (1 half the time, each more half as often). Half of a group's
chance to move is the policy's doubt about the best's device there (1 - p), half is uniform over the groups
that can move; the new device is drawn half from the policy, half uniformly from the group's other allowed
devices. A placement already tried around the same best is drawn again (up to 8 times).
"""
from __future__ import annotations

import numpy as np
import torch

MOVE_SIZES = torch.tensor([8.0, 4.0, 2.0, 1.0])  # relative odds that a local move changes 1, 2, 3 or 4 groups
REDRAWS = 8


class LocalMoves:
    """The moves' generator and the placements tried around the current best (reset when the best changes)."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator
        self.moved_from: np.ndarray | None = None  # the best placement the moves in self.tried were made from
        self.tried: set[bytes] = set()

    def __call__(self, best: np.ndarray, probs: np.ndarray, allowed: np.ndarray, count: int) -> np.ndarray:
        """[count, n] int64: ``best`` [n] with a few groups moved. ``probs`` [n, D]: the policy's probability of
        each device for each group along ``best``; ``allowed`` [n, D] bool."""
        best = np.asarray(best, np.int64)
        if not np.array_equal(best, self.moved_from):
            self.moved_from, self.tried = best.copy(), set()
        others = np.asarray(allowed, bool).copy()
        others[np.arange(len(best)), best] = False
        movable = others.any(axis=1)
        probs = probs * others  # the policy's weight on each other device
        doubt = probs.sum(axis=1)
        weights = movable * (0.5 * doubt / max(doubt.sum(), 1e-12) + 0.5 / max(movable.sum(), 1))
        device_weights = 0.5 * probs / np.maximum(doubt, 1e-12)[:, None] + \
            0.5 * others / np.maximum(others.sum(axis=1), 1)[:, None]
        out = np.repeat(best[None], count, axis=0)
        if not movable.any():
            return out
        weights_t = torch.as_tensor(weights, dtype=torch.float64)
        device_weights_t = torch.as_tensor(device_weights, dtype=torch.float64)
        for row in out:
            for _ in range(REDRAWS):
                size = int(torch.multinomial(MOVE_SIZES, 1, generator=self.generator)) + 1
                groups = torch.multinomial(weights_t, min(size, int(movable.sum())), generator=self.generator)
                row[:] = best
                row[groups.numpy()] = torch.multinomial(device_weights_t[groups], 1,
                                                        generator=self.generator).squeeze(1).numpy()
                if row.tobytes() not in self.tried:
                    break
            self.tried.add(row.tobytes())
        return out
