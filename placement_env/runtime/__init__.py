"""Runtime of a placement: simulated, TF's grappler VirtualCluster, or measured on a real TF cluster."""
