"""Where placement_env keeps what it builds once (graphs, op costs): one directory for all caches."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$PLACEMENT_ENV_CACHE``, else ``placement_env`` under the user's cache directory."""
    if "PLACEMENT_ENV_CACHE" in os.environ:
        return Path(os.environ["PLACEMENT_ENV_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "placement_env"
