"""Each workload's usage over the history and the simulated window, from traces or inline values.

Pure: the traces come in as a table (one row per 5-minute step, columns `<series>:cpu` and
`<series>:mem` in percent of a VM's capacity); loading them is the caller's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from broker.core.pooltable import FloatArray
from broker.errors import InvalidRequest
from broker.simulate.fleet import STEPS_PER_DAY, FleetIn, FleetWorkloadIn


@dataclass(frozen=True)
class Usage:
    """Totals across a workload's replicas at its declared replica count: [workload, step]."""

    cpu: FloatArray  # cores
    memory_gib: FloatArray
    history_steps: int  # steps before the simulated window (what forecasts may learn from)

    @property
    def steps(self) -> int:
        return int(self.cpu.shape[1])


def build_usage(fleet: FleetIn, traces: pd.DataFrame, *, days: float) -> Usage:
    """Usage for `fleet.start_day` days of history plus `days` simulated days.

    Raises InvalidRequest naming the field: an unknown series, or a simulation that runs past
    the end of its usage (trace or inline values)."""
    history = fleet.start_day * STEPS_PER_DAY
    total = history + round(days * STEPS_PER_DAY)
    errors: list[dict[str, Any]] = []
    cpu = np.zeros((len(fleet.workloads), total))
    mem = np.zeros((len(fleet.workloads), total))
    available = len(traces)
    for i, w in enumerate(fleet.workloads):
        loc = ["workloads", i, "usage"]
        u = w.usage
        if u.series is not None:
            col = f"{u.series}:cpu"
            if col not in traces.columns:
                errors.append({"loc": [*loc, "series"], "msg": f"unknown series {u.series!r}"})
                continue
            if available < total:
                errors.append({"loc": ["days"], "msg": _too_long(available, history, total)})
                break
            cpu[i], mem[i] = _from_trace(w, traces, col, total)
        else:
            values = np.asarray(u.cpu, dtype=np.float64)
            if len(values) < total:
                errors.append({"loc": [*loc, "cpu"], "msg": _too_long(len(values), history, total)})
                continue
            cpu[i] = values[:total]
            if u.memory_gib is not None:
                if len(u.memory_gib) < total:
                    errors.append({"loc": [*loc, "memory_gib"], "msg": _too_long(len(u.memory_gib), history, total)})
                    continue
                mem[i] = np.asarray(u.memory_gib[:total], dtype=np.float64)
            else:
                mem[i] = u.memory_fraction * w.memory_gib * w.replicas
    if errors:
        raise InvalidRequest("the fleet's usage is invalid: " + _first(errors), errors=errors)
    return Usage(cpu=cpu, memory_gib=mem, history_steps=history)


def _from_trace(w: FleetWorkloadIn, traces: pd.DataFrame, col: str, total: int) -> tuple[FloatArray, FloatArray]:
    u = w.usage
    pct = traces[col].to_numpy(dtype=np.float64)
    declared_cpu = w.cpu * w.replicas
    if u.scale == "peak":
        top = float(pct.max())
        cpu = pct[:total] / top * u.peak * declared_cpu if top > 0 else np.zeros(total)
    else:
        cpu = pct[:total] / 100.0 * declared_cpu
    mem_col = col[: -len(":cpu")] + ":mem"
    declared_mem = w.memory_gib * w.replicas
    if mem_col in traces.columns:
        mem = traces[mem_col].to_numpy(dtype=np.float64)[:total] / 100.0 * declared_mem
    else:
        mem = np.full(total, u.memory_fraction * declared_mem)
    return cpu, mem


def _too_long(have: int, history: int, total: int) -> str:
    return (
        f"simulation longer than the history: {have / STEPS_PER_DAY:g} days of usage, "
        f"start_day ({history / STEPS_PER_DAY:g}) + days ({(total - history) / STEPS_PER_DAY:g}) needs "
        f"{total / STEPS_PER_DAY:g}"
    )


def _first(errors: list[dict[str, Any]]) -> str:
    e = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}{more}"
