"""Exact placement on a relaxation of the simulator: a CP-SAT model of placement and schedule
(:mod:`.cp_sat`) on the relaxed semantics of :mod:`.relaxation`, giving placements and a lower bound that no
successful simulated placement beats."""
from .cp_sat import ExactResult
from .relaxation import RelaxedModel, relax
from .solve import relaxation_bound, solve_exact

__all__ = ["ExactResult", "RelaxedModel", "relax", "relaxation_bound", "solve_exact"]
