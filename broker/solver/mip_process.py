"""Big MIPs in a child process, killed at their time limit.

HiGHS' root cut separation reads neither the clock nor the interrupt callback: at 3,000
workloads a 7.6k-column MIP ran 19 s for a 7 s limit (1,425 cuts, 492 LP iterations), so the
in-process watchdog (Master.solve_mip) cannot hold a request's time limit. A process can be
killed. The child sends every improving solution as HiGHS finds it, so a kill keeps the best
one found before the limit.

One child per calling thread (concurrent requests do not queue behind each other). It is kept
between MIPs, since starting one costs ~0.5 s of imports (`prestart` overlaps that with the
caller's work), exits after IDLE_EXIT_S without a MIP, and is replaced after a kill. A new
interpreter, not a fork: a fork would copy HiGHS' thread-pool state without its threads.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import highspy
import numpy as np

from broker.core.pooltable import FloatArray
from broker.solver.quiet_highs import QuietHighs

# how long past its limit a child may take to report before it is killed (HiGHS' own clock
# stops it at the limit when it can; this covers the reply of a big solution)
GRACE_S = 0.25
# a child with no MIP for this long exits (read by the child: its environment can change it)
IDLE_EXIT_S = float(os.environ.get("BROKER_MIP_IDLE_EXIT_S", "600"))
_ARRAYS = ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_")


@dataclass
class Outcome:
    status: str  # optimal | feasible | infeasible | unknown (no solution in time)
    value: float
    bound: float
    x: FloatArray  # every column of the model (empty without a solution)
    killed: bool = False


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


def _build(model: dict[str, Any]) -> highspy.Highs:
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


def _serve(jobs: Connection, conn: Connection) -> None:
    """The child: one MIP per message until the pipe closes."""
    while True:
        try:
            if not jobs.poll(IDLE_EXIT_S):  # idle: free its memory (the next MIP starts another)
                return
            job = jobs.recv()
        except EOFError:
            return
        h = _build(job["model"])
        for k, v in job["options"].items():
            h.setOptionValue(k, v)
        h.setOptionValue("time_limit", max(0.05, job["deadline"] - time.monotonic()))

        def improving(e: Any) -> None:
            d = e.data_out
            conn.send(("better", float(d.objective_function_value), np.array(d.mip_solution, dtype=np.float64)))

        h.cbMipImprovingSolution += improving
        if job["hint"] is not None:
            n = len(job["hint"])
            h.setSolution(n, np.arange(n, dtype=np.int32), job["hint"])
        h.run()
        out = outcome_of(h)
        conn.send(("done", out.status, out.value, out.bound, out.x))


_ENTRY = "import sys; from broker.solver.mip_process import main; main(sys.argv[1:])"


class _Child:
    """A new interpreter running `main` with two pipes of its own: not multiprocessing's
    spawn, which re-runs the caller's main script in the child (a script without a main guard
    would start children forever). Its stdout, where HiGHS prints its banner, goes nowhere."""

    def __init__(self) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        root = str(Path(__file__).resolve().parents[2])  # where `broker` is, installed or not
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ENTRY, str(down_r), str(up_w)],
            pass_fds=(down_r, up_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        os.close(down_r)
        os.close(up_w)
        self.send = Connection(down_w, readable=False)
        self.recv = Connection(up_r, writable=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.send.close()
        self.recv.close()


_local = threading.local()


def _child() -> _Child:
    child: _Child | None = getattr(_local, "child", None)
    if child is None or not child.alive():
        child = _local.child = _Child()
    return child


def prestart() -> None:
    """Start this thread's child now, so its imports overlap the caller's work."""
    _child()


def solve(
    model: dict[str, Any],
    *,
    time_limit_s: float,
    options: dict[str, Any],
    hint: FloatArray | None,
    kill_after_s: float | None = None,
) -> Outcome:
    """Solve `model` (model_of) in this thread's child; kill it `kill_after_s` (default: the
    limit plus GRACE_S) from now and return the best solution it reported by then. A child
    found dead before it answered (killed from outside, out of memory) is replaced once."""
    start = time.monotonic()
    kill_at = start + (time_limit_s + GRACE_S if kill_after_s is None else kill_after_s)
    job = {"model": model, "options": options, "hint": hint, "deadline": start + time_limit_s}
    for attempt in range(2):
        child = _child()
        best: tuple[float, FloatArray] | None = None
        try:
            child.send.send(job)
            while (wait := kill_at - time.monotonic()) > 0 and child.recv.poll(wait):
                msg = child.recv.recv()
                if msg[0] == "done":
                    _, status, value, bound, x = msg
                    return Outcome(status, value, bound, x)
                if best is None or msg[1] < best[0]:
                    best = (msg[1], msg[2])
            died = False
        except (EOFError, OSError):  # the child died: what it sent stands, or a new one tries
            died = True
        child.kill()  # dead, or past the limit: only a kill stops HiGHS' cut loop
        _local.child = None
        if not (died and best is None and attempt == 0):
            break
    if best is None:
        return Outcome("unknown", math.inf, -math.inf, np.zeros(0), killed=True)
    return Outcome("feasible", best[0], -math.inf, best[1], killed=True)


def main(fds: list[str]) -> None:
    """The child's entry: its job and reply pipes' descriptors."""
    _serve(Connection(int(fds[0]), writable=False), Connection(int(fds[1]), readable=False))
