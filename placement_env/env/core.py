"""``DevicePlacementEnv``: device placement of a TF training graph as a Gymnasium environment.

Modes (``mode=``):

* ``"oneshot"`` (the paper): one step per episode. Action ``MultiDiscrete([D] * S)``: a device for
  every group slot (slots past the graph's group count are ignored). Reward from the whole placement.
* ``"sequential"``: one group per step, in topological order. Action ``Discrete(D)`` for the
  current group; reward at the end, or with ``dense_reward=True`` after every step: the change in
  reward of the placement "decided groups + the rest at the reference placement", evaluated with
  the env's runtime at every step (the episode's rewards then sum to R(final) - R(reference); with
  ``runtime="measured"`` that is one measurement per step).
* ``"improve"`` (Placeto-style): start from a placement (default: the reference) and visit the
  groups in topological order, ``improve_steps`` steps (default one pass); each step moves the
  current group to the chosen device; reward = the change in reward.

Reward (``reward=``): ``"neg_sqrt_runtime"`` (-sqrt(step seconds), the paper's), ``"neg_runtime"``,
``"speedup"`` (reference runtime / runtime), a :class:`~placement_env.env.rewards.Reward`, or a callable
``f(runtime_s, reference_s)``; the env calls a Reward with the placement's Measurement and its
:meth:`~DevicePlacementEnv.reward_context` (failing signal, reference runtime, lower bound, device memory).
A failed placement (out of memory, no kernel, error)
is charged ``failing_signal`` seconds (100 by default) and ``info["failure"]`` says why. When the
measured runtime's machinery fails on every retry (``failure="infrastructure"``), ``step`` and
``reset`` raise InfrastructureError instead: nothing is charged, and the env is as before the call.
The reference placement is the fastest single-device placement that runs.

Observations are a ``Dict`` of float32 ``Box``es padded to ``S = pad_to`` group slots (default:
the graph's group count); see :mod:`placement_env.env.features` for the graph fields. Sequential
and improve modes add ``placement`` (S, D) one-hot of the decided devices and ``current`` (S,)
one-hot of the group to place; improve adds ``efficiency`` (1,) = the simulator's lower bound / the
simulator's runtime of the current placement (both from the op costs, like the graph features,
whatever runtime charges the reward: the bound holds for simulated runtimes only).
``info["sim_lower_bound_s"]`` is that lower bound, in the simulator's seconds.
``graph_observation=True`` adds the group graph as a padded edge list, ``E = pad_edges`` rows
(default: the first graph's edge count): ``edge_index`` (E, 2) int64, ``edge_bytes`` (E,) and
``edge_mask`` (E,); see :mod:`placement_env.env.group_graph`.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from ..benchmarks import load_benchmark
from ..cluster import Cluster, load_cluster
from ..errors import ArgumentError, InfrastructureError, InvalidActionError
from ..evaluation import Evaluator, check_runtime, costs_for
from ..groupgraph import GroupGraph, group_graph
from ..grouping import DEFAULT_MAX_GROUPS, group_ops
from ..opgraph import OpGraph
from ..placement import Measurement, allowed_devices, check_placement, raise_on_infrastructure_failure, single_device
from .checks import (MODES, OPTION_KEYS, check_dense_reward_mode, check_env_measured_options, check_evaluator,
                     check_flag, check_improve_steps, check_max_groups, check_mode,
                     check_pad_edges_needs_graph_observation, check_pad_to, check_render_mode, check_reset_options)
from .features import GraphFeatures, graph_features, observation_fields
from .group_graph import check_edge_slots, resolve_edge_slots
from .modes import Mode, make_mode
from .rewards import (DEFAULT_FAILING_SIGNAL_S, Reward, RewardContext, charged_runtime, check_failing_signal,
                      resolve_reward)

DEFAULT_BENCHMARK = "nmt"
DEFAULT_CLUSTER = "k80-2gpu"  # the paper's machine as built (k80.py); paper-2gpu is its ideal form


class _GraphTask:
    """One graph on the env's cluster: evaluators, features, masks, and lazily the bound and reference."""

    def __init__(self, graph: OpGraph, cluster: Cluster, runtime: str, slots: int,
                 measured_options: dict[str, Any] | None, edge_slots: int | None = None,
                 evaluator: Any = None) -> None:
        self.graph = graph
        self.sim = Evaluator(graph, cluster, "sim")
        self._given = evaluator is not None  # the caller's evaluator: used, never closed here
        if self._given:
            self.evaluator = evaluator
        else:
            self.evaluator = self.sim if runtime == "sim" else Evaluator(
                graph, cluster, runtime, costs=self.sim.costs if runtime == "grappler" else None,
                measured_options=measured_options)
        self.features: GraphFeatures = graph_features(graph, cluster, self.sim.costs.seconds, slots, edge_slots)
        self.allowed = allowed_devices(graph, cluster)
        self._lower_bound: float | None = None
        self._reference: tuple[np.ndarray, Measurement] | None = None

    @property
    def lower_bound(self) -> float:
        if self._lower_bound is None:
            self._lower_bound = self.sim.lower_bound()
        return self._lower_bound

    def reference(self, failing_signal: float) -> tuple[np.ndarray, Measurement]:
        """The fastest single-device placement that runs (the CPU one if none does)."""
        if self._reference is None:
            candidates = [single_device(self.graph, self.sim.cluster, d) for d in range(self.sim.cluster.n_devices)]
            results = [self.evaluator(p) for p in candidates]
            raise_on_infrastructure_failure(*results)
            best = min(range(len(candidates)), key=lambda d: (charged_runtime(results[d], failing_signal), d))
            self._reference = (candidates[best], results[best])
        return self._reference

    def close(self) -> None:
        self.sim.close()
        if not self._given and self.evaluator is not self.sim:
            self.evaluator.close()


