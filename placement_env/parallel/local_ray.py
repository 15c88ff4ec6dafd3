"""A local Ray instance that nothing outside this machine can reach.

Every server of a Ray node (the GCS, the raylet's node manager and object manager, the gRPC server of
each worker and of the driver, the runtime-env agent) listens on 127.0.0.1 when the node's address is
127.0.0.1, and on all interfaces otherwise. ``ray.init`` has no option to choose that: it replaces an
explicit ``_node_ip_address="127.0.0.1"`` with the machine's routable address, except in Ray's
single-machine mode (``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` false: Ray's default on macOS
and Windows, or ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` when Ray is imported). :func:`start_local_ray`
turns that mode on while ``ray.init`` starts the node, then checks the node's address, so a Ray
version that does otherwise is shut down with an IsolationError instead of listening on the network.
"""
from __future__ import annotations

from typing import Any

from ..errors import IsolationError

LOOPBACK = "127.0.0.1"


def start_local_ray(num_cpus: int, **init_options: Any) -> None:
    """``ray.init`` a new single-node Ray instance with ``num_cpus`` CPUs whose servers listen on
    127.0.0.1 only (no dashboard); ``init_options`` go to ``ray.init`` as well."""
    import ray
    from ray._private import ray_constants  # the single-machine switch; Ray has no public one

    cluster_mode = getattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(num_cpus=num_cpus, _node_ip_address=LOOPBACK, include_dashboard=False, **init_options)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
    node_address = ray.util.get_node_ip_address()
    if node_address != LOOPBACK:
        ray.shutdown()
        raise IsolationError(
            f"Ray {ray.__version__} put the local Ray node on {node_address}, not {LOOPBACK}, so its "
            "servers would listen on every interface; it was shut down. To use Ray anyway, start a Ray "
            "cluster yourself and pass its address.")
