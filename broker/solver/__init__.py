"""The placement solver: pure functions over domain objects, no I/O, nothing done at import.

`solve(problem, options=SolverOptions())` is the entry point (solve.py); docs/solver.md is the
guide to the pipeline and its modules.
"""

from broker.solver.options import ShareBoundOptions, SolverOptions, WorkLimits
from broker.solver.problem import PlacementProblem
from broker.solver.solve import solve

__all__ = ["PlacementProblem", "ShareBoundOptions", "SolverOptions", "WorkLimits", "solve"]
