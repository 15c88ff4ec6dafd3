"""Fit the K80 machine's free parameters to the seed paper's measured table, and test the fit on
models it did not see.

The seed (Mirhoseini et al. 2017, 2 K80 GPUs, real TF, seconds per step) measured five
placements of each of its three models: one CPU, one GPU (NMT: out of memory), Scotch, MinCut
and the expert's. The fit sees only the 1 CPU, 1 GPU and expert rows of the models it is given,
and matches their *ratios* (1 CPU / 1 GPU and expert / 1 GPU; NMT, whose one GPU is out of
memory: 1 CPU / expert): our graphs are built from code, not the paper's, so their absolute
step times differ by a per-model factor no machine parameter should absorb. The loss is the
squared log error of those ratios plus a weak pull (weight ``PRIOR_WEIGHT``) of each parameter
towards its physical prior (:data:`~placement_env.cluster.k80.DEFAULT_PARAMETERS`), which keeps
parameters that the rows cannot tell apart at sensible values.

Which expert: we place the expert two ways (:mod:`baselines.expert`): ``expert``, each gradient with its forward op
(``colocate_gradients_with_ops=True``), and ``expert_tf1``, the backward pass on the first GPU, as TF 1.x's default
(``colocate_gradients_with_ops=False``) left a hand placement written with ``tf.device`` around the forward pass.
The seed's expert was such a placement in the TF of early 2017, so the fit, the ratios and the rank correlation take
``expert_tf1`` (:data:`SEED_EXPERT`) as the seed's expert row; the report shows both.

``leave_one_model_out`` fits on two models and predicts every row of the third, Scotch and
MinCut included; ``report`` prints the seed's table and the simulator's side by side. The
placements come from the caller (the command line resolves the baselines by name), so this
module needs no baseline code.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.stats import spearmanr

from ..cluster.k80 import DEFAULT_PARAMETERS, FITTED, check_parameters, k80_machine
from ..costs import analytical_costs
from ..opgraph import OpGraph
from ..runtime.simulated import SimulationPlan

# The seed's Table (2 K80 GPUs; seconds per step; None: out of memory). Source: shared/seeds,
# confirmed rows of reference.md section 2.
SEED_TABLE: dict[str, dict[str, float | None]] = {
    "rnnlm": {"single_cpu": 6.89, "single_gpu": 1.57, "scotch": 13.43, "mincut": 11.94, "expert": 3.81},
    "nmt": {"single_cpu": 10.72, "single_gpu": None, "scotch": 14.19, "mincut": 11.54, "expert": 4.99},
    "inception_v3": {"single_cpu": 26.21, "single_gpu": 4.60, "scotch": 25.24, "mincut": 22.88, "expert": 11.22},
}
SEED_METHODS = ("single_cpu", "single_gpu", "scotch", "mincut", "expert")  # the seed's rows, in its order
# The placement that stands for the seed's expert row (see the module docstring), and both experts we simulate.
SEED_EXPERT = "expert_tf1"
EXPERTS = ("expert", "expert_tf1")
METHODS = ("single_cpu", "single_gpu", "scotch", "mincut", *EXPERTS)  # the placements each model is simulated with
FIT_METHODS = ("single_cpu", "single_gpu", SEED_EXPERT)  # the ones the fit's ratios read
PRIOR_WEIGHT = 0.02
# Search bounds (physical): efficiencies and the CPU op share in (0, 1]; the per-transfer cost from
# 1 us to 100 ms; the achieved PCIe bandwidth from 0.5 GB/s to the x16 link's 15.75 GB/s.
BOUNDS: dict[str, tuple[float, float]] = {
    "gpu_efficiency": (0.01, 1.0),
    "cpu_efficiency": (0.01, 1.0),
    "cpu_op_share": (1 / 18, 1.0),
    "transfer_overhead_s": (1e-6, 0.1),
    "pcie_bandwidth": (0.5e9, 15.75e9),
}


@dataclass(frozen=True)
class Model:
    """One of the seed's models as the fit sees it: its graph, base costs and its placements (:data:`METHODS`).

    ``base_seconds``: analytical op costs on the K80 machine at full efficiency, without the per-op
    overheads (``overheads``), so any efficiency is a division (grappler's times are linear in 1/rate).
    """

    name: str
    graph: OpGraph
    base_seconds: np.ndarray
    overheads: np.ndarray
    placements: Mapping[str, np.ndarray]

    def runtimes(self, parameters: Mapping[str, float],
                 methods: Sequence[str] | None = None) -> dict[str, tuple[float, bool]]:
        """(simulated seconds, fits in memory) of the placements ``methods`` (default: all) on the machine with
        ``parameters``."""
        cluster = k80_machine(2, parameters)
        efficiency = np.where(cluster.kinds == 0, parameters["cpu_efficiency"], parameters["gpu_efficiency"])
        seconds = self.base_seconds / efficiency + self.overheads
        plan = SimulationPlan(self.graph, cluster, seconds)
        out = {}
        for method in self.placements if methods is None else methods:
            m = plan.run(self.placements[method])
            out[method] = (float(m.runtime_s), m.ok or m.failure != "oom")
        return out


def prepare(name: str, graph: OpGraph, placements: Mapping[str, np.ndarray]) -> Model:
    """A Model of ``graph`` with its ``placements``, one per :data:`METHODS` (made on ``k80_machine(2)``)."""
    full = k80_machine(2, {**DEFAULT_PARAMETERS, "gpu_efficiency": 1.0, "cpu_efficiency": 1.0})
    costs = analytical_costs(graph, full)
    return Model(name, graph, costs.seconds - full.op_overhead_s, full.op_overhead_s.copy(), dict(placements))


def as_seed_rows(simulated: Mapping[str, float]) -> dict[str, float]:
    """The simulated times under the seed's row names: :data:`SEED_EXPERT`'s time as ``expert``."""
    source = {m: SEED_EXPERT if m == "expert" else m for m in SEED_METHODS}
    return {m: simulated[ours] for m, ours in source.items() if ours in simulated}


def ratios(runtimes: Mapping[str, float]) -> dict[str, float]:
    """The ratios the fit matches: 1 CPU / 1 GPU and expert / 1 GPU, or 1 CPU / expert without a GPU row."""
    if runtimes.get("single_gpu") is None:
        return {"cpu/expert": runtimes["single_cpu"] / runtimes["expert"]}
    return {"cpu/gpu": runtimes["single_cpu"] / runtimes["single_gpu"],
            "expert/gpu": runtimes["expert"] / runtimes["single_gpu"]}


def _to_vector(parameters: Mapping[str, float]) -> np.ndarray:
    return np.log([parameters[key] for key in BOUNDS])


def _from_vector(x: np.ndarray) -> dict[str, float]:
    return {key: float(np.clip(math.exp(v), *BOUNDS[key])) for key, v in zip(BOUNDS, x)}


def loss(parameters: Mapping[str, float], models: Sequence[Model]) -> float:
    """Squared log error of the fitted ratios over ``models`` plus the prior's pull."""
    total = 0.0
    for model in models:
        simulated = as_seed_rows({m: t for m, (t, _) in model.runtimes(parameters, FIT_METHODS).items()})
        seed = SEED_TABLE[model.name]
        wanted = ratios(seed)
        got = ratios(simulated | ({"single_gpu": None} if seed["single_gpu"] is None else {}))
        total += sum(math.log(got[k] / wanted[k]) ** 2 for k in wanted)
    prior = _to_vector(DEFAULT_PARAMETERS)
    total += PRIOR_WEIGHT * float(np.sum((_to_vector(parameters) - prior) ** 2))
    return total


def fit(models: Sequence[Model], *, starts: int = 3, seed: int = 0,
        progress: Callable[[int], None] | None = None) -> dict[str, float]:
    """The parameters that minimise :func:`loss` on ``models`` (Nelder-Mead in log space, a few starts)."""
    rng = np.random.default_rng(seed)
    lower, upper = np.log([b[0] for b in BOUNDS.values()]), np.log([b[1] for b in BOUNDS.values()])
    best_x, best_value = None, math.inf
    for start in range(starts):
        x0 = _to_vector(DEFAULT_PARAMETERS) if start == 0 else rng.uniform(lower, upper)
        result = minimize(lambda x: loss(_from_vector(x), models), x0, method="Nelder-Mead",
                          options={"maxfev": 600, "xatol": 1e-3, "fatol": 1e-6})
        if progress is not None:
            progress(start)
        if result.fun < best_value:
            best_x, best_value = result.x, float(result.fun)
    return check_parameters(_from_vector(best_x))


@dataclass(frozen=True)
class Prediction:
    """Every row of one model on the machine with ``parameters``, next to the seed's."""

    model: str
    parameters: dict[str, float]
    simulated: dict[str, tuple[float, bool]]

    @property
    def seed(self) -> dict[str, float | None]:
        return SEED_TABLE[self.model]

    def order_matches(self) -> bool:
        """Whether the seed's order of its five placements holds (an OOM row counts as slowest; our expert is
        :data:`SEED_EXPERT`)."""
        return self.rank_correlation() == 1.0

    def rank_correlation(self) -> float:
        seed = [math.inf if self.seed[m] is None else self.seed[m] for m in SEED_METHODS]
        rows = as_seed_rows({m: t if fits else math.inf for m, (t, fits) in self.simulated.items()})
        simulated = [rows[m] for m in SEED_METHODS]
        return float(spearmanr(seed, simulated).statistic)


def leave_one_model_out(models: Sequence[Model], **fit_options) -> list[Prediction]:
    """For each model: fit on the others, predict its rows."""
    out = []
    for held_out in models:
        parameters = fit([m for m in models if m is not held_out], **fit_options)
        out.append(Prediction(held_out.name, parameters, held_out.runtimes(parameters)))
    return out


def report(all_fit: Mapping[str, float], in_sample: Sequence[Prediction], held_out: Sequence[Prediction]) -> str:
    """Markdown: the parameters fitted on all three models, then per model the seed's rows, the
    rows of that fit, and the rows predicted by the fit that left the model out. Both experts have a column; the
    seed's expert row stands in :data:`SEED_EXPERT`'s, and the ratios and the rank correlation use that one."""
    lines = ["Fitted on all three models: " + ", ".join(f"{k} = {v:.4g}" for k, v in all_fit.items()),
             f"The seed's expert is compared with {SEED_EXPERT} (ratios, rank correlation, the fit).", "",
             "| model | rows from | 1 CPU | 1 GPU | Scotch | MinCut | expert | expert (TF1) | 1 CPU / 1 GPU | "
             "expert / 1 GPU | 1 CPU / expert | rank correlation with the seed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in SEED_TABLE:
        seed = {m: (math.nan if t is None else t, t is not None) for m, t in SEED_TABLE[model].items()}
        seed = {(SEED_EXPERT if m == "expert" else m): row for m, row in seed.items()}
        lines.append(_row(model, "seed (real K80s)", seed, ""))
        for label, predictions in (("fit on all three", in_sample), ("fit without it", held_out)):
            for p in predictions:
                if p.model == model:
                    lines.append(_row(model, label, p.simulated, f"{p.rank_correlation():.2f}"))
    return "\n".join(lines)


def _row(model: str, label: str, rows: Mapping[str, tuple[float, bool]], correlation: str) -> str:
    """One table row; a method ``rows`` lacks (the seed has one expert) is '-'."""
    cells = ["-" if m not in rows else "OOM" if not rows[m][1] else f"{rows[m][0]:.3g}" for m in METHODS]
    t = {m: (v if fits else None) for m, (v, fits) in rows.items()}
    return (f"| {model} | {label} | " + " | ".join(cells) + f" | {_ratio(t['single_cpu'], t['single_gpu'])} | "
            f"{_ratio(t[SEED_EXPERT], t['single_gpu'])} | {_ratio(t['single_cpu'], t[SEED_EXPERT])} | {correlation} |")


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def save(parameters: Mapping[str, float], provenance: Mapping[str, object], path: Path = FITTED) -> Path:
    """Write the fitted parameters (what ``k80_machine`` reads) with how they were made."""
    path.write_text(json.dumps({"parameters": check_parameters(parameters), **provenance}, indent=2) + "\n",
                    encoding="utf-8")
    return path
