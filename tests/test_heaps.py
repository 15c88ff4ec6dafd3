"""The simulator's queues against Python's heapq: the same order under interleaved pushes and pops."""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from placement_env.runtime.heaps import ev_pop, ev_push, ready_pop, ready_push


@njit(cache=True)
def _ready_run(ops, values, n_dev, universe):
    """Apply (device, value) pushes (op 1) and device pops (op 0); return the popped values in order."""
    n_words = (universe + 63) >> 6
    bits0 = np.zeros((n_dev, n_words), np.uint64)
    bits1 = np.zeros((n_dev, (n_words + 63) >> 6), np.uint64)
    low = np.full(n_dev, bits1.shape[1], np.int64)
    size = np.zeros(n_dev, np.int64)
    out = np.full(ops.shape[0], -1, np.int64)
    for t in range(ops.shape[0]):
        d = values[t, 0]
        if ops[t] == 1:
            ready_push(bits0, bits1, low, size, d, values[t, 1])
        elif size[d] > 0:
            out[t] = ready_pop(bits0, bits1, low, size, d)
    return out


def test_ready_sets_pop_lowest_first_per_device():
    rng = np.random.default_rng(0)
    n_dev, universe, steps = 3, 10_000, 20_000
    sets: list[list[int]] = [[] for _ in range(n_dev)]
    present = [set() for _ in range(n_dev)]
    ops = np.zeros(steps, np.int64)
    values = np.zeros((steps, 2), np.int64)
    expected = np.full(steps, -1, np.int64)
    for t in range(steps):
        d = int(rng.integers(n_dev))
        values[t, 0] = d
        if rng.random() < 0.55:
            x = int(rng.integers(universe))
            while x in present[d]:
                x = int(rng.integers(universe))
            ops[t], values[t, 1] = 1, x
            present[d].add(x)
            heapq.heappush(sets[d], x)
        elif sets[d]:
            expected[t] = heapq.heappop(sets[d])
            present[d].discard(int(expected[t]))
    assert np.array_equal(_ready_run(ops, values, n_dev, universe), expected)


@njit(cache=True)
def _two_heaps(keys_in, vals_in, which, capacity):
    """Push every (key, value) onto heap ``which`` (0 or 1, sharing arrays at bases 0 and capacity), then
    pop both heaps empty; returns the values popped from heap 0, then heap 1."""
    keys = np.empty(2 * capacity)
    vals = np.empty(2 * capacity, np.int64)
    sizes = np.zeros(2, np.int64)
    for t in range(keys_in.shape[0]):
        h = which[t]
        sizes[h] = ev_push(keys, vals, h * capacity, sizes[h], keys_in[t], vals_in[t])
    out = np.empty(keys_in.shape[0], np.int64)
    n = 0
    for h in range(2):
        while sizes[h] > 0:
            out[n] = vals[h * capacity]
            n += 1
            sizes[h] = ev_pop(keys, vals, h * capacity, sizes[h])
    return out


def test_event_heaps_at_offsets_order_by_key_then_value():
    rng = np.random.default_rng(1)
    n = 2_000
    keys = rng.integers(0, 50, n).astype(np.float64)  # many equal keys: the value breaks ties
    vals = rng.permutation(n).astype(np.int64)
    which = rng.integers(0, 2, n)
    expected = [v for h in (0, 1) for _, v in sorted((keys[t], vals[t]) for t in range(n) if which[t] == h)]
    assert _two_heaps(keys, vals, which, n).tolist() == expected
