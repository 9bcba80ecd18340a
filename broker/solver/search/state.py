"""What the phases of one search share, and what a search returns."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from broker.core.pooltable import BoolArray, FloatArray, IntArray
from broker.solver.model.layout import Layout, ModelInput
from broker.solver.model.master import Master
from broker.solver.model.reduced_costs import ColumnCosts, ReducedCosts
from broker.solver.model.universe import Universe
from broker.solver.options import SolverOptions
from broker.solver.search.placements import class_nodes, columns_of, objective
from broker.solver.types import BestSoFar, ClassPlacement


@dataclass
class SearchResult:
    status: str
    x: ClassPlacement
    objective: float  # model objective of x (egress at its cheapest destination)
    lower_bound: float
    proven: bool
    pools_considered: int
    lp_rounds: int
    # a phase was skipped because too little time was left for it (the stop is the time
    # limit's even when the clock shows time unused)
    out_of_time: bool = False
    # what proves lower_bound (BoundKind's values): the converged LP, the final MIP's dual bound
    # with reduced-cost inclusion, or a bound beside an unfinished LP
    bound_kind: str = "lp"


def _no_columns() -> IntArray:
    return np.zeros(0, dtype=np.int64)


@dataclass
class SearchState:
    """One search: the request's model, the restricted master, what column generation's last
    round left, the incumbent and the bounds found so far. Each phase reads and updates it."""

    mi: ModelInput
    lay: Layout
    uni: Universe
    m: Master  # the restricted master: CG's LP, later the final MIP
    opts: SolverOptions
    seed: int
    prove: bool  # False: no bound beyond the LP's and the MIPs' (a group of split.py)
    started: float  # perf_counter at the start
    time_limit_s: float
    first: IntArray  # the universe columns column generation started from

    # bounds beside the search: a thread's node-share bound, and the event that stops it early
    share_bound: Future[float] | None = None
    no_bound_needed: threading.Event = field(default_factory=threading.Event)
    share_so_far: BestSoFar = field(default_factory=BestSoFar)  # what that thread proved so far
    hurry: threading.Event = field(default_factory=threading.Event)  # the time is up: end the bound soon

    # column generation
    rounds: int = 0
    z_lp: float = -math.inf  # the restricted LP; the full catalog's LP once converged
    converged: bool = False
    out_of_time: bool = False  # a phase was skipped for lack of time
    lagrangian: float = -math.inf  # from the last round's duals when CG stopped early
    loose_bound: float = -math.inf  # the converged LP with loose fit rows: a relaxation's LP
    # the LP when it last priced out (with the pattern cuts it held then): a bound for the whole
    # catalog even when later cuts restart column generation and the time ends before it converges
    priced_out: float = -math.inf
    lp_x: ClassPlacement | None = None  # the LP rounded
    lp_support: IntArray = field(default_factory=_no_columns)  # universe columns the LP uses
    lp_pool: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # pools the LP uses
    reduced: ReducedCosts | None = None  # the last round's reduced costs (freed once no inclusion can follow)
    rc_x: ColumnCosts = field(default_factory=lambda: ColumnCosts(_no_columns(), np.zeros(0)))
    rc_pools: IntArray = field(default_factory=_no_columns)
    rc_p: FloatArray = field(default_factory=lambda: np.zeros(0))

    # the answer
    incumbent: ClassPlacement | None = None
    ub: float = math.inf  # the incumbent's objective

    # the final MIP
    status: str = "feasible"
    bound: float = -math.inf
    excluded_min: float = math.inf  # the least reduced cost of what reduced-cost inclusion left out

    def left(self) -> float:
        """Seconds left of the search's time."""
        return self.time_limit_s - (time.perf_counter() - self.started)

    def seconds(self, share: float) -> float:
        """A phase's time: `share` of what is left, or all of it under work limits (the phase
        then ends by its work, the time only guards against a runaway)."""
        return self.left() if self.opts.work_limits is not None else share * self.left()

    def until(self, share: float) -> float:
        """When a phase given `share` of what is left ends (perf_counter)."""
        return time.perf_counter() + self.seconds(share)

    @property
    def mip_nodes(self) -> int | None:
        """Branch-and-bound nodes each MIP may take under work limits (None: no such limit)."""
        return self.opts.work_limits.mip_nodes if self.opts.work_limits is not None else None

    def gap_open(self) -> bool:
        """An incumbent, and no proof yet that it is within the gap target: before CG converges
        the restricted LP bounds nothing, so only a converged LP can close the gap here."""
        rel_gap = self.opts.rel_gap
        return self.incumbent is not None and (not self.converged or self.ub - self.z_lp > rel_gap * self.ub)

    def offer(self, x: ClassPlacement) -> bool:
        """Keep x as the incumbent when it costs less; its columns join the master."""
        value = objective(self.mi, self.lay, x)
        if self.incumbent is not None and value >= self.ub - 1e-9:
            return False
        self.incumbent, self.ub = x, value
        self.m.add_columns(columns_of(x, self.uni.cols))
        return True

    def hint(self, mm: Master) -> FloatArray | None:
        """The incumbent as a MIP start for the model `mm` (None without one)."""
        return mm.hint(self.incumbent, class_nodes(mm.mi, self.incumbent)) if self.incumbent is not None else None


def bound_of(fut: Future[float], so_far: BestSoFar, wait_s: float, hurry: threading.Event) -> float:
    """A bound thread's result if it ends within `wait_s`; else it is told to hurry and the best
    it proved so far stands, or, when it has proved nothing yet, the first bound it proves (or
    the quick bound it ends with): the request's time limit holds as far as a valid bound allows."""
    try:
        return fut.result(timeout=max(wait_s, 0.0))
    except TimeoutError:
        hurry.set()
        fut.add_done_callback(lambda _f: so_far.proven.set())  # a thread that ends proved what it could
        so_far.proven.wait()
        return so_far.value if so_far.value > -math.inf else fut.result()


def in_thread(name: str, fn: Callable[..., float], *args: Any, **kw: Any) -> Future[float]:
    """fn(*args, **kw) in a thread of its own, which ends with it."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    out = pool.submit(fn, *args, **kw)
    pool.shutdown(wait=False)
    return out
