"""``load_cluster``: a Cluster from whatever a user names it by, without touching the network.

It accepts a Cluster, a preset name, ``"local:N"``, a JSON file path or the cluster JSON form as
a dict. A running TF cluster (a ``tf.train.ClusterSpec`` or a ``{job: ["host:port", ...]}`` dict)
is refused with a message pointing to ``cluster_from_spec``: reading one connects to its servers
and may wait for them, which a call that looks like loading a file must not do silently.
"""
from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from ..errors import ClusterConfigError, UnknownClusterError
from .checks import bad, show
from .model import Cluster
from .presets import MAX_LOCAL_WORKERS, PRESETS, local_cluster
from .probe import is_tf_cluster_spec
from .schema import CLUSTER_OPTIONAL, CLUSTER_REQUIRED

ACCEPTED = ('a Cluster, a preset name, "local:N", a JSON file path or a dict in the cluster JSON form '
            '(with "name" and "devices")')


def _looks_like_spec_dict(spec: Mapping) -> bool:
    """A ``{job: ["host:port", ...]}`` dict rather than the cluster JSON form (which has "name"/"devices")."""
    if not spec or any(key in spec for key in CLUSTER_REQUIRED + CLUSTER_OPTIONAL):
        return False
    return all(isinstance(tasks, (list, tuple, Mapping)) for tasks in spec.values())


def _running_cluster_refused(spec: object) -> ClusterConfigError:
    shown = show(spec.as_dict()) if is_tf_cluster_spec(spec) else show(spec)
    return ClusterConfigError(
        f"cluster = {shown} names a running TF cluster (a ClusterSpec); load_cluster never connects to "
        "servers, so read it explicitly with pe.cluster_from_spec(spec), which lists the devices of its "
        f"running servers. load_cluster accepts {ACCEPTED}")


def load_cluster(spec: Cluster | str | os.PathLike[str] | Mapping[str, Any]) -> Cluster:
    """A Cluster from a Cluster, a preset name, ``"local:N"``, a JSON file path or a dict (the JSON form).

    Never opens a connection: a ``tf.train.ClusterSpec`` or a ``{job: ["host:port", ...]}`` dict
    raises ClusterConfigError; read a running TF cluster with ``cluster_from_spec``.
    """
    if isinstance(spec, Cluster):
        return spec
    if is_tf_cluster_spec(spec) or (isinstance(spec, Mapping) and _looks_like_spec_dict(spec)):
        raise _running_cluster_refused(spec)
    if isinstance(spec, Mapping):
        return Cluster.from_dict(spec)
    if not isinstance(spec, (str, os.PathLike)):
        raise bad("cluster", spec, ACCEPTED)
    text = os.fspath(spec)
    if text in PRESETS:
        return PRESETS[text]()
    if text.startswith("local:"):
        n = text[len("local:"):]
        if not n.isdecimal() or not 1 <= int(n) <= MAX_LOCAL_WORKERS:
            raise bad("cluster", text, f'"local:N" with N an integer from 1 to {MAX_LOCAL_WORKERS}')
        return local_cluster(int(n))
    if os.path.exists(text):  # a file; a directory or other path fails there, naming what it is
        return Cluster.load_json(text)
    close = difflib.get_close_matches(text, list(PRESETS), n=1)
    raise UnknownClusterError(
        f"unknown cluster {show(text)}"
        + (f' (did you mean "{close[0]}"?)' if close else "")
        + (" (no such file)" if text.endswith(".json") else "")
        + f'; presets: {", ".join(PRESETS)}; also "local:N" (N = 1..{MAX_LOCAL_WORKERS} local TF workers), '
        "a path to a cluster .json file, a dict or a Cluster"
    )
