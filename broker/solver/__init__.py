"""The placement solver: pure functions over domain objects, no I/O."""

from broker.solver.problem import PlacementProblem
from broker.solver.solve import solve

__all__ = ["PlacementProblem", "solve"]
