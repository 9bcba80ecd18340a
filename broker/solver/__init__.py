"""The placement solver: pure functions over domain objects, no I/O."""

from broker.solver.heap import bound_the_heap
from broker.solver.problem import PlacementProblem
from broker.solver.solve import solve

bound_the_heap()  # a process that solves keeps no freed arrays resident (heap.py)

__all__ = ["PlacementProblem", "solve"]
