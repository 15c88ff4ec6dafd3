"""A placement task as the trainer sees it: a counted :class:`placement_env.Problem`, its :class:`GraphInput`,
what the rewards are scaled by (the lower bound, each device's memory) and the cluster's device symmetries
(placements the trainer imitates are put in their canonical labelling first)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_env import Problem, canonical_placement, device_symmetries

from .graph_input import GraphInput, graph_input


@dataclass(frozen=True)
class PlacementTask:
    name: str
    problem: Problem
    inputs: GraphInput
    lower_bound: float
    capacity: np.ndarray  # memory bytes per device of the cluster
    symmetries: np.ndarray  # [k, n_devices]: the device relabellings that leave the cluster unchanged

    def canonical(self, placement: np.ndarray) -> np.ndarray:
        """``placement`` in its canonical labelling (the same for every relabelling of it by a symmetry)."""
        return canonical_placement(placement, self.symmetries)

    def relabellings(self, placement: np.ndarray) -> np.ndarray:
        """[k, n]: ``placement`` relabelled by each of the cluster's symmetries (the first is itself)."""
        return self.symmetries[:, np.asarray(placement, np.int64)]


def make_task(problem: Problem, name: str = "") -> PlacementTask:
    """The task of ``problem`` (spends no evaluation)."""
    capacity = np.array([d.memory_bytes for d in problem.cluster.devices], np.float64)
    return PlacementTask(name=name or problem.benchmark, problem=problem, inputs=graph_input(problem),
                         lower_bound=float(problem.lower_bound()), capacity=capacity,
                         symmetries=device_symmetries(problem.cluster))
