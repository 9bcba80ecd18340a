"""Big MIPs in a child process, killed at their time limit: the solver's `MipRunner` for a
process that serves requests.

HiGHS' root cut separation reads neither the clock nor the interrupt callback, so the in-process
watchdog (Master.solve_mip) cannot hold a request's time limit. A process can be killed. The
child sends every improving solution as HiGHS finds it, so a kill keeps the best one found
before the limit.

A MIP takes an idle child or starts one, so concurrent requests do not queue behind each other,
and the threads of a server's pool share warm children (with one child per thread, a request
landing on another thread of the pool started one cold inside its MIP's limit). A child is kept
between MIPs, since starting one costs a fraction of a second of imports (`prestart` overlaps
that with the caller's work), exits after `idle_exit_s` without a MIP, and is replaced as soon
as it is killed. A new interpreter, not a fork: a fork would copy HiGHS' thread-pool state without its
threads. Not multiprocessing's spawn either: it re-runs the caller's main script in the child
(a script without a main guard would start children forever).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from broker.core.pooltable import FloatArray
from broker.solver.model.mip import Outcome, build, outcome_of

# The child needs HiGHS and the model's builder (broker/solver/model/mip.py) only. Importing
# them through their packages would run `broker.solver`'s and `broker.solver_runtime`'s
# __init__, which import the whole solver (scipy) and the settings (pydantic): that made a
# child's start several times slower, and a small request whose final MIP reached
# `isolate_min_cols` started a child cold and waited for it inside the MIP's time (its MIP then
# found nothing). So the child registers both packages without running their __init__.
_ENTRY = """
import importlib.util, sys, types
for name in ("broker.solver", "broker.solver_runtime"):
    spec = importlib.util.find_spec(name)
    package = types.ModuleType(name)
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules[name] = package
from broker.solver_runtime.mip_child import main
main(sys.argv[1:])
"""


class ChildProcessMipRunner:
    """Runs MIPs in child processes, one MIP per child at a time (see the module's docstring)."""

    def __init__(self, *, idle_exit_s: float = 600.0, grace_s: float = 0.25) -> None:
        """`idle_exit_s`: a child with no MIP for this long exits, freeing its memory (the next MIP
        starts another). `grace_s`: how long past its limit a child may take to report before it
        is killed (HiGHS' own clock stops it at the limit when it can; this covers the reply of a
        big solution)."""
        self.idle_exit_s = idle_exit_s
        self._grace_s = grace_s
        self._lock = threading.Lock()
        self._idle: list[_Child] = []  # started children no MIP is using, the last used last

    @property
    def grace_s(self) -> float:
        return self._grace_s

    def prestart(self) -> None:
        """Have an idle child ready, so its imports overlap the caller's work."""
        with self._lock:
            self._idle = [c for c in self._idle if c.alive()]
            if self._idle:
                return
        self._give_back(_Child(self.idle_exit_s))

    def close(self) -> None:
        """Stop the idle children (the next MIP starts another)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()

    def child(self) -> _Child:
        """An idle child, the last used first (started, its imports done), or a new one."""
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.alive():
                    return child
                child.kill()  # exited after idle_exit_s: closes its pipes
        return _Child(self.idle_exit_s)

    def idle(self) -> int:
        """How many started children wait for a MIP."""
        with self._lock:
            return sum(c.alive() for c in self._idle)

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            self._idle.append(child)

    def solve(
        self,
        model: dict[str, Any],
        *,
        time_limit_s: float,
        options: dict[str, Any],
        hint: FloatArray | None,
        kill_after_s: float | None = None,
    ) -> Outcome:
        """Solve `model` (mip.model_of) in this thread's child; kill it `kill_after_s` (default:
        the limit plus the grace) from now and return the best solution it reported by then. A
        child found dead before it answered (killed from outside, out of memory) is replaced once."""
        start = time.monotonic()
        kill_at = start + (time_limit_s + self._grace_s if kill_after_s is None else kill_after_s)
        job = {"model": model, "options": options, "hint": hint, "deadline": start + time_limit_s}
        bound = -math.inf
        for attempt in range(2):
            child = self.child()
            best: tuple[float, FloatArray] | None = None
            try:
                child.send.send(job)
                while (wait := kill_at - time.monotonic()) > 0 and child.recv.poll(wait):
                    msg = child.recv.recv()
                    if msg[0] == "done":
                        _, status, value, bound, x = msg
                        self._give_back(child)
                        return Outcome(status, value, bound, x)
                    bound = max(bound, msg[3])  # a dual bound holds whenever HiGHS reports it
                    if best is None or msg[1] < best[0]:
                        best = (msg[1], msg[2])
                died = False
            except (EOFError, OSError):  # the child died: what it sent stands, or a new one tries
                died = True
            child.kill()  # dead, or past the limit: only a kill stops HiGHS' cut loop
            # its replacement starts now, so its imports overlap the caller's work and the next
            # MIP (this request's or the next one's) does not wait for them inside its limit
            self._give_back(_Child(self.idle_exit_s))
            if not (died and best is None and attempt == 0):
                break
        if best is None:
            return Outcome("unknown", math.inf, -math.inf, np.zeros(0), killed=True)
        return Outcome("feasible", best[0], bound, best[1], killed=True)


class _Child:
    """A new interpreter running `main` with two pipes of its own. Its stdout, where HiGHS prints
    its banner, goes nowhere."""

    def __init__(self, idle_exit_s: float) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        root = str(Path(__file__).resolve().parents[2])  # where `broker` is, installed or not
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ENTRY, str(down_r), str(up_w), repr(float(idle_exit_s))],
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


def _serve(jobs: Connection, conn: Connection, idle_exit_s: float) -> None:
    """The child: one MIP per message until the pipe closes, or none comes for `idle_exit_s`."""
    while True:
        try:
            if not jobs.poll(idle_exit_s):
                return
            job = jobs.recv()
        except EOFError:
            return
        h = build(job["model"])
        for k, v in job["options"].items():
            h.setOptionValue(k, v)
        h.setOptionValue("time_limit", max(0.05, job["deadline"] - time.monotonic()))

        def improving(e: Any) -> None:
            d = e.data_out
            solution = np.array(d.mip_solution, dtype=np.float64)
            conn.send(("better", float(d.objective_function_value), solution, float(d.mip_dual_bound)))

        h.cbMipImprovingSolution += improving
        if job["hint"] is not None:
            n = len(job["hint"])
            h.setSolution(n, np.arange(n, dtype=np.int32), job["hint"])
        h.run()
        out = outcome_of(h)
        conn.send(("done", out.status, out.value, out.bound, out.x))


def main(argv: list[str]) -> None:
    """The child's entry: its job and reply pipes' descriptors, and its idle exit in seconds."""
    jobs = Connection(int(argv[0]), writable=False)
    replies = Connection(int(argv[1]), readable=False)
    _serve(jobs, replies, float(argv[2]))
