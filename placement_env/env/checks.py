"""The checks of ``DevicePlacementEnv``'s keywords and reset options, one small function each (as Gymnasium's env
checker is built). Each returns the value as the env keeps it, or raises an ArgumentError that names the bad value
and what would be accepted."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.checks import bad_argument, check_bool, check_number
from ..errors import ArgumentError
from ..evaluation import check_measured_options
from ..opgraph import OpGraph
from .features import MAX_SLOTS

MODES = ("oneshot", "sequential", "improve")
OPTION_KEYS = ("benchmark", "placement")


def check_mode(mode: Any) -> str:
    """``mode`` if it is one of MODES."""
    if not isinstance(mode, str) or mode not in MODES:
        raise bad_argument("mode", mode, f"one of {', '.join(map(repr, MODES))}")
    return mode


def check_render_mode(render_mode: Any, render_modes: list[str]) -> str | None:
    """``render_mode`` if it is None or one of ``render_modes``."""
    if render_mode is not None and (not isinstance(render_mode, str) or render_mode not in render_modes):
        raise bad_argument("render_mode", render_mode, f"None or one of {', '.join(map(repr, render_modes))}")
    return render_mode


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a bool if it is a Python or numpy bool (``"no"`` is refused, not truthy)."""
    return check_bool(value, name, error=bad_argument)


def check_dense_reward_mode(dense_reward: bool, mode: str) -> None:
    """Dense rewards are for the sequential mode only."""
    if dense_reward and mode != "sequential":
        raise ArgumentError(f"dense_reward=True is for mode='sequential', not {mode!r}")


def check_improve_steps(improve_steps: Any, mode: str) -> int | None:
    """``improve_steps``: None, or an integer >= 1 in improve mode."""
    if improve_steps is None:
        return None
    if mode != "improve":
        raise ArgumentError(f"improve_steps={improve_steps!r} is for mode='improve', not {mode!r}")
    return check_number(improve_steps, "improve_steps", 1, integer=True, error=bad_argument)


def check_max_groups(max_groups: Any) -> int:
    """``max_groups``: an integer >= 1."""
    return check_number(max_groups, "max_groups", 1, integer=True, error=bad_argument)


def check_pad_edges_needs_graph_observation(pad_edges: Any, graph_observation: bool) -> None:
    """``pad_edges`` only with ``graph_observation=True`` (its value is checked against the first graph later)."""
    if pad_edges is not None and not graph_observation:
        raise ArgumentError(f"pad_edges={pad_edges!r} is for graph_observation=True")


def check_evaluator(evaluator: Any) -> Any:
    """``evaluator``: None or a callable placement -> Measurement."""
    if evaluator is not None and not callable(evaluator):
        raise bad_argument("evaluator", evaluator, "None or a callable placement -> Measurement (e.g. a "
                           "Problem's problem.evaluator)")
    return evaluator


def check_env_measured_options(measured_options: Any, runtime: str) -> dict[str, Any]:
    """``measured_options`` as a dict of MeasuredRuntime keywords, given only with ``runtime="measured"``."""
    if runtime != "measured" and measured_options:
        raise ArgumentError(f"measured_options are for runtime='measured', not {runtime!r}")
    return check_measured_options(measured_options)


def check_pad_to(pad_to: Any, graph: OpGraph) -> int:
    """The env's group slots: ``pad_to``, or by default the first graph's group count."""
    if pad_to is None:
        return graph.n_groups
    most = max(graph.n_groups, MAX_SLOTS)
    return check_number(pad_to, "pad_to", graph.n_groups, most, integer=True, error=bad_argument,
                        rule=f"an integer >= the graph's {graph.n_groups} groups and <= {most:,}")


def check_reset_options(options: Any) -> dict[str, Any]:
    """``reset``'s ``options`` as a dict: None or a mapping with keys from OPTION_KEYS."""
    if options is not None and not isinstance(options, Mapping):
        raise ArgumentError(f"reset options = {options!r:.60}; expected None or a dict with keys from "
                            f"{', '.join(map(repr, OPTION_KEYS))}")
    options = dict(options or {})
    unknown = sorted(map(repr, set(options) - set(OPTION_KEYS)))
    if unknown:
        raise ArgumentError(f"unknown reset option(s) {', '.join(unknown)}; accepted: "
                            f"{', '.join(map(repr, OPTION_KEYS))}")
    return options
