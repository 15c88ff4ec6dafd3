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
``f(runtime_s, reference_s)``. A failed placement (out of memory, no kernel, error)
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
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from ..benchmarks import load_benchmark
from ..cluster import Cluster, load_cluster
from ..cluster.checks import bad_argument, check_bool, check_number
from ..errors import ArgumentError, InfrastructureError, InvalidActionError
from ..evaluation import Evaluator, check_measured_options, check_runtime, costs_for
from ..groupgraph import GroupGraph, group_graph
from ..grouping import DEFAULT_MAX_GROUPS, group_ops
from ..opgraph import OpGraph
from ..placement import Measurement, allowed_devices, check_placement, raise_on_infrastructure_failure, single_device
from .features import MAX_SLOTS, GraphFeatures, graph_features, observation_fields
from .group_graph import check_edge_slots, resolve_edge_slots
from .rewards import DEFAULT_FAILING_SIGNAL_S, Reward, charged_runtime, check_failing_signal, resolve_reward

MODES = ("oneshot", "sequential", "improve")
OPTION_KEYS = ("benchmark", "placement")
DEFAULT_BENCHMARK = "nmt"
DEFAULT_CLUSTER = "paper-2gpu"


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
        if not isinstance(mode, str) or mode not in MODES:
            raise bad_argument("mode", mode, f"one of {', '.join(map(repr, MODES))}")
        runtime = check_runtime(runtime)
        render_modes = self.metadata["render_modes"]
        if render_mode is not None and (not isinstance(render_mode, str) or render_mode not in render_modes):
            raise bad_argument("render_mode", render_mode, f"None or one of {', '.join(map(repr, render_modes))}")
        dense_reward = check_bool(dense_reward, "dense_reward", error=bad_argument)
        graph_observation = check_bool(graph_observation, "graph_observation", error=bad_argument)
        if dense_reward and mode != "sequential":
            raise ArgumentError(f"dense_reward=True is for mode='sequential', not {mode!r}")
        if improve_steps is not None:
            if mode != "improve":
                raise ArgumentError(f"improve_steps={improve_steps!r} is for mode='improve', not {mode!r}")
            improve_steps = check_number(improve_steps, "improve_steps", 1, integer=True, error=bad_argument)
        max_groups = check_number(max_groups, "max_groups", 1, integer=True, error=bad_argument)
        if pad_edges is not None and not graph_observation:
            raise ArgumentError(f"pad_edges={pad_edges!r} is for graph_observation=True")
        if evaluator is not None and not callable(evaluator):
            raise bad_argument("evaluator", evaluator, "None or a callable placement -> Measurement (e.g. a "
                               "Problem's problem.evaluator)")
        self._given_evaluator = evaluator
        self.mode, self.runtime, self.render_mode = mode, runtime, render_mode
        self.reward = resolve_reward(reward)
        self.failing_signal = check_failing_signal(failing_signal)
        self.max_groups, self.dense_reward, self._improve_steps = max_groups, dense_reward, improve_steps
        self.cluster = load_cluster(cluster)
        if runtime != "measured" and measured_options:
            raise ArgumentError(f"measured_options are for runtime='measured', not {runtime!r}")
        self._measured_options = check_measured_options(measured_options)
        self._tasks: dict[Any, _GraphTask] = {}
        first = self._graph_of(benchmark)
        most = max(first.n_groups, MAX_SLOTS)
        self.slots = first.n_groups if pad_to is None else check_number(
            pad_to, "pad_to", first.n_groups, most, integer=True, error=bad_argument,
            rule=f"an integer >= the graph's {first.n_groups} groups and <= {most:,}")
        self.edge_slots = resolve_edge_slots(self._group_graph(first), pad_edges) if graph_observation else None
        self._task = self._task_for(benchmark, first)
        n_devices = self.cluster.n_devices
        fields = observation_fields(self.slots, n_devices, self.edge_slots)
        if mode != "oneshot":
            fields["placement"] = spaces.Box(0.0, 1.0, (self.slots, n_devices), np.float32)
            fields["current"] = spaces.Box(0.0, 1.0, (self.slots,), np.float32)
        if mode == "improve":
            fields["efficiency"] = spaces.Box(0.0, 1.0, (1,), np.float32)
        self.observation_space = spaces.Dict(fields)
        self.action_space = spaces.MultiDiscrete(np.full(self.slots, n_devices, dtype=np.int64)) \
            if mode == "oneshot" else spaces.Discrete(n_devices)
        self._placement = np.zeros(self.slots, np.int64)
        self._step = 0
        self._done = True
        self._started = False
        self._last: Measurement | None = None
        self._last_reward_runtime = 0.0

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
    def _reward_of(self, runtime_s: float) -> float:
        reference = self._task.reference(self.failing_signal)[1] if self.reward.uses_reference else None
        reference_s = charged_runtime(reference, self.failing_signal) if reference is not None else 1.0
        return self.reward(runtime_s, reference_s)

    def _evaluate(self, placement: np.ndarray, evaluator: Evaluator | None = None) -> tuple[Measurement, float]:
        m = (evaluator or self._task.evaluator)(placement)
        raise_on_infrastructure_failure(m)
        return m, charged_runtime(m, self.failing_signal)

    def _info(self, m: Measurement, charged: float) -> dict[str, Any]:
        return {
            "runtime_s": float(m.runtime_s), "charged_runtime_s": charged, "ok": bool(m.ok), "failure": m.failure,
            "message": m.message, "peak_bytes": m.peak_bytes, "busy_s": m.busy_s, "bytes_moved": int(m.bytes_moved),
            "sim_lower_bound_s": self._task.lower_bound, "placement": np.array(m.placement),
            "benchmark": self.graph.name, "runtime": m.runtime,
        }

    # ---- observations ----
    def _current_group(self) -> int:
        return self._step % self.n_groups

    def _observation(self) -> dict[str, np.ndarray]:
        obs = {key: value.copy() for key, value in self._task.features.fields.items()}  # callers may keep them
        if self.mode == "oneshot":
            return obs
        placement = np.zeros((self.slots, self.cluster.n_devices), np.float32)
        decided = self.n_groups if self.mode == "improve" else min(self._step, self.n_groups)
        placement[np.arange(decided), self._placement[:decided]] = 1.0
        current = np.zeros(self.slots, np.float32)
        if not self._done:
            current[self._current_group()] = 1.0
        obs["placement"], obs["current"] = placement, current
        if self.mode == "improve":
            obs["efficiency"] = np.array([self._efficiency()], np.float32)
        return obs

    def _efficiency(self) -> float:
        """The simulator's lower bound over the simulator's charged runtime of the current placement."""
        simulated = self._last_reward_runtime if self.runtime == "sim" else \
            self._evaluate(self._placement[: self.n_groups], self._task.sim)[1]
        return min(self._task.lower_bound / simulated, 1.0)

    # ---- gym API ----
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if options is not None and not isinstance(options, Mapping):
            raise ArgumentError(f"reset options = {options!r:.60}; expected None or a dict with keys from "
                                f"{', '.join(map(repr, OPTION_KEYS))}")
        options = dict(options or {})
        unknown = sorted(map(repr, set(options) - set(OPTION_KEYS)))
        if unknown:
            raise ArgumentError(f"unknown reset option(s) {', '.join(unknown)}; accepted: "
                                f"{', '.join(map(repr, OPTION_KEYS))}")
        if "benchmark" in options:
            self._task = self._task_for(options["benchmark"])
        if "placement" in options and self.mode != "improve":
            raise ArgumentError(f"reset option 'placement' (a start placement) is for mode='improve', not {self.mode!r}")
        self._step, self._done, self._started, self._last = 0, True, False, None  # set once reset succeeds
        self._placement = np.zeros(self.slots, np.int64)
        info: dict[str, Any] = {"benchmark": self.graph.name, "n_groups": self.n_groups}
        if self.mode == "improve":
            start = options.get("placement")
            start = self._task.reference(self.failing_signal)[0] if start is None else self._check_placement(start)
            self._placement[: self.n_groups] = start
            m, self._last_reward_runtime = self._evaluate(self._placement[: self.n_groups])
            self._last = m
            info.update(self._info(m, self._last_reward_runtime))
        elif self.mode == "sequential" and self.dense_reward:
            placement, measurement = self._task.reference(self.failing_signal)
            self._placement[: self.n_groups] = placement
            self._last_reward_runtime = charged_runtime(measurement, self.failing_signal)
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
        if self.mode == "oneshot":
            if array.shape != (self.slots,):
                raise InvalidActionError(f"action has shape {array.shape}; expected ({self.slots},): one device "
                                         f"per group slot")
        elif array.shape not in ((), (1,)):
            raise InvalidActionError(f"action has shape {array.shape}; expected a single device index")
        if array.size and (array.min() < 0 or array.max() >= n_devices):
            bad = int(array[(array < 0) | (array >= n_devices)].flat[0])
            raise InvalidActionError(f"action uses device {bad}; this cluster has devices 0..{n_devices - 1} "
                                     f"({', '.join(d.name for d in self.cluster.devices)})")
        return array.astype(np.int64) if self.mode == "oneshot" else int(array.reshape(()))

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
        action = self._check_action(action)
        n = self.n_groups
        if self.mode == "oneshot":
            self._placement[:] = action
            return self._finish(*self._evaluate(self._placement[:n]))
        group = self._current_group()
        self._placement[group] = action
        self._step += 1
        if self.mode == "sequential":
            if self._step == n:
                return self._finish(*self._evaluate(self._placement[:n]), baseline=self.dense_reward)
            reward = 0.0
            if self.dense_reward:
                charged = self._evaluate(self._placement[:n])[1]
                reward = self._reward_of(charged) - self._reward_of(self._last_reward_runtime)
                self._last_reward_runtime = charged
            return self._observation(), reward, False, False, {"groups_placed": self._step}
        return self._finish(*self._evaluate(self._placement[:n]), baseline=True,
                            done=self._step >= (self._improve_steps or n))

    def _finish(self, m: Measurement, charged: float, *, baseline: bool = False, done: bool = True):
        reward = self._reward_of(charged)
        if baseline:
            reward -= self._reward_of(self._last_reward_runtime)
        self._last, self._last_reward_runtime, self._done = m, charged, done
        return self._observation(), float(reward), done, False, self._info(m, charged)

    def action_masks(self) -> np.ndarray:
        """Devices each group may go to (those with kernels for all its ops), for MaskablePPO.

        oneshot: flat bool vector of length S * D (padding slots allow device 0 only);
        sequential / improve: bool vector of length D for the current group.
        """
        allowed = self._task.allowed
        if self.mode == "oneshot":
            mask = np.zeros((self.slots, self.cluster.n_devices), bool)
            mask[: self.n_groups] = allowed
            mask[self.n_groups:, 0] = True
            return mask.reshape(-1)
        if self._done:
            return np.ones(self.cluster.n_devices, bool)
        return allowed[self._current_group()].copy()

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
