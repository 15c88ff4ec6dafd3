"""Placement baselines: every one is ``method(problem) -> placement`` (see ``baselines.base``).

``METHODS`` maps the built-in names to ``module:callable``; ``resolve_method`` also takes a
third-party ``"package.module:callable"``.
"""
from __future__ import annotations

METHODS: dict[str, str] = {
    "single_cpu": "baselines.simple:single_cpu",
    "single_gpu": "baselines.simple:single_gpu",
    "random_search": "baselines.simple:random_search",
    "expert": "baselines.expert:expert",
    "scotch": "baselines.partition:scotch",
    "mincut": "baselines.partition:mincut",
    "metis": "baselines.partition:metis",
    "heft": "baselines.list_scheduling:heft",
    "m_topo": "baselines.list_scheduling:m_topo",
    "m_etf": "baselines.list_scheduling:m_etf",
}
