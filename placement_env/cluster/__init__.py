"""The machine or cluster a graph is placed on: devices and the links between them.

``load_cluster`` turns a preset name, ``"local:N"``, a JSON path or a dict into a ``Cluster``
and never touches the network; ``cluster_from_spec`` builds one from a running TF cluster (a
``tf.train.ClusterSpec``) by connecting to its servers and listing their devices. Modules:

- ``checks``: value rules and their error messages, shared by the others;
- ``device``: ``Device``, one device's record and field rules;
- ``model``: ``Cluster``, the immutable devices + link matrices and their array views;
- ``host_transfer``: ``HostTransfer``, the CPU work of a transfer between worker processes;
- ``topology``: ``Topology`` and ``Link``, the interconnect (switches, full-duplex links, routes);
- ``schema``: the JSON form (validation, ``topology`` or ``default_link`` + ``links``, files);
- ``hardware``: units and hardware figures shared by presets and probing;
- ``presets``: the built-in machines and ``local_cluster(n)``;
- ``k80``: the paper's K80 machine as built (topology, achieved rates, usable memory), its parameters;
- ``probe``: ``cluster_from_spec``, the only module that opens connections (imports TF lazily);
- ``load``: ``load_cluster``;
- ``symmetry``: ``device_symmetries``, the device relabellings that leave a cluster unchanged, and
  ``canonical_placement``.
"""
from __future__ import annotations

from .device import Device
from .host_transfer import HostTransfer
from .load import load_cluster
from .model import Cluster, topology_cluster
from .presets import MAX_LOCAL_WORKERS, PRESETS, digest_is_portable, local_cluster, preset_names
from .probe import cluster_from_spec
from .topology import Link, Topology

__all__ = ["Cluster", "Device", "HostTransfer", "Link", "Topology", "topology_cluster", "load_cluster", "cluster_from_spec", "PRESETS", "preset_names", "local_cluster", "digest_is_portable",
           "MAX_LOCAL_WORKERS"]
