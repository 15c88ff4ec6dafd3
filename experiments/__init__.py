"""Scripts that are measurements, not library code: each runs as ``python -m experiments.<name>`` from the
repository root and builds on ``placement_env``, ``baselines`` and ``agents``."""
