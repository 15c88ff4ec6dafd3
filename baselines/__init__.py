"""Placement baselines: every one is ``method(problem) -> placement`` (see ``placement_env.Problem``).

The built-in names and their import paths are ``placement_env.METHODS``; ``placement_env.resolve_method``
also takes a third-party ``"package.module:callable"``.
"""
