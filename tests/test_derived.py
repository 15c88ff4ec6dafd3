"""The derived-data cache: built once per owners and key, gone with its owners, closed when evicted."""
from __future__ import annotations

import gc

from placement_env.derived import DerivedCache


class Owner:
    pass


class Closable:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_builds_once_per_owners_and_key() -> None:
    cache, calls = DerivedCache(), []
    a, b = Owner(), Owner()

    def build(tag):
        calls.append(tag)
        return tag

    assert cache.get("k", a, b, build=lambda: build(1)) == 1
    assert cache.get("k", a, b, build=lambda: build(2)) == 1
    assert cache.get("k", b, a, build=lambda: build(3)) == 3  # owners are ordered
    assert cache.get("k", a, b, key="other", build=lambda: build(4)) == 4
    assert cache.get("other kind", a, b, build=lambda: build(5)) == 5
    assert calls == [1, 3, 4, 5]


def test_entries_go_with_their_owners() -> None:
    cache = DerivedCache()
    owner = Owner()
    cache.get("k", owner, build=lambda: "value")
    assert cache.values("k") == ["value"]
    del owner
    gc.collect()
    assert cache.values("k") == []


def test_least_recently_used_entry_is_evicted_and_closed() -> None:
    cache = DerivedCache(max_entries=2)
    first, second, third = Closable(), Closable(), Closable()
    cache.get("k", key=1, build=lambda: first)
    cache.get("k", key=2, build=lambda: second)
    cache.get("k", key=1, build=lambda: None)  # 1 is now the most recent
    cache.get("k", key=3, build=lambda: third)
    assert second.closed and not first.closed and not third.closed
    assert cache.values("k") == [first, third]
