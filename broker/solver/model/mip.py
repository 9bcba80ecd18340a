"""MIPs as plain arrays: what crosses to wherever a MIP runs, and what comes back.

HiGHS' root cut separation reads neither its clock nor the interrupt callback, so a MIP run in
this process (Master.solve_mip under a watchdog) can overrun its limit. A `MipRunner`, injected
through SolverOptions by an edge of the application (broker/solver_runtime), runs such MIPs
where they can be stopped; it receives the model as arrays (`model_of`), rebuilds it
(`build`) and reports an `Outcome` (`outcome_of`), the best solution found by its limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import highspy
import numpy as np

from broker.core.pooltable import FloatArray
from broker.solver.model.quiet_highs import QuietHighs

_ARRAYS = ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_")


@dataclass
class Outcome:
    status: str  # optimal | feasible | infeasible | unknown (no solution in time)
    value: float
    bound: float
    x: FloatArray  # every column of the model (empty without a solution)
    killed: bool = False


class MipRunner(Protocol):
    """Runs a MIP (`model_of`) somewhere it can be stopped at its limit."""

    @property
    def grace_s(self) -> float:
        """How long past its limit a run may take to report (taken out of the MIP's time)."""
        ...

    def prestart(self) -> None:
        """Get ready now (e.g. start a process), so that the first MIP does not wait for it."""
        ...

    def solve(
        self, model: dict[str, Any], *, time_limit_s: float, options: dict[str, Any], hint: FloatArray | None
    ) -> Outcome:
        """The best solution found within `time_limit_s` (HiGHS `options`, a MIP start `hint`)."""
        ...


def model_of(h: highspy.Highs) -> dict[str, Any]:
    """The model of `h` as plain arrays (what crosses the pipe)."""
    lp = h.getLp()
    a = lp.a_matrix_
    out: dict[str, Any] = {k: np.asarray(getattr(lp, k), dtype=np.float64) for k in _ARRAYS}
    out.update(
        num_col=int(lp.num_col_),
        num_row=int(lp.num_row_),
        offset=float(lp.offset_),
        format=int(a.format_.value),
        start=np.asarray(a.start_, dtype=np.int32),
        index=np.asarray(a.index_, dtype=np.int32),
        value=np.asarray(a.value_, dtype=np.float64),
        integrality=np.array([int(v.value) for v in lp.integrality_], dtype=np.uint8),
    )
    return out


def outcome_of(h: highspy.Highs) -> Outcome:
    """What a finished (or cancelled) MIP run of `h` found, every column of its solution."""
    status = h.getModelStatus()
    info = h.getInfo()
    if status == highspy.HighsModelStatus.kInfeasible:
        return Outcome("infeasible", math.inf, math.inf, np.zeros(0))
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        return Outcome("unknown", math.inf, float(info.mip_dual_bound), np.zeros(0))
    kind = "optimal" if status == highspy.HighsModelStatus.kOptimal else "feasible"
    x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    return Outcome(kind, float(info.objective_function_value), float(info.mip_dual_bound), x)


def build(model: dict[str, Any]) -> highspy.Highs:
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_, lp.offset_ = model["num_col"], model["num_row"], model["offset"]
    for k in _ARRAYS:
        setattr(lp, k, model[k])
    a = lp.a_matrix_
    a.format_ = highspy.MatrixFormat(model["format"])
    a.num_col_, a.num_row_ = model["num_col"], model["num_row"]
    a.start_, a.index_, a.value_ = model["start"], model["index"], model["value"]
    if len(model["integrality"]):
        lp.integrality_ = [highspy.HighsVarType(int(v)) for v in model["integrality"]]
    h = QuietHighs()
    h.passModel(lp)
    return h


@dataclass
class LPResult:
    value: float
    row_dual: FloatArray
    x: FloatArray  # per replica column of the restricted model
    nodes: FloatArray  # per pool of the catalog (0 for pools not in the model)


@dataclass
class MIPResult:
    status: str  # optimal | feasible | infeasible | unknown
    value: float
    bound: float
    x: FloatArray
