"""Disjoint sets over 0..n-1, and group numbering by first member."""
from __future__ import annotations

import numpy as np


def renumber_by_first(labels: np.ndarray) -> np.ndarray:
    """Relabel ``labels`` to 0..k-1 in order of each label's first position (int32)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty_like(first)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse].astype(np.int32)


class UnionFind:
    """Union by smaller root index, with path compression: roots are each set's first element."""

    def __init__(self, initial: np.ndarray | int):
        if isinstance(initial, (int, np.integer)):
            self.parent = list(range(int(initial)))
        else:  # start from existing labels: every member points at its label's first element
            labels = np.asarray(initial)
            _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
            self.parent = first[inverse].tolist()

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, i: int, j: int) -> int:
        a, b = self.find(i), self.find(j)
        root = min(a, b)
        self.parent[max(a, b)] = root
        return root

    def labels(self) -> np.ndarray:
        """Set of each element, numbered 0.. in order of each set's first element."""
        return renumber_by_first(np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64))
