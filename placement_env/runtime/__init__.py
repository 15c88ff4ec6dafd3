"""Runtime of a placement: simulated, TF's grappler VirtualCluster, or measured on a real TF cluster."""
from .compiled_cache import drop_stale_caches

drop_stale_caches()  # before any compiled function loads its cache (see compiled_cache)
