"""placement_env: device placement of TensorFlow training graphs as a reinforcement-learning benchmark.

Public API (TensorFlow is imported only when a function that needs it is first used)::

    import placement_env as pe
    g = pe.load_benchmark("nmt")          # OpGraph of the paper's NMT training step
    g = pe.from_tf(obj)                   # your own GraphDef / MetaGraph / tf.Graph / function / Keras model
    c = pe.load_cluster("paper-2gpu")     # Cluster
    m = pe.evaluate(g, c, placement)      # Measurement; runtime="sim" | "grappler" | "measured"
    pe.solve("expert", pe.Problem.make(g, c, budget=100))   # any method(problem) -> placement
    pe.solve(pe.method("hill_climbing", start="best_heuristic"), pe.Problem.make(g, c, budget=100))  # with arguments
"""
from __future__ import annotations

import os
from importlib import import_module
from typing import Any

# TensorFlow's C++ side prints start-up notices (absl, oneDNN, CPU features) when it is first imported, by
# whichever of this package's functions needs it first; level 2 keeps them and other info and warning lines
# off the screen (errors still show). A level the user set wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from . import errors
from .errors import *  # noqa: F403 - every public error, listed in errors.__all__
from .opgraph import DEVICE_KINDS, OpGraph
from .placement import (Measurement, allowed_devices, check_placement, raise_on_infrastructure_failure,
                        random_placements, single_device)

__version__ = "0.1.0"

_LAZY = {
    "from_tf": "placement_env.tf_import",
    "load_benchmark": "placement_env.benchmarks",
    "benchmark_names": "placement_env.benchmarks",
    "benchmark_blocks": "placement_env.benchmarks",
    "group_ops": "placement_env.grouping",
    "Cluster": "placement_env.cluster",
    "Device": "placement_env.cluster",
    "load_cluster": "placement_env.cluster",
    "cluster_from_spec": "placement_env.cluster",
    "device_symmetries": "placement_env.cluster.symmetry",
    "canonical_placement": "placement_env.cluster.symmetry",
    "evaluate": "placement_env.evaluation",
    "RUNTIMES": "placement_env.evaluation",
    "MeasuredRuntime": "placement_env.runtime.measured",
    "lower_bound": "placement_env.evaluation",
    "bound": "placement_env.evaluation",
    "LOWER_BOUNDS": "placement_env.evaluation",
    "solve_exact": "placement_env.exact",
    "sequential_peak_bytes": "placement_env.memory_estimate",
    "sequential_memory": "placement_env.memory_estimate",
    "earliest_starts": "placement_env.memory_estimate",
    "Evaluator": "placement_env.evaluation",
    "GroupGraph": "placement_env.groupgraph",
    "UndirectedGroupGraph": "placement_env.groupgraph",
    "group_graph": "placement_env.groupgraph",
    "DevicePlacementEnv": "placement_env.env",
    "graph_features": "placement_env.env.features",
    "Reward": "placement_env.env.rewards",
    "RewardContext": "placement_env.env.rewards",
    "charged_runtime": "placement_env.env.rewards",
    "DEFAULT_FAILING_SIGNAL_S": "placement_env.env.rewards",
    "REWARDS": "placement_env.env.rewards",
    "GraphFeatures": "placement_env.env.features",
    "ParallelEvaluator": "placement_env.parallel",
    "calibrate": "placement_env.calibration",
    "measured_costs": "placement_env.calibration",
    "Problem": "placement_env.problem",
    "Solution": "placement_env.problem",
    "solve": "placement_env.problem",
    "resolve_method": "placement_env.problem",
    "METHODS": "placement_env.problem",
    "ZERO_BUDGET_HEURISTICS": "placement_env.problem",
    "PRESETS": "placement_env.problem",
    "BUILT_IN_METHODS": "placement_env.problem",
    "MethodSpec": "placement_env.problem",
    "method": "placement_env.problem",
    "Bounds": "placement_env.problem",
    "apply_placement": "placement_env.tf_import.export",
    "export_placed_graph": "placement_env.tf_import.export",
    "check_output_folder": "placement_env.output_paths",
    "register_suite": "placement_env.harness",
    "import_tensorflow_quietly": "placement_env.quiet_tf",
}

__all__ = [
    "DEVICE_KINDS", "OpGraph", "Measurement", "allowed_devices", "check_placement", "raise_on_infrastructure_failure",
    "random_placements", "single_device", *errors.__all__, *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'placement_env' has no attribute {name!r}")


def _register() -> None:
    from .env import register_envs

    register_envs()


_register()
