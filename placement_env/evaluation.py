"""One entry point for the step time of a placement: ``pe.evaluate``, ``Evaluator`` and ``pe.lower_bound``.

``runtime`` picks who answers:

* ``"sim"`` (default): the compiled event simulator on per-op costs (grappler's analytical model
  unless ``costs`` are given, e.g. measured or calibrated ones);
* ``"grappler"``: TensorFlow's VirtualCluster, for cross-checks;
* ``"measured"``: the placed step run for real on the cluster's TF workers (``local:N``).

Op costs and measured-runtime workers are kept in :data:`~placement_env.derived.DERIVED` per
(graph, cluster), so repeated calls cost only the evaluation itself.
"""
from __future__ import annotations

import atexit
import inspect
from typing import Any

import numpy as np

from .benchmarks import load_benchmark
from .cluster import Cluster, load_cluster
from .cluster.checks import bad_argument, check_bool, check_number
from .costs import OpCosts, analytical_costs
from .costs import lower_bound as _lower_bound
from .derived import DERIVED
from .errors import ArgumentError, InvalidPlacementError
from .opgraph import OpGraph
from .placement import Measurement
from .runtime.measured import MeasuredRuntime
from .runtime.simulated import SimulationPlan, check_threads, plan_for

RUNTIMES = ("sim", "grappler", "measured")


def _graph(graph: Any) -> OpGraph:
    if isinstance(graph, OpGraph):
        return graph
    if isinstance(graph, str):
        return load_benchmark(graph)
    raise ArgumentError(f"graph is a {type(graph).__name__}; expected an OpGraph or a benchmark name")


def check_runtime(runtime: Any) -> str:
    """``runtime`` if it names a runtime of RUNTIMES, else an ArgumentError listing them."""
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise bad_argument("runtime", runtime, f"one of {', '.join(map(repr, RUNTIMES))}")
    return runtime


def costs_for(graph: OpGraph, cluster: Cluster) -> OpCosts:
    """Analytical op costs of ``graph`` on ``cluster``, computed once per (graph, cluster) object pair."""
    return DERIVED.get("analytical_costs", graph, cluster, build=lambda: analytical_costs(graph, cluster))


def _shared_measured_runtime(cluster: Cluster) -> Any:
    """The MeasuredRuntime that ``evaluate(..., runtime="measured")`` keeps per cluster description."""
    return DERIVED.get("measured_runtime", key=cluster.to_json(), build=lambda: MeasuredRuntime(cluster))


@atexit.register
def _close_shared_measured_runtimes() -> None:
    for runtime in DERIVED.values("measured_runtime"):
        runtime.close()


def _check_costs(graph: OpGraph, cluster: Cluster, costs: Any) -> OpCosts:
    """``costs`` as OpCosts of shape (n_ops, n_devices) with finite seconds >= 0, else an ArgumentError."""
    accepted = (f"OpCosts or an array of finite seconds >= 0 of shape (n_ops, n_devices) = ({graph.n_ops}, "
                f"{cluster.n_devices}) for {graph.name!r} on {cluster.name!r}")
    if not isinstance(costs, OpCosts):
        try:
            costs = OpCosts(seconds=np.asarray(costs, dtype=np.float64), source="given")
        except (TypeError, ValueError, OverflowError) as error:
            raise ArgumentError(f"costs of type {type(costs).__name__} are not numbers ({error}); expected "
                                f"{accepted}") from None
    if costs.seconds.shape != (graph.n_ops, cluster.n_devices):
        raise ArgumentError(f"costs have shape {costs.seconds.shape}; expected {accepted}")
    wrong = ~(np.isfinite(costs.seconds) & (costs.seconds >= 0))
    if wrong.any():
        op, device = (int(k) for k in np.argwhere(wrong)[0])
        value, name = float(costs.seconds[op, device]), str(graph.op_names[op])
        raise ArgumentError(f"costs[{op}, {device}] = {value!r} (op {name!r} on {cluster.devices[device].name}); "
                            f"expected {accepted}")
    return costs


