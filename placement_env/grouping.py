"""Co-location groups: the units an agent places.

Three stages, each keeping the ones before intact:

1. Hard constraints (computed at import into ``OpGraph.colocation``): TF's ``_class`` loc:@
   attributes and resource/reference edges. Ops of one component always share a group.
2. The paper's heuristics: an op whose output has exactly one consumer joins that consumer, and
   a source op (no inputs: constants, random inputs, variables' handles) joins its first consumer.
   A merge never mixes device kinds and never makes a group heavier than the average group of
   the target count, so gradient chains do not snowball into one giant group.
3. Coarsening to at most ``max_groups``: groups with next to no compute (NoOps, constants) fold
   into the neighbour they exchange the most bytes with; then rounds of heavy-edge matching on the group graph (merge
   each group with the unmatched neighbour it exchanges the most bytes with, lightest groups
   first), under a weight cap that doubles when a round cannot merge.

Group weights are the ops' estimated FLOPs. Weights say nothing of memory, so stages 2 and 3 never merge two
groups that each hold more than ``LARGE_VARIABLES`` bytes of variables: an embedding table costs next to no FLOPs,
and DLRM's 26 tables (16 GiB) would otherwise all join the op that stacks their rows, one group no GPU can hold.
(The last-resort pairing of stage 3, for when no edge can merge, ignores this, so that coarsening always ends.)
Everything is deterministic: ties break by index.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .opgraph import OpGraph
from .unionfind import UnionFind, renumber_by_first

DEFAULT_MAX_GROUPS = 256  # TF's hierarchical placer used min(256, 20 x #devices)
TINY_SHARE = 0.02  # a group under this share of the average weight is folded into a neighbour
# Variables past this size are a placement decision of their own: a tenth of a K80 die's memory, a sixteenth of a
# 16 GiB V100's. An absolute size rather than a share of the graph's: a small graph's variables fit anywhere and need
# no group of their own. (Of the registered benchmarks only DLRM has groups this large.)
LARGE_VARIABLES = 2**30


def group_ops(graph: OpGraph, max_groups: int = DEFAULT_MAX_GROUPS) -> OpGraph:
    """Return ``graph`` with ops grouped into at most ``max_groups`` co-location groups."""
    if isinstance(max_groups, bool) or not isinstance(max_groups, (int, np.integer)) or max_groups < 1:
        raise ValueError(f"max_groups={max_groups!r}: must be a positive integer (the paper used a few hundred)")
    weight = np.asarray(graph.flops, dtype=np.float64)
    cap = max(weight.sum() / max_groups, 1.0)
    held = np.asarray(graph.persistent_bytes, dtype=np.float64)  # bytes of variables per op
    labels = _heuristic_merges(graph, weight, cap, held)
    hard_groups = int(graph.colocation.max()) + 1 if graph.n_ops else 0
    heuristic_groups = int(labels.max()) + 1 if graph.n_ops else 0
    labels = _coarsen(graph, labels, weight, max_groups, cap, held)
    return graph.with_groups(
        labels,
        grouping={
            "max_groups": int(max_groups),
            "colocation_components": hard_groups,
            "after_heuristics": heuristic_groups,
        },
    )


def _heuristic_merges(graph: OpGraph, weight: np.ndarray, cap: float, held: np.ndarray) -> np.ndarray:
    sets = UnionFind(graph.colocation)
    roots = np.array(sets.parent, dtype=np.int64)  # every op points at its component's first op
    root_weight = np.bincount(roots, weights=weight, minlength=graph.n_ops).tolist()
    root_held = np.bincount(roots, weights=held, minlength=graph.n_ops).tolist()
    masks = np.full(graph.n_ops, 0b11, dtype=np.uint8)
    np.bitwise_and.at(masks, roots, graph.device_mask)
    root_mask = masks.tolist()

    def merge(a: int, b: int) -> None:
        ra, rb = sets.find(a), sets.find(b)
        if ra == rb or root_mask[ra] != root_mask[rb] or root_weight[ra] + root_weight[rb] > cap \
                or min(root_held[ra], root_held[rb]) > LARGE_VARIABLES:
            return
        root = sets.union(ra, rb)
        root_weight[root] = root_weight[ra] + root_weight[rb]
        root_held[root] = root_held[ra] + root_held[rb]
        root_mask[root] = root_mask[ra]

    data = ~graph.is_control_edge
    consumers = _consumers_by_producer(graph.n_ops, graph.edge_src[data], graph.edge_dst[data])
    has_inputs = np.zeros(graph.n_ops, dtype=bool)
    has_inputs[graph.edge_dst] = True
    for op in range(graph.n_ops):
        targets = consumers[op]
        if len(targets) == 1 or (not has_inputs[op] and len(targets) > 0):
            merge(op, targets[0])
    return sets.labels()


def _consumers_by_producer(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Distinct consumers of each op, in ascending order."""
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0) if len(src) else np.zeros((0, 2), dtype=np.int64)
    result: list[list[int]] = [[] for _ in range(n)]
    for s, d in pairs.tolist():
        result[s].append(d)
    return result


