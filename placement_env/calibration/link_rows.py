"""The host transfer's bandwidth from a link microbenchmark on real workers.

``experiments.link_microbenchmark`` measures one worker sending one large tensor (megabytes) to
another against the same step on one worker. Under the host-transfer model
(:mod:`placement_env.cluster.host_transfer`) the extra time of such a step is the sender's
encoding, then the link's wait, then the receiver's decoding, so its growth per byte is
``2 / bandwidth``: the least-squares slope over the one-destination rows gives the bandwidth.
Large tensors measure it cleanly; in whole graphs bytes and tensor counts grow together, and a fit
to step times alone cannot tell them apart.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["host_bandwidth_from_links"]


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