class DevicePlacementEnv(gym.Env):
    """Assign the co-location groups of a TF training graph to the devices of a cluster."""

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 2}

    def __init__(self, benchmark: Any = DEFAULT_BENCHMARK, cluster: Any = DEFAULT_CLUSTER, runtime: str = "sim", *,
                 mode: str = "oneshot", reward: str | Reward | Any = "neg_sqrt_runtime",
                 failing_signal: float = DEFAULT_FAILING_SIGNAL_S, max_groups: int = DEFAULT_MAX_GROUPS,
                 pad_to: int | None = None, dense_reward: bool = False, improve_steps: int | None = None,
                 measured_options: dict[str, Any] | None = None, render_mode: str | None = None,
                 graph_observation: bool = False, pad_edges: int | None = None, evaluator: Any = None) -> None:
        mode = check_mode(mode)
        runtime = check_runtime(runtime)
        render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        dense_reward = check_flag(dense_reward, "dense_reward")
        graph_observation = check_flag(graph_observation, "graph_observation")
        check_dense_reward_mode(dense_reward, mode)
        improve_steps = check_improve_steps(improve_steps, mode)
        max_groups = check_max_groups(max_groups)
        check_pad_edges_needs_graph_observation(pad_edges, graph_observation)
        self._given_evaluator = check_evaluator(evaluator)
        self.mode, self.runtime, self.render_mode = mode, runtime, render_mode
        self._mode: Mode = make_mode(mode, dense_reward=dense_reward, improve_steps=improve_steps)
        self.reward = resolve_reward(reward)
        self.failing_signal = check_failing_signal(failing_signal)
        self.max_groups, self.dense_reward, self._improve_steps = max_groups, dense_reward, improve_steps
        self.cluster = load_cluster(cluster)
        self._measured_options = check_env_measured_options(measured_options, runtime)
        self._tasks: dict[Any, _GraphTask] = {}
        first = self._graph_of(benchmark)
        self.slots = check_pad_to(pad_to, first)
        self.edge_slots = resolve_edge_slots(self._group_graph(first), pad_edges) if graph_observation else None
        self._task = self._task_for(benchmark, first)
        n_devices = self.cluster.n_devices
        self.observation_space = spaces.Dict({**observation_fields(self.slots, n_devices, self.edge_slots),
                                              **self._mode.observation_fields(self.slots, n_devices)})
        self.action_space = self._mode.action_space(self.slots, n_devices)
        self._placement = np.zeros(self.slots, np.int64)
        self._step = 0
        self._done = True
        self._started = False
        self._last: Measurement | None = None  # the measurement render shows
        self._baseline: Measurement | None = None  # what dense and improve rewards are changes from

    # ---- the spec: measured runtimes are never deterministic ----
    @property
    def spec(self):  # type: ignore[override]
        return self.__dict__.get("_spec")

    @spec.setter
    def spec(self, value) -> None:
        if value is not None and self.runtime == "measured" and not value.nondeterministic:
            value = dataclasses.replace(value, nondeterministic=True)
        self.__dict__["_spec"] = value

    # ---- graphs ----
    def _graph_of(self, benchmark: Any) -> OpGraph:
        if isinstance(benchmark, OpGraph):
            return benchmark if benchmark.n_groups <= self.max_groups else group_ops(benchmark, max_groups=self.max_groups)
        if isinstance(benchmark, str):
            return load_benchmark(benchmark, max_groups=self.max_groups)
        from ..tf_import import from_tf

        return from_tf(benchmark, max_groups=self.max_groups)

    def _task_for(self, benchmark: Any, graph: OpGraph | None = None) -> _GraphTask:
        key = benchmark if isinstance(benchmark, str) else id(benchmark)
        task = self._tasks.get(key)
        if task is None and self._given_evaluator is not None and self._tasks:
            raise ArgumentError(f"benchmark {benchmark!r:.60}: an env made with an evaluator serves only the graph that "
                             "evaluator measures; make another env for another benchmark")
        if task is None:
            graph = self._graph_of(benchmark) if graph is None else graph
            if graph.n_groups > self.slots:
                raise ArgumentError(f"benchmark {graph.name!r} has {graph.n_groups} groups but this env has "
                                 f"{self.slots} slots; make the env with pad_to >= {graph.n_groups}")
            if self.edge_slots is not None:
                check_edge_slots(graph, self._group_graph(graph), self.edge_slots)
            task = self._tasks[key] = _GraphTask(graph, self.cluster, self.runtime, self.slots, self._measured_options,
                                                 self.edge_slots, self._given_evaluator)
        return task

    def _group_graph(self, graph: OpGraph) -> GroupGraph:
        """``graph``'s group graph on the env's cluster with the simulator's op costs (those of the features)."""
        return group_graph(graph, self.cluster, costs_for(graph, self.cluster).seconds)  # the key the features use

    @property
    def graph(self) -> OpGraph:
        """The graph of the current episode."""
        return self._task.graph

    @property
    def n_groups(self) -> int:
        return self._task.graph.n_groups

    @property
    def allowed(self) -> np.ndarray:
        """Bool [n_groups, n_devices] of the current graph: devices with kernels for every op of a group."""
        return self._task.allowed

    def reference(self) -> tuple[np.ndarray, Measurement]:
        """The reference placement of the current graph (the fastest single-device placement that runs,
        the CPU one if none does) and its Measurement with the env's runtime; what ``speedup`` and
        ``improve`` mode start from."""
        return self._task.reference(self.failing_signal)

    @property
    def evaluator(self) -> Evaluator:
        """The evaluator of the current graph with the env's runtime (what ``step`` charges)."""
        return self._task.evaluator

    # ---- evaluation and rewards ----
    def reward_context(self) -> RewardContext:
        """What the env's reward reads besides a Measurement: the failing signal, the reference placement's
        charged runtime (measured only when ``reward.uses_reference``, else 1.0), the simulator's lower bound and
        each device's memory."""
        reference = self._task.reference(self.failing_signal)[1] if self.reward.uses_reference else None
        return RewardContext(failing_signal_s=self.failing_signal,
                             reference_s=charged_runtime(reference, self.failing_signal) if reference is not None
                             else 1.0,
                             lower_bound_s=self._task.lower_bound, capacity_bytes=self.cluster.memory_bytes)

    def _reward_of(self, m: Measurement) -> float:
        return self.reward(m, self.reward_context())

    def _evaluate(self, placement: np.ndarray, evaluator: Evaluator | None = None) -> Measurement:
        m = (evaluator or self._task.evaluator)(placement)
        raise_on_infrastructure_failure(m)
        return m

    def _info(self, m: Measurement) -> dict[str, Any]:
        return {
            "runtime_s": float(m.runtime_s), "charged_runtime_s": charged_runtime(m, self.failing_signal),
            "ok": bool(m.ok), "failure": m.failure, "message": m.message, "peak_bytes": m.peak_bytes,
            "busy_s": m.busy_s, "bytes_moved": int(m.bytes_moved), "sim_lower_bound_s": self._task.lower_bound,
            "placement": np.array(m.placement), "benchmark": self.graph.name, "runtime": m.runtime,
        }

    # ---- observations ----
    def _current_group(self) -> int:
        return self._step % self.n_groups

    def _observation(self) -> dict[str, np.ndarray]:
        obs = {key: value.copy() for key, value in self._task.features.fields.items()}  # callers may keep them
        self._mode.observe(self, obs)
        return obs

    def _efficiency(self) -> float:
        """The simulator's lower bound over the simulator's charged runtime of the current placement."""
        simulated = self._baseline if self.runtime == "sim" else \
            self._evaluate(self._placement[: self.n_groups], self._task.sim)
        return min(self._task.lower_bound / charged_runtime(simulated, self.failing_signal), 1.0)

    # ---- gym API ----
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = check_reset_options(options)
        if "benchmark" in options:
            self._task = self._task_for(options["benchmark"])
        self._mode.check_reset_options(options)
        self._step, self._done, self._started, self._last = 0, True, False, None  # set once reset succeeds
        self._placement = np.zeros(self.slots, np.int64)
        info: dict[str, Any] = {"benchmark": self.graph.name, "n_groups": self.n_groups}
        self._mode.reset(self, options, info)
        self._done, self._started = False, True
        return self._observation(), info

    def _check_placement(self, placement: Any) -> np.ndarray:
        return check_placement(self.graph, self.cluster, placement)

    def _check_action(self, action: Any) -> Any:
        n_devices = self.cluster.n_devices
        try:
            array = np.asarray(action)
        except ValueError as error:  # nested sequences of different lengths
            raise InvalidActionError(f"action is not one array ({error}); expected integers (device indices)") from None
        if array.dtype.kind not in "iu":  # signed or unsigned integers: not bool, float, timedelta or object
            raise InvalidActionError(f"action has dtype {array.dtype}; expected integers (device indices)")
        action = self._mode.action(array, self.slots)  # its shape
        if array.size and (array.min() < 0 or array.max() >= n_devices):
            bad = int(array[(array < 0) | (array >= n_devices)].flat[0])
            raise InvalidActionError(f"action uses device {bad}; this cluster has devices 0..{n_devices - 1} "
                                     f"({', '.join(d.name for d in self.cluster.devices)})")
        return action

    def step(self, action: Any):
        saved = self._placement.copy(), self._step
        try:
            return self._take(action)
        except InfrastructureError:  # nothing charged: leave the episode as it was, to step again
            self._placement, self._step = saved
            raise

    def _take(self, action: Any):
        if not self._started:
            raise ResetNeeded("call reset() before step()")
        if self._done:
            raise ResetNeeded("the episode has ended; call reset() before step()")
        return self._mode.step(self, self._check_action(action))

    def _finish(self, m: Measurement, *, baseline: bool = False, done: bool = True):
        """The step that evaluated ``m``: its reward (less the reward of the previous measurement when
        ``baseline``), and ``m`` becomes what render shows and the next change is taken from."""
        reward = self._reward_of(m)
        if baseline:
            reward -= self._reward_of(self._baseline)
        self._last, self._baseline, self._done = m, m, done
        return self._observation(), float(reward), done, False, self._info(m)

    def action_masks(self) -> np.ndarray:
        """Devices each group may go to (those with kernels for all its ops), for MaskablePPO.

        oneshot: flat bool vector of length S * D (padding slots allow device 0 only);
        sequential / improve: bool vector of length D for the current group.
        """
        return self._mode.action_masks(self)

    # ---- render and export ----
    def _shown(self) -> Measurement:
        if self._last is not None:
            return self._last
        return self._task.reference(self.failing_signal)[1]

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: make the env with render_mode='rgb_array' or 'ansi'")
            return None
        from ..render.gantt import gantt_rgb
        from ..render.table import ansi_table

        m = self._shown()
        if self.render_mode == "ansi":
            return ansi_table(self.graph, self.cluster, m)
        if m.ok or m.failure == "oom":  # draw the simulated schedule of the shown placement
            m = dataclasses.replace(self._task.sim(m.placement, schedule=True), runtime_s=m.runtime_s, ok=m.ok,
                                    failure=m.failure, message=m.message, runtime=m.runtime)
        return gantt_rgb(self.graph, self.cluster, m)

    def export_placed_graph(self, placement: Any, path: str) -> str:
        """Write the TF graph with every op's device set by ``placement`` (one device per group)."""
        from ..tf_import.export import export_placed_graph

        placement = np.asarray(placement)
        if placement.ndim == 1 and placement.shape[0] == self.slots:
            placement = placement[: self.n_groups]
        return export_placed_graph(self.graph, self.cluster, placement, path)

    def close(self) -> None:
        for task in self._tasks.values():
            task.close()