def placement_rows(graph: OpGraph, placements: Any) -> np.ndarray:
    """``placements`` as a 2-D array, one placement of ``graph`` per row (each row is checked when it is
    evaluated), or an InvalidPlacementError naming its shape."""
    try:
        array = np.asarray(placements)
    except ValueError as error:  # rows of different lengths
        raise InvalidPlacementError(f"placements are not one array ({error}); expected (k, {graph.n_groups}): "
                                    "one placement per row") from None
    if array.ndim != 2:
        raise InvalidPlacementError(f"placements has shape {array.shape}; expected (k, {graph.n_groups}): one "
                                    "placement per row")
    return array


MEASURED_OPTIONS = tuple(name for name in inspect.signature(MeasuredRuntime).parameters if name != "cluster")


def check_measured_options(options: Any) -> dict[str, Any]:
    """``options`` as a dict of MeasuredRuntime keywords, or an ArgumentError naming the unknown ones (checked
    when the evaluator or env is made, not at the first measurement)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise bad_argument("measured_options", options, f"a dict with keys from {', '.join(MEASURED_OPTIONS)}")
    unknown = sorted(map(repr, set(options) - set(MEASURED_OPTIONS)))
    if unknown:
        raise ArgumentError(f"measured_options: unknown key(s) {', '.join(unknown)}; accepted: "
                            f"{', '.join(MEASURED_OPTIONS)}")
    return dict(options)


class Evaluator:
    """Evaluates placements of one graph on one cluster with one runtime.

    ``measured_options`` go to :class:`~placement_env.runtime.measured.MeasuredRuntime` (steps,
    warmup, timeout_s, ...). Close it (or use ``with``) to stop measured-runtime workers it started.
    ``threads`` (runtime="sim"): how many of numba's threads a :meth:`batch` shares its placements out
    over (1 by default: an agent's torch threads would otherwise compete for the same cores).
    """

    def __init__(self, graph: Any, cluster: Any, runtime: str = "sim", *, costs: Any = None,
                 measured_options: dict[str, Any] | None = None, threads: int = 1) -> None:
        self.runtime = check_runtime(runtime)
        self.graph = _graph(graph)
        self.cluster = load_cluster(cluster)
        self._costs = None if costs is None else _check_costs(self.graph, self.cluster, costs)
        if runtime != "measured" and measured_options:
            raise ArgumentError(f"measured_options are for runtime='measured', not {runtime!r}")
        self.threads = check_threads(threads)
        if runtime != "sim" and self.threads != 1:
            raise ArgumentError(f"threads={threads!r} is for runtime='sim', not {runtime!r}")
        self._measured_options = check_measured_options(measured_options)
        self._measured = None
        self._lower_bound: float | None = None
        self._plan: SimulationPlan | None = None

    @property
    def costs(self) -> OpCosts:
        """Per-op seconds on every device that the simulator and the lower bound use."""
        if self._costs is None:
            self._costs = costs_for(self.graph, self.cluster)
        return self._costs

    def _simulation_plan(self) -> SimulationPlan:
        """The simulator's plan of this graph, cluster and costs (all fixed: the costs are read-only), found
        once rather than looked up in the derived-data cache on every call."""
        if self._plan is None:
            self._plan = plan_for(self.graph, self.cluster, self.costs.seconds)
        return self._plan

    def _measured_runtime(self) -> Any:
        if self._measured is None:
            self._measured = MeasuredRuntime(self.cluster, **self._measured_options)
        return self._measured

    def __call__(self, placement: Any, *, schedule: bool = False) -> Measurement:
        """The Measurement of ``placement`` (one device index per group)."""
        schedule = check_bool(schedule, "schedule", error=bad_argument)
        if self.runtime == "sim":
            return self._simulation_plan().run(placement, schedule=schedule)
        if schedule:
            raise ArgumentError(f"schedule=True needs runtime='sim'; this evaluator uses {self.runtime!r}")
        if self.runtime == "grappler":
            from .runtime.grappler import grappler_runtime

            return grappler_runtime(self.graph, self.cluster, placement)
        return self._measured_runtime().measure(self.graph, placement)

    def batch(self, placements: Any) -> list[Measurement]:
        """Measurements of every row of ``placements`` ([k, n_groups]); one compiled call for the simulator."""
        array = placement_rows(self.graph, placements)
        if self.runtime == "sim":
            return self._simulation_plan().run_batch(array, threads=self.threads)
        return [self(row) for row in array]

    def lower_bound(self) -> float:
        """``pe.lower_bound`` of this graph and cluster with this evaluator's costs."""
        if self._lower_bound is None:
            self._lower_bound = _lower_bound(self.graph, self.cluster, self.costs)
        return self._lower_bound

    def close(self) -> None:
        if self._measured is not None:
            self._measured.close()
            self._measured = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evaluate(graph: Any, cluster: Any, placement: Any, runtime: str = "sim", *, costs: Any = None,
             schedule: bool = False) -> Measurement:
    """Step time, memory and failure reason of ``placement`` (one device index per group).

    ``graph``: an OpGraph or a benchmark name; ``cluster``: a Cluster or anything
    :func:`~placement_env.cluster.load_cluster` takes. For ``runtime="measured"`` the cluster's
    local workers are started on first use and kept for later calls (stopped at exit).
    """
    runtime = check_runtime(runtime)
    schedule = check_bool(schedule, "schedule", error=bad_argument)
    cluster, graph = load_cluster(cluster), _graph(graph)
    if runtime != "measured":
        return Evaluator(graph, cluster, runtime, costs=costs)(placement, schedule=schedule)
    if costs is not None or schedule:
        raise ArgumentError("costs and schedule are for runtime='sim'; runtime='measured' takes neither")
    return _shared_measured_runtime(cluster).measure(graph, placement)


LOWER_BOUNDS = ("classic", "windows", "cp_sat")


def bound(graph: Any, cluster: Any, costs: Any = None, *, method: str = "windows", time_limit_s: float = 60.0) -> Any:
    """A lower bound on the simulated step time of every successful placement, with how it was found (a
    :class:`~placement_env.exact.bounds.Bound`: ``value_s``, its ``parts``, the solver's status and seconds).

    ``method``: ``"classic"`` (the critical path at each op's fastest device and the work bound; instant),
    ``"windows"`` (also each device's one-machine windows over every assignment of groups, a mixed-integer program
    solved with HiGHS; seconds), ``"cp_sat"`` (the windows bound and CP-SAT's proven bound on the relaxed model of
    placement and schedule, :mod:`placement_env.exact`, each given ``time_limit_s``; the larger stands). ``docs/optimality.md`` derives
    each; all hold for the simulated runtime only.
    """
    from .exact.bounds import Bound, window_bound
    from .exact.solve import relaxation_bound
    graph, cluster = _graph(graph), load_cluster(cluster)
    costs = costs_for(graph, cluster) if costs is None else _check_costs(graph, cluster, costs)
    if not isinstance(method, str) or method not in LOWER_BOUNDS:
        raise bad_argument("method", method, f"one of {', '.join(map(repr, LOWER_BOUNDS))}")
    time_limit_s = check_number(time_limit_s, "time_limit_s", 0, low_open=True, error=bad_argument,
                                rule="solver seconds > 0")
    if method == "classic":
        value = _lower_bound(graph, cluster, costs)
        return Bound(value, {"classic": value}, "optimal", 0, 0.0)
    if method == "windows":
        return window_bound(graph, cluster, costs, time_limit_s=time_limit_s)
    windows = window_bound(graph, cluster, costs, time_limit_s=time_limit_s)
    value, result = relaxation_bound(graph, cluster, costs, time_limit_s=time_limit_s)
    return Bound(max(windows.value_s, value), {**windows.parts, "cp_sat": value}, result.status.lower(),
                 windows.rounds, windows.solver_s + result.solver_s)


def lower_bound(graph: Any, cluster: Any, costs: Any = None, *, method: str = "classic",
                time_limit_s: float = 60.0) -> float:
    """A lower bound on the simulated step time of every successful placement: ``bound(...).value_s``. The default
    ``"classic"``: max(critical path at each op's fastest device, work bound over the devices), memory and
    communication ignored; ``"windows"`` and ``"cp_sat"`` are tighter and take solver time (see :func:`bound`)."""
    return bound(graph, cluster, costs, method=method, time_limit_s=time_limit_s).value_s
