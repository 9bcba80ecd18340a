"""The search for a placement and its proof (pipeline.py); enterprise-sized requests in groups
(split.py)."""

from broker.solver.search.pipeline import search
from broker.solver.search.state import SearchResult

__all__ = ["SearchResult", "search"]
