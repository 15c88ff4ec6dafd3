"""The Gymnasium environment ``DevicePlacement-v0`` and its registered variants.

``register_envs()`` runs when ``placement_env`` is imported; ``gym.make("placement_env:DevicePlacement-v0")``
imports the package itself. Ids:

* ``DevicePlacement-v0``: the defaults (``nmt`` on ``k80-2gpu``, the paper's machine as built; simulated runtime,
  the paper's reward);
* ``DevicePlacement-{RNNLM,NMT,InceptionV3}-{2,4}GPU-v0``: the paper's six settings on the machines as built
  (``k80-2gpu``, ``k80-4gpu``);
* ``DevicePlacement-{RNNLM,NMT,InceptionV3}-{2,4}GPU-Ideal-v0``: the same on the paper's machine with ideal links
  (``paper-2gpu``, ``paper-4gpu``: a private link per device pair, no shared slots or fixed costs);
* ``DevicePlacement-Tiny-v0``: ``rnnlm-tiny`` on ``paper-2gpu``, for quick tries and tests;
* ``DevicePlacement-Measured-v0``: ``rnnlm-tiny`` measured on two local TF workers (``local:2``),
  registered ``nondeterministic=True`` (any env whose runtime is measured reports that in its spec).

Every keyword of :class:`DevicePlacementEnv` can be passed to ``gym.make``.
"""
from __future__ import annotations

from .core import MODES, OPTION_KEYS, DevicePlacementEnv

ENTRY_POINT = "placement_env.env.core:DevicePlacementEnv"
PAPER_SETTINGS = {"RNNLM": "rnnlm", "NMT": "nmt", "InceptionV3": "inception_v3"}

__all__ = ["DevicePlacementEnv", "MODES", "OPTION_KEYS", "register_envs", "env_ids"]


def env_ids() -> dict[str, dict]:
    """Registered id -> the keyword arguments it stands for."""
    ids: dict[str, dict] = {"DevicePlacement-v0": {}}
    for label, benchmark in PAPER_SETTINGS.items():
        for gpus in (2, 4):
            ids[f"DevicePlacement-{label}-{gpus}GPU-v0"] = {"benchmark": benchmark, "cluster": f"k80-{gpus}gpu"}
            ids[f"DevicePlacement-{label}-{gpus}GPU-Ideal-v0"] = {"benchmark": benchmark, "cluster": f"paper-{gpus}gpu"}
    ids["DevicePlacement-Tiny-v0"] = {"benchmark": "rnnlm-tiny", "cluster": "paper-2gpu"}
    ids["DevicePlacement-Measured-v0"] = {"benchmark": "rnnlm-tiny", "cluster": "local:2", "runtime": "measured"}
    return ids


def register_envs() -> None:
    """Register every id of :func:`env_ids` with Gymnasium (idempotent)."""
    from gymnasium.envs.registration import register, registry

    for env_id, kwargs in env_ids().items():
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs=kwargs,
                     nondeterministic=kwargs.get("runtime") == "measured")
