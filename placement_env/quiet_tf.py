"""Import TensorFlow without its native start-up notices on the terminal.

TensorFlow's C++ side writes informational lines to file descriptor 2 when it loads (oneDNN's
numerics notice, the CPU-feature notice, absl's "before InitializeLog" warning), and
``TF_CPP_MIN_LOG_LEVEL`` no longer silences all of them. The command lines call
:func:`import_tensorflow_quietly` before their progress bars, so a user's first screen is the
program's own output; any real error during the import is still raised as usual.
:func:`tensorflow_version` reads the version for cache keys without the import.
"""
from __future__ import annotations

import functools
import os
import sys
from importlib import metadata
from types import ModuleType


def import_tensorflow_quietly() -> ModuleType:
    """``import tensorflow`` with file descriptor 2 pointed at /dev/null for the duration, unless the user's
    ``TF_CPP_MIN_LOG_LEVEL`` asks for TensorFlow's informational lines (0 or 1)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    if os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2") in ("0", "1"):
        import tensorflow

        return tensorflow
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            import tensorflow
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return tensorflow


@functools.cache  # read once per process: every graph and cost cache lookup asks for it
def tensorflow_version() -> str:
    """The installed TensorFlow's version, read from its package metadata without importing it (which takes
    seconds); imported only where no distribution of it is found."""
    for distribution in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return import_tensorflow_quietly().__version__
