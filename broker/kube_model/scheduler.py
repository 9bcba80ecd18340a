"""kube-scheduler: filter the nodes a pod fits, score them LeastAllocated, bind to the best.

Resources are (cpu, memory GiB, GPUs), as declared requests against a node's allocatable room.
Each function takes numpy arrays or Python floats alike where it can: the baselines' packer
reads one node at a time as floats, the simulator scores all nodes at once; the arithmetic is
the same IEEE doubles either way.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray

# a request that exactly fills what is left still fits (sums of fractional requests round)
EPS = 1e-9

Num = TypeVar("Num", float, FloatArray)


def fits(free: FloatArray, need: FloatArray) -> BoolArray:
    """NodeResourcesFit's filter: [node] whether `need` (cpu, memory, GPUs) fits the room `free`
    [3, node] leaves."""
    return np.asarray((free >= need[:, None] - EPS).all(axis=0), dtype=bool)


def least_allocated(cpu_free: Num, mem_free: Num, cpu_cap: Num, mem_cap: Num) -> Num:
    """NodeResourcesFit's LeastAllocated score: the mean free share of cpu and memory (higher is
    better: pods spread over the emptiest nodes). A node of zero cpu or memory scores that share 0."""
    if isinstance(cpu_cap, float) or bool((cpu_cap > 0).all() and (mem_cap > 0).all()):
        # every real node: the division alone (nan_to_num costs more than it)
        return (cpu_free / cpu_cap + mem_free / mem_cap) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.nan_to_num(cpu_free / cpu_cap) + np.nan_to_num(mem_free / mem_cap)) / 2


def select_node(scores: FloatArray) -> int:
    """selectHost: the position of the highest score, the first of equals (a NaN first, as a sort
    takes it); -1 when every score is -inf (no node passed the filter) or there are none."""
    if len(scores) == 0:
        return -1
    j = int(scores.argmax())
    return j if scores[j] != -np.inf else -1
