"""The one in-memory cache of data derived from a (graph, cluster, ...) combination.

Op costs, simulation plans, prepared grappler items and the workers of ``pe.evaluate(...,
"measured")`` are expensive to build and cheap to reuse. They are kept here, not in per-module
dictionaries: an entry is keyed by what it was derived *for* (the owners, by identity, held
weakly) and what it was derived *with* (a hashable value), and it disappears with any of its
owners. OpGraph compares by value and is unhashable, so identity is the key.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 64  # least recently used entries go first beyond this (closed if they have close())


class DerivedCache:
    """``get(kind, *owners, key=..., build=...)``: ``build()`` once per (kind, owners, key)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[tuple, tuple[tuple[weakref.ref, ...], Any]] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.RLock()

    def get(self, kind: str, *owners: Any, key: Hashable = (), build: Callable[[], T]) -> T:
        index = (kind, tuple(id(owner) for owner in owners), key)
        with self._lock:
            entry = self._entries.get(index)
            if entry is not None and all(ref() is owner for ref, owner in zip(entry[0], owners)):
                self._entries.move_to_end(index)
                return entry[1]
        value = build()
        with self._lock:
            refs = tuple(weakref.ref(owner, lambda _, index=index: self._forget(index)) for owner in owners)
            self._entries[index] = (refs, value)
            evicted = [self._entries.popitem(last=False)[1][1]
                       for _ in range(len(self._entries) - self._max_entries)]
        for old in evicted:  # e.g. a measured runtime's workers: stop them rather than orphan them
            close = getattr(old, "close", None)
            if callable(close):
                close()
        return value

    def _forget(self, index: tuple) -> None:
        with self._lock:
            self._entries.pop(index, None)

    def clear(self, kind: str | None = None) -> None:
        """Drop every entry (of ``kind``, if given)."""
        with self._lock:
            for index in [i for i in self._entries if kind is None or i[0] == kind]:
                del self._entries[index]

    def values(self, kind: str) -> list[Any]:
        """The cached values of ``kind`` (e.g. to close measured runtimes)."""
        with self._lock:
            return [value for index, (_, value) in self._entries.items() if index[0] == kind]


DERIVED = DerivedCache()