def _coarsen(graph: OpGraph, labels: np.ndarray, weight: np.ndarray, max_groups: int, cap: float,
             held: np.ndarray) -> np.ndarray:
    total = float(weight.sum())
    if labels.max() + 1 > max_groups:
        labels = _absorb_tiny_groups(graph, labels, weight, TINY_SHARE * cap, held)
    cap *= 2
    while labels.max() + 1 > max_groups:
        k = int(labels.max()) + 1
        partner = _match_heavy_edges(graph, labels, weight, k, k - max_groups, cap, held)
        if partner is None:
            if cap <= total:
                cap *= 2
                continue
            partner = _match_in_order(graph, labels, k, k - max_groups)
        labels = renumber_by_first(partner[labels])
    return labels


def _group_adjacency(graph: OpGraph, labels: np.ndarray, k: int) -> sp.csr_matrix:
    """Symmetric group-by-group matrix of bytes exchanged (+1 per edge, so control edges count)."""
    src, dst = labels[graph.edge_src], labels[graph.edge_dst]
    cross = src != dst
    traffic = graph.edge_bytes[cross].astype(np.float64) + 1.0
    rows = np.concatenate([src[cross], dst[cross]])
    cols = np.concatenate([dst[cross], src[cross]])
    adjacency = sp.coo_matrix((np.concatenate([traffic, traffic]), (rows, cols)), shape=(k, k)).tocsr()
    adjacency.sum_duplicates()
    return adjacency


def _absorb_tiny_groups(graph: OpGraph, labels: np.ndarray, weight: np.ndarray, tiny: float,
                        held: np.ndarray) -> np.ndarray:
    """Each group lighter than ``tiny`` joins its same-kind neighbour with the most traffic, unless both
    hold more than ``LARGE_VARIABLES`` bytes of variables (counting what has joined each so far).

    Every tiny group links to one neighbour, so the links form trees with at most one heavy
    group each: two heavy groups are never merged through a tiny one.
    """
    k = int(labels.max()) + 1
    group_weight = np.bincount(labels, weights=weight, minlength=k)
    set_held = np.bincount(labels, weights=held, minlength=k)
    mask = _group_masks(graph, labels, k)
    adjacency = _group_adjacency(graph, labels, k)
    sets = UnionFind(k)
    for g in np.flatnonzero(group_weight <= tiny).tolist():
        lo, hi = adjacency.indptr[g], adjacency.indptr[g + 1]
        neighbours, traffic = adjacency.indices[lo:hi], adjacency.data[lo:hi]
        same_kind = mask[neighbours] == mask[g]
        if same_kind.any():
            neighbours, traffic = neighbours[same_kind], traffic[same_kind]
            a, b = sets.find(g), sets.find(int(neighbours[np.lexsort((neighbours, -traffic))[0]]))
            if a != b and min(set_held[a], set_held[b]) <= LARGE_VARIABLES:
                set_held[sets.union(a, b)] = set_held[a] + set_held[b]
    return renumber_by_first(sets.labels()[labels])


def _group_masks(graph: OpGraph, labels: np.ndarray, k: int) -> np.ndarray:
    mask = np.full(k, 0b11, dtype=np.uint8)
    np.bitwise_and.at(mask, labels, graph.device_mask)
    return mask


def _match_heavy_edges(graph, labels, weight, k, wanted, cap, held) -> np.ndarray | None:
    """One matching round; returns each group's new representative, or None if nothing merged. Two groups that
    each hold more than ``LARGE_VARIABLES`` bytes of variables are never matched."""
    group_weight = np.bincount(labels, weights=weight, minlength=k)
    big = np.bincount(labels, weights=held, minlength=k) > LARGE_VARIABLES
    mask = _group_masks(graph, labels, k)
    adjacency = _group_adjacency(graph, labels, k)
    partner = np.arange(k)
    used = np.zeros(k, dtype=bool)
    merges = 0
    for g in np.lexsort((np.arange(k), group_weight)).tolist():
        if used[g]:
            continue
        lo, hi = adjacency.indptr[g], adjacency.indptr[g + 1]
        neighbours, traffic = adjacency.indices[lo:hi], adjacency.data[lo:hi]
        ok = ~used[neighbours] & (mask[neighbours] == mask[g]) & (group_weight[neighbours] + group_weight[g] <= cap) \
            & ~(big[neighbours] & big[g])
        if not ok.any():
            continue
        neighbours, traffic = neighbours[ok], traffic[ok]
        best = neighbours[np.lexsort((neighbours, group_weight[neighbours], -traffic))[0]]
        used[g] = used[best] = True
        partner[best] = g
        merges += 1
        if merges == wanted:
            break
    return partner if merges else None


def _match_in_order(graph, labels, k, wanted) -> np.ndarray:
    """Fallback when no edge can merge: pair consecutive groups of equal device kinds."""
    mask = _group_masks(graph, labels, k)
    partner = np.arange(k)
    merges = 0
    last_of_mask: dict[int, int] = {}
    for g in range(k):
        m = int(mask[g])
        if m in last_of_mask:
            partner[g] = last_of_mask.pop(m)
            merges += 1
            if merges == wanted:
                return partner
        else:
            last_of_mask[m] = g
    if merges == 0:  # one group per device-kind set and still too many: merge across kinds
        partner[1] = 0
    return partner
