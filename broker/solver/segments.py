"""Runs of equal keys in sorted arrays: where each starts, and each run's cheapest entry."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.core.pooltable import FloatArray, IntArray


def group_bounds(keys: npt.NDArray[np.integer]) -> IntArray:
    """Where each run of equal sorted keys starts, and the end: run g is [bounds[g], bounds[g + 1])."""
    if len(keys) == 0:
        return np.zeros(1, dtype=np.int64)
    return np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1], [True]]))


def cheapest_per_site(cost: FloatArray, by_site: IntArray, bounds: IntArray) -> tuple[IntArray, IntArray]:
    """The site groups (positions `by_site[bounds[g] : bounds[g + 1]]`) in the order a stable sort of
    `cost` first reaches them, and each group's first position at its cheapest cost: sites by their
    cheapest candidate, ties to the lower position, sites whose costs are all NaN last (as sort
    puts NaN)."""
    grouped = cost[by_site]
    starts = bounds[:-1]
    cheapest = np.fmin.reduceat(grouped, starts)
    at_cheapest = np.repeat(cheapest, np.diff(bounds))
    hit = (grouped == at_cheapest) | np.isnan(at_cheapest)
    first = np.minimum.reduceat(np.where(hit, by_site, len(grouped)), starts)
    return np.lexsort((first, cheapest)), first
