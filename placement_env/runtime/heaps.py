"""Binary min-heaps on plain arrays, compiled with numba: the simulator's event queue and ready lists.

``ev_*``: a heap of (key, value) pairs ordered by key, then value (events by time, then kind and
index). ``int_*``: a heap of integers (ready ops by index). Each push/pop takes the arrays and the
current size and returns the new size, so the caller owns all memory.
"""
from __future__ import annotations

from numba import njit



@njit(cache=True, inline="always")
def ev_less(k1, v1, k2, v2):
    return k1 < k2 or (k1 == k2 and v1 < v2)


@njit(cache=True)
def ev_push(keys, vals, size, key, val):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if ev_less(key, val, keys[parent], vals[parent]):
            keys[i] = keys[parent]
            vals[i] = vals[parent]
            i = parent
        else:
            break
    keys[i] = key
    vals[i] = val
    return size + 1


@njit(cache=True)
def ev_pop(keys, vals, size):
    """Remove the root; returns the new size (caller read keys[0], vals[0] before)."""
    size -= 1
    if size == 0:
        return 0
    key = keys[size]
    val = vals[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and ev_less(keys[child + 1], vals[child + 1], keys[child], vals[child]):
            child += 1
        if ev_less(keys[child], vals[child], key, val):
            keys[i] = keys[child]
            vals[i] = vals[child]
            i = child
        else:
            break
    keys[i] = key
    vals[i] = val
    return size


@njit(cache=True)
def int_push(heap, size, val):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if val < heap[parent]:
            heap[i] = heap[parent]
            i = parent
        else:
            break
    heap[i] = val
    return size + 1


@njit(cache=True)
def int_pop(heap, size):
    size -= 1
    if size == 0:
        return 0
    val = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] < val:
            heap[i] = heap[child]
            i = child
        else:
            break
    heap[i] = val
    return size
