"""Keeps numba's on-disk cache of the simulator consistent with its source.

numba caches each ``@njit(cache=True)`` function under its own module's source stamp (modification
time and size) and does not notice when a module it calls changes: after ``git pull`` or an edit that
touches only ``simulator_core.py``, ``simulate_many`` (in ``simulator_batch.py``) would keep running
the old core from its cache, and batches would silently disagree with single simulations.
:func:`drop_stale_caches`, run before the simulator modules are imported, hashes the sources of every
compiled module together and deletes their cache files (``__pycache__/<module>.*.nbi`` and ``.nbc``,
numba's location next to a writable source tree) when the hash differs from the one stored there.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

# the modules with compiled functions, each calling only the ones before it
COMPILED_MODULES = ("heaps", "simulator_events", "simulator_core", "simulator_batch")
STAMP = "placement_env_compiled_sources.sha256"


def sources_digest(directory: Path) -> str:
    """The SHA-256 of the compiled modules' sources, in ``COMPILED_MODULES`` order."""
    digest = hashlib.sha256()
    for module in COMPILED_MODULES:
        digest.update((directory / f"{module}.py").read_bytes())
    return digest.hexdigest()


def drop_stale_caches(directory: Path = Path(__file__).resolve().parent) -> bool:
    """Delete the compiled modules' numba cache files in ``directory/__pycache__`` if the sources changed
    since they were written; whether any were deleted. A cache directory that cannot be written is left
    alone (numba then keeps its cache elsewhere, written from one installed version)."""
    cache = directory / "__pycache__"
    stamp = cache / STAMP
    digest = sources_digest(directory)
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    dropped = False
    try:
        cache.mkdir(exist_ok=True)
        for module in COMPILED_MODULES:
            for path in (*cache.glob(f"{module}.*.nbi"), *cache.glob(f"{module}.*.nbc")):
                path.unlink(missing_ok=True)
                dropped = True
        stamp.write_text(digest)
    except OSError:
        return dropped
    return dropped
