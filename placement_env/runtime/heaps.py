"""The simulator's queues on plain arrays, compiled with numba.

``ev_*``: binary min-heaps of (key, value) pairs ordered by key, then value (events by time, then kind
and index; the processor-sharing devices' active ops by virtual finish time). Several heaps can share
one pair of arrays, each at its own ``base`` offset. Each push/pop takes the arrays, the base and the
current size and returns the new size, so the caller owns all memory.

``ready_*``: one set of integers per device (its ready ops and tasks), taken lowest first, as two-level
bitsets: a bit per integer (``bits0[d]``, 64 to a word) and a bit per non-empty word of it (``bits1[d]``),
with ``low[d]``, the first word of ``bits1[d]`` that may be non-empty. A push is O(1) and a pop scans
``bits1[d]`` from ``low[d]``; at 50,000 ops a device can hold thousands of ready ops, and a binary heap
of them cost a chain of dependent loads per pop.

In each function every array's last use is on the path every call takes (no early return, no last
write under an ``if``): numba counts references to the arrays a function takes, and its pruning
pass removes those counts only where each array's last use is on a single path. An early return in
``ev_pop`` and a conditional last write in each ready-set function left atomic increments and decrements
of the arrays' counts in the event loop, 10% of its time at 67,000 ops (docs/findings.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

_ONE = np.uint64(1)


@njit(cache=True, inline="always")
def ev_less(k1, v1, k2, v2):
    return k1 < k2 or (k1 == k2 and v1 < v2)


@njit(cache=True)
def ev_push(keys, vals, base, size, key, val):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if ev_less(key, val, keys[base + parent], vals[base + parent]):
            keys[base + i] = keys[base + parent]
            vals[base + i] = vals[base + parent]
            i = parent
        else:
            break
    keys[base + i] = key
    vals[base + i] = val
    return size + 1


@njit(cache=True)
def ev_pop(keys, vals, base, size):
    """Remove the root; returns the new size (caller read keys[base], vals[base] before)."""
    size -= 1
    key = keys[base + size]
    val = vals[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and ev_less(keys[base + child + 1], vals[base + child + 1], keys[base + child],
                                        vals[base + child]):
            child += 1
        if ev_less(keys[base + child], vals[base + child], key, val):
            keys[base + i] = keys[base + child]
            vals[base + i] = vals[base + child]
            i = child
        else:
            break
    keys[base + i] = key
    vals[base + i] = val
    return size


@njit(cache=True, inline="always")
def ready_push(bits0, bits1, low, size, d, x):
    """Add ``x`` (not in the set) to device ``d``'s set."""
    w = x >> 6
    bits0[d, w] |= _ONE << np.uint64(x & 63)
    w1 = w >> 6
    bits1[d, w1] |= _ONE << np.uint64(w & 63)
    low[d] = min(low[d], w1)
    size[d] += 1


@njit(cache=True, inline="always")
def ready_pop(bits0, bits1, low, size, d):
    """Remove and return the lowest integer of device ``d``'s set (not empty)."""
    w1 = low[d]
    while bits1[d, w1] == 0:
        w1 += 1
    low[d] = w1
    word1 = bits1[d, w1]
    w = (w1 << 6) + np.int64(trailing_zeros(word1))
    word0 = bits0[d, w]
    x = (w << 6) + np.int64(trailing_zeros(word0))
    word0 &= word0 - _ONE
    bits0[d, w] = word0
    bits1[d, w1] = word1 & (word1 - _ONE) if word0 == 0 else word1
    size[d] -= 1
    return x
