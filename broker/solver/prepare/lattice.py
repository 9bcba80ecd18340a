"""Per-node capacity rounded down to what replicas of the request can fill.

Allocatable capacity is fractional (a 4-vCPU node allocates 3.82 vCPU after reservations), and
the model's capacity rule is aggregate: with 1-vCPU replicas it would count 3.82 of them per node
where only 3 fit, and exact packing would then open the nodes the model never priced. When every
replica size of the request is a multiple of one step g (0.25 vCPU, 0.5 GiB, ...), so is every
sum of them, so a node can hold no more than its capacity rounded down to a multiple of g:
rounding is exact for every packing, and it tightens the aggregate rule and its bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from broker.core.pooltable import FloatArray

_MAX_DENOMINATOR = 1000  # steps finer than a thousandth are not rounded to


def common_step(sizes: Iterable[float]) -> float | None:
    """The largest g such that every size is an integer multiple of g (None: no exact rational
    step, or no sizes)."""
    step: Fraction | None = None
    for size in sizes:
        if size <= 0:
            continue
        f = Fraction(size).limit_denominator(_MAX_DENOMINATOR)
        if abs(float(f) - size) > 1e-9:
            return None
        step = (
            f
            if step is None
            else Fraction(
                math.gcd(step.numerator * f.denominator, f.numerator * step.denominator),
                step.denominator * f.denominator,
            )
        )
    return None if step is None else float(step)


def round_down(capacity: FloatArray, step: float | None) -> FloatArray:
    """`capacity` rounded down to multiples of `step` (as it is without a step)."""
    if step is None:
        return capacity
    rounded = np.floor(capacity / step + 1e-9) * step
    # a node below one step holds no replica either way: kept as it is, never a zero to divide by
    return np.where(rounded > 0, rounded, capacity)
