"""The host transfer's bandwidth from a link microbenchmark on real workers.

``placement-env linkbench`` (:mod:`.link_bench`) measures one worker sending one large tensor (megabytes) to
another against the same step on one worker. Under the host-transfer model
(:mod:`placement_env.cluster.host_transfer`) the extra time of such a step is the sender's
encoding, then the link's wait, then the receiver's decoding, so its growth per byte is
``2 / bandwidth``: the least-squares slope over the one-destination rows gives the bandwidth.
Large tensors measure it cleanly; in whole graphs bytes and tensor counts grow together, and a fit
to step times alone cannot tell them apart. :func:`host_bandwidth_from_files` reads the
microbenchmark's result files (``-o``) and gives that bandwidth.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LinkRunsError

__all__ = ["host_bandwidth_from_files", "host_bandwidth_from_links", "read_link_runs"]

_ROW_KEYS = ("bytes", "destinations", "measured_s", "one_worker_s")
_EXPECTED = ('expected the JSON that "placement-env linkbench -o FILE" writes: '
             '{"rows": [{"bytes", "destinations", "measured_s", "one_worker_s"}, ...]}')


def host_bandwidth_from_links(rows: Iterable[Mapping[str, Any]]) -> float:
    """Bytes/s of one end of a host transfer, from link microbenchmark rows (``bytes``,
    ``destinations``, ``measured_s``, ``one_worker_s``); only the one-destination rows count."""
    ones = [r for r in rows if r["destinations"] == 1]
    sizes = {float(r["bytes"]) for r in ones}
    if len(sizes) < 2:
        raise ValueError(f"need one-destination rows of at least two tensor sizes; got sizes {sorted(sizes)}")
    x = np.array([float(r["bytes"]) for r in ones])
    y = np.array([float(r["measured_s"]) - float(r["one_worker_s"]) for r in ones])
    slope = float(np.polyfit(x, y, 1)[0])
    if not slope > 0:
        raise ValueError(f"the extra time of a transfer does not grow with its size (slope {slope:.3g} s/byte): "
                         "these measurements cannot give a bandwidth")
    return 2.0 / slope


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def read_link_runs(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The rows of link microbenchmark result files, all files' together; :class:`LinkRunsError`
    naming the file for one that cannot be read, is not JSON or has no rows with numbers for
    ``bytes``, ``destinations``, ``measured_s`` and ``one_worker_s``."""
    rows: list[dict[str, Any]] = []
    for path in map(Path, paths):
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise LinkRunsError(f"link run {path}: no such file; {_EXPECTED}") from None
        except OSError as error:
            raise LinkRunsError(f"link run {path}: cannot be read ({error.strerror or error})") from None
        except ValueError as error:  # not JSON, or not text
            raise LinkRunsError(f"link run {path}: not JSON ({error}); {_EXPECTED}") from None
        file_rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(file_rows, list) or not file_rows:
            raise LinkRunsError(f"link run {path}: no \"rows\" list; {_EXPECTED}")
        for k, row in enumerate(file_rows):
            bad = [key for key in _ROW_KEYS if not isinstance(row, dict) or not _is_number(row.get(key))]
            if bad:
                raise LinkRunsError(f"link run {path}: row {k} has no number for {', '.join(bad)}; {_EXPECTED}")
        rows += file_rows
    return rows


def host_bandwidth_from_files(paths: Iterable[str | Path]) -> float:
    """:func:`host_bandwidth_from_links` over the rows of link microbenchmark result files
    (:func:`read_link_runs`); :class:`LinkRunsError` names the files if they give no bandwidth."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise LinkRunsError("no link run files given: need at least one")
    try:
        return host_bandwidth_from_links(read_link_runs(paths))
    except LinkRunsError:
        raise
    except ValueError as error:
        raise LinkRunsError(f"link runs {', '.join(map(str, paths))}: {error}") from None
