"""A transfer-aware decoding of the placer's device probabilities, without evaluating anything: :func:`smooth`.

The network chooses each group's device independently given the encoding (GDP's one-shot decoding), so nothing in
its greedy placement charges a group for the tensors it exchanges with neighbours on other devices, and it may
change device many times along a chain (docs/findings.md). :func:`smooth` decodes
with a pairwise term added: a placement's energy is the sum over groups of minus the log-probability of the group's
device, plus ``weight`` times the time, over the step's lower bound, that each group-graph edge whose ends are on
different devices takes on their link (its bytes at the link's bandwidth, the link's latency and the cost per
cross-device tensor). It is minimised by iterated conditional modes from the greedy placement: each group in turn
takes the allowed device of least energy given the others' devices, until a sweep changes none. That ends at a
local minimum near the network's answer: a large weight removes isolated device changes, but moving a group out
of a block costs more than it saves, so the groups are not gathered onto one device.

``TRANSFER_PRIOR_WEIGHT`` was chosen on the validation split (``python -m experiments.transfer_prior``): most
placements within 15% of the best heuristic, then the lowest geometric mean.
"""
from __future__ import annotations

import numpy as np

from placement_env import Problem, group_graph

TRANSFER_PRIOR_WEIGHT = 1e7  # chosen on the validation split (docs/findings.md)
MAX_SWEEPS = 50  # a bound only: every sweep that changes a device lowers the energy


def smooth(problem: Problem, placement: np.ndarray, log_probs: np.ndarray,
           weight: float = TRANSFER_PRIOR_WEIGHT) -> np.ndarray:
    """``placement`` (device per group) moved by iterated conditional modes to a local minimum of minus the
    log-probabilities ``log_probs`` [n_groups, n_devices] (-inf where a device is not allowed) plus ``weight`` x
    the cross-device edges' link time over the lower bound. ``weight`` 0 returns the placement unchanged."""
    if not weight >= 0:
        raise ValueError(f"weight = {weight!r}: must be a number >= 0")
    placement = np.array(placement, np.int64)
    if weight == 0:
        return placement
    cluster = problem.cluster
    scale = weight / problem.lower_bound()
    per_byte = scale / cluster.bandwidth  # 0 on the diagonal, whose bandwidth is infinite
    fixed = (cluster.latency + cluster.transfer_overhead_s) * scale
    np.fill_diagonal(fixed, 0.0)  # no cost between a device and itself
    groups = group_graph(problem.graph, cluster, problem.costs)
    src, dst, volume = groups.src, groups.dst, groups.bytes
    n = problem.graph.n_groups
    # each group's edges both ways: out-edges (the group sends) and in-edges (it receives), by group
    out_order, in_order = np.argsort(src, kind="stable"), np.argsort(dst, kind="stable")
    out_ptr = np.searchsorted(src[out_order], np.arange(n + 1))
    in_ptr = np.searchsorted(dst[in_order], np.arange(n + 1))
    receivers, sent = dst[out_order], volume[out_order].astype(np.float64)
    senders, received = src[in_order], volume[in_order].astype(np.float64)
    unary = np.where(np.isfinite(log_probs), -log_probs, np.inf)
    for _ in range(MAX_SWEEPS):
        changed = False
        for g in range(n):
            there = placement[receivers[out_ptr[g]:out_ptr[g + 1]]]
            here = placement[senders[in_ptr[g]:in_ptr[g + 1]]]
            energy = (unary[g] + per_byte[:, there] @ sent[out_ptr[g]:out_ptr[g + 1]] + fixed[:, there].sum(axis=1)
                      + received[in_ptr[g]:in_ptr[g + 1]] @ per_byte[here, :] + fixed[here, :].sum(axis=0))
            best = int(np.argmin(energy))
            if energy[best] < energy[placement[g]]:
                placement[g] = best
                changed = True
        if not changed:
            break
    return placement
