"""MIPs in a child process (solver_runtime/mip_child.py): same answers as in process, and a kill
at the limit keeps the best solution the child reported."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import highspy
import numpy as np
import pytest

from broker.solver import SolverOptions
from broker.solver.model.layout import make_layout
from broker.solver.model.master import Master
from broker.solver.model.mip import model_of
from broker.solver.model.universe import make_universe
from broker.solver.search import search
from broker.solver_runtime.mip_child import _ENTRY, ChildProcessMipRunner

from ..solver.support.cases import case


@pytest.fixture
def runner() -> Iterator[ChildProcessMipRunner]:
    out = ChildProcessMipRunner()
    yield out
    out.close()


def _knapsacks(n: int, m: int, seed: int) -> highspy.Highs:
    """A multi-dimensional knapsack (maximise value, as a minimisation): hard enough that HiGHS
    does not prove it in seconds at n=300, m=20."""
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, size=(m, n)).astype(np.float64)
    value = w.sum(axis=0) + rng.integers(0, 50, size=n)
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    h.addRows(m, np.full(m, -inf), w.sum(axis=1) / 2, 0, np.zeros(1, np.int32), np.zeros(0, np.int32), np.zeros(0))
    start = np.arange(n, dtype=np.int32) * m
    index = np.tile(np.arange(m, dtype=np.int32), n)
    h.addCols(n, -value, np.zeros(n), np.ones(n), n * m, start, index, w.T.ravel())
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.ones(n, dtype=np.uint8))
    return h


def test_the_child_solves_what_the_master_solves_in_process(runner: ChildProcessMipRunner) -> None:
    mi, _starts, _lp, optimum = case(0)
    lay = make_layout(mi)
    uni = make_universe(mi, lay)
    m = Master(mi, lay, uni)
    m.add_columns(np.arange(uni.size))
    inside = m.solve_mip(time_limit_s=30, seed=0, hint=None, rel_gap=1e-9)
    child = m.solve_mip(time_limit_s=30, seed=0, hint=None, rel_gap=1e-9, runner=runner)
    assert inside.status == child.status == "optimal"
    assert child.value == pytest.approx(optimum, rel=1e-7)
    assert m.placement(child.x) == m.placement(inside.x) or child.value == pytest.approx(inside.value, rel=1e-9)


def test_a_kill_at_the_limit_keeps_the_best_solution_reported(runner: ChildProcessMipRunner) -> None:
    h = _knapsacks(300, 20, seed=1)
    model = model_of(h)
    hint = np.zeros(300)  # feasible (take nothing): reported at once as the MIP start
    small = model_of(_knapsacks(8, 2, seed=2))
    assert runner.solve(small, time_limit_s=10, options={}, hint=None).status == "optimal"  # a child ready
    started = time.monotonic()
    # HiGHS' own limit far away, the kill after 1.5 s: what a cut loop that ignores the clock looks like
    out = runner.solve(model, time_limit_s=60, options={"mip_rel_gap": 0.0}, hint=hint, kill_after_s=1.5)
    assert time.monotonic() - started < 5
    assert out.killed
    assert out.status == "feasible"
    assert out.value < 0  # HiGHS improved on the empty knapsack before the kill
    assert len(out.x) == 300 and set(np.round(out.x)) <= {0.0, 1.0}
    # the returned solution is what its value says
    assert float(model["col_cost_"] @ out.x) == pytest.approx(out.value, rel=1e-9)
    # HiGHS' dual bound when it reported its last solution holds, and comes back with it
    assert math.isfinite(out.bound) and out.bound <= out.value + 1e-9
    # the replacement started with the kill, so the next MIP need not wait for its imports
    assert runner.idle() == 1  # started by the kill, not by the next MIP
    again = runner.solve(small, time_limit_s=10, options={}, hint=None)
    assert again.status == "optimal" and not again.killed


def test_threads_share_idle_children(runner: ChildProcessMipRunner) -> None:
    """A server's thread pool runs each request on any of its threads: a child one thread used
    serves the next MIP of another, warm."""
    small = model_of(_knapsacks(8, 2, seed=5))
    assert runner.solve(small, time_limit_s=10, options={}, hint=None).status == "optimal"
    warm = runner.child()
    runner._give_back(warm)
    pids: list[int] = []

    def other_thread() -> None:
        assert runner.solve(small, time_limit_s=10, options={}, hint=None).status == "optimal"
        child = runner.child()
        pids.append(child.proc.pid)
        runner._give_back(child)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert pids == [warm.proc.pid] and runner.idle() == 1


def test_a_child_starts_without_importing_the_solver_or_the_settings() -> None:
    """The child needs HiGHS and the model's builder: the whole solver (scipy) and the settings
    (pydantic) made each start several times slower, inside a MIP's time limit."""
    probe = _ENTRY.replace(
        "main(sys.argv[1:])",
        "print(sorted(m for m in ('broker.solver.solve', 'broker.settings', 'scipy', 'pydantic') if m in sys.modules))",
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_a_child_that_died_is_replaced(runner: ChildProcessMipRunner) -> None:
    small = model_of(_knapsacks(8, 2, seed=3))
    first = runner.solve(small, time_limit_s=10, options={}, hint=None)
    dead = runner.child().proc
    dead.kill()
    dead.wait()
    second = runner.solve(small, time_limit_s=10, options={}, hint=None)
    assert first.status == second.status == "optimal"
    assert second.value == pytest.approx(first.value)


@pytest.mark.slow
def test_an_idle_child_exits_and_the_next_mip_starts_another() -> None:
    small = model_of(_knapsacks(8, 2, seed=4))
    runner = ChildProcessMipRunner(idle_exit_s=0.5)
    try:
        first = runner.solve(small, time_limit_s=10, options={}, hint=None)
        child = runner.child()
        child.proc.wait(timeout=10)  # it exits by itself
        again = runner.solve(small, time_limit_s=10, options={}, hint=None)
        assert first.status == again.status == "optimal"
        assert runner.child().proc.pid != child.proc.pid
    finally:
        runner.close()


@pytest.mark.slow
def test_big_mips_of_a_search_run_in_the_runners_child(runner: ChildProcessMipRunner) -> None:
    """With a runner in the options, MIPs from isolate_min_cols columns go to its child, and the
    answer and its bound stay valid."""
    mi, starts, _lp, optimum = case(0)
    calls: list[int] = []
    real = runner.solve

    def spy(model, **kw):  # type: ignore[no-untyped-def]
        calls.append(int(model["num_col"]))
        return real(model, **kw)

    runner.solve = spy  # type: ignore[method-assign]
    res = search(
        mi, starts=starts, time_limit_s=20, seed=0, options=SolverOptions(mip_runner=runner, isolate_min_cols=0)
    )
    assert res is not None and calls
    assert res.lower_bound <= optimum + 1e-7 <= res.objective + 1e-7
