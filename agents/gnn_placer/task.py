"""A placement task as the trainer sees it: a counted :class:`placement_env.Problem`, its :class:`GraphInput`,
and what the rewards are scaled by (the lower bound, each device's memory)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_env import Problem

from .graph_input import GraphInput, graph_input


@dataclass(frozen=True)
class PlacementTask:
    name: str
    problem: Problem
    inputs: GraphInput
    lower_bound: float
    capacity: np.ndarray  # memory bytes per device of the cluster


def make_task(problem: Problem, name: str = "") -> PlacementTask:
    """The task of ``problem`` (spends no evaluation)."""
    capacity = np.array([d.memory_bytes for d in problem.cluster.devices], np.float64)
    return PlacementTask(name=name or problem.benchmark, problem=problem, inputs=graph_input(problem),
                         lower_bound=float(problem.lower_bound()), capacity=capacity)
