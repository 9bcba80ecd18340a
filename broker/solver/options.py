"""Every tuning knob of the solver, in one frozen object passed down from `solve()`.

Shares are of the time left at the moment the phase starts unless said otherwise; sizes count
universe columns (one per candidate (class, pool) pair) or columns of a restricted model. The
values were chosen by measurement on the generated bench requests (bench/RESULTS.md has the
figures); the comments say what each knob trades.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.solver.model.mip import MipRunner


@dataclass(frozen=True)
class ShareBoundOptions:
    """The node-share bound's ascent (bounds/node_share.py)."""

    # evaluations of the golden-section search for the best single cpu/memory split
    golden_steps: int = 8
    # softmin temperature per class, relative to its cheapest price per replica, lowered (down to
    # min_temperature) when a round gains less than `stall` of the bound: higher smooths too much,
    # lower leaves L-BFGS-B too little curvature
    temperature: float = 0.01
    min_temperature: float = 1e-5
    stall: float = 2e-5
    # how far a round may move each pool's split; a round that fails halves it, the ascent ends below min_trust
    trust: float = 0.2
    max_trust: float = 0.3
    min_trust: float = 1e-4
    round_iterations: int = 30  # L-BFGS-B iterations per round
    rounds: int = 100  # ascent rounds at most (0: the best single split only)
    near: float = 5.0  # a column joins a round's softmin within this many temperatures of its minimum
    # the dependency pairs' LP runs after the ascent: its time is kept out of the ascent's budget
    egress_s_per_col: float = 1e-4
    # ... and at least this many times what the pairs' LP took at the start split (measured first)
    egress_margin: float = 1.5
    # GPU nodes hand their GPUs a share of their cost before the split (node_share_columns.gpu_share):
    # split by cpu and memory alone, a GPU replica pays only a sliver of its node
    gpu_share: bool = True


@dataclass(frozen=True)
class WorkLimits:
    """Limits on work in place of the clock's shares, so that a request gets the same answer
    whatever the machine's speed and load (the simulator's replays): column generation ends
    after `cg_rounds` (or once converged or stalled), each MIP after `mip_nodes` branch-and-bound
    nodes, large-neighbourhood search after `lns_turns`, CP-SAT's packing of each pool after
    `packing_s` of its deterministic time. The time limit then only guards against a runaway:
    an answer it cut short depends on the clock again, and says so in a warning."""

    cg_rounds: int = 12
    mip_nodes: int = 100
    lns_turns: int = 8
    packing_s: float = 0.2


@dataclass(frozen=True)
class SolverOptions:
    """How `solve()` spends its time limit. Tests and benchmarks set fields; nothing reads the
    environment. `mip_runner` is the only non-number: where big MIPs run (None: in this process,
    under a watchdog that cannot stop HiGHS' cut separation; an edge of the application injects a
    runner that kills a child process at the limit, broker/solver_runtime)."""

    # -- the whole request (solve.py) ------------------------------------------------------------
    # what comes after the search (dealing replicas back, costs, explanations) is part of the
    # request's time too: a fixed part and a part per workload
    after_search_s: float = 0.3
    explain_s_per_workload: float = 3.0e-4
    # the Kubernetes-style answer shares nodes, a strong start when the LP cannot finish in time;
    # above this many workloads building it costs more than it gives
    k8s_start_max_workloads: int = 50_000
    # price the answer's named baselines (baselines/compare.py) before the search, inside the time
    # limit; callers that never report savings (the simulator, the right-sizing report's second
    # solve) turn it off and get the time back for the search
    price_baselines: bool = True
    # work limits in place of the clock's shares (None: the clock's shares, the best answer in time)
    work_limits: WorkLimits | None = None
    # large-replica rows per pool for k = 1..this (model/layout.py; 0: none, only to measure them)
    large_replica_rows: int = 2
    rel_gap: float = 0.01  # the gap the search aims to prove; it stops once proven
    # exact packing (answer/packing.py): CP-SAT's time for pools first-fit decreasing does not
    # prove minimal, a share of the request's limit kept from the search, at most packing_max_s;
    # pools whose CP-SAT model would have more integer variables than packing_max_vars keep FFD's
    # packing (building the model alone would take that time)
    packing_share: float = 0.03
    # first-fit decreasing packs every pool of the answer whatever the time: kept per workload
    packing_s_per_workload: float = 3.0e-4
    packing_max_s: float = 2.0
    packing_max_vars: int = 20_000
    # after packing, empty the least-filled nodes whose replicas cost less elsewhere at the site
    # (answer/consolidate.py): a share of the request's limit kept from the search, at most
    # consolidate_max_s (0: off)
    consolidate_share: float = 0.07
    consolidate_max_s: float = 10.0
    # a search that returns with at least this share of its time unused, its gap target not
    # proven, stopped because its phases had nothing left to try ("stall"), not for the time:
    # the final MIP takes final_mip_share of what is left, so a search that ran out of time
    # returns with less than (1 - final_mip_share) of it
    stall_unused_share: float = 0.3

    # -- column generation (search/column_generation.py) -----------------------------------------
    max_cg_rounds: int = 200
    # column generation tails off: the LP's value moves by less than cg_stall_rel (relative) over
    # cg_stall_rounds rounds while columns still enter; it then stops, its last duals give the
    # Lagrangian bound and the MIPs get the time (0 rounds: never stop for this). Only once
    # cg_stall_after of the time is gone: a CG that converges by then proves its LP
    cg_stall_rounds: int = 4
    cg_stall_rel: float = 1.0e-3
    cg_stall_after: float = 0.2
    # columns a round adds per class, and new pools: a few each round keeps the model small and
    # every re-solve warm (the basis is kept)
    cg_columns_per_class: int = 8
    cg_pools_per_round: int = 100
    # CG stops when its next round would end past this share of the time, kept for the MIPs:
    # later ends leave the MIPs too little, earlier ones leave the LP a poor guide
    cg_end: float = 0.45
    # a round's LP ends early enough for its reduced costs too (this many times the last round's):
    # on a busy host an LP that ran to its limit left the pricing pass to eat the MIPs' time
    pricing_margin: float = 1.5
    # what the Lagrangian bound costs per universe column (it reads them all once)
    bound_seconds_per_col: float = 1.0e-6
    # universe sizes between which CG starts with loose fit rows (capped once that LP converges):
    # below, the second phase costs more than it saves; above, one CG round fills the time
    loose_fit_min_cols: int = 500_000
    loose_fit_max_cols: int = 20_000_000
    # pattern cuts (search/pattern_cuts.py): when the LP prices out, the pools whose replicas it
    # packs into fewer nodes than any packing can get a cut and CG goes on, at most this many
    # times (0: none, only to measure them)
    pattern_cut_rounds: int = 20
    # up to this many classes the search counts the nodes of pools several classes share by their
    # patterns (model/patterns.PatternNodes: what packing will need), not the aggregate rule
    pattern_nodes_max_classes: int = 100
    # up to this universe size every column's fit row joins with it: on small models one LP run
    # per round beats re-solving for each batch of broken rows; on big ones the rows double the LP
    eager_fit_max_cols: int = 500_000

    # -- bounds beside the search (bounds/) -----------------------------------------------------
    # universe sizes from which the node-share bound is priced by its relaxation's LP, solved by
    # column generation in a thread from the start until relaxed_cg_end of the time, its ascent
    # and egress LP ending by relaxed_end; above loose_fit_max_cols the request is split
    relaxed_min_cols: int = 5_000_000
    relaxed_cg_end: float = 0.7
    relaxed_end: float = 0.9
    # the relaxed LP's column generation: it converges in far fewer rounds with big steps, and it
    # ends once a round lowers its LP by less than this share (a degenerate tail gains nothing)
    relaxed_columns_per_class: int = 100
    relaxed_pools_per_round: int = 1000
    relaxed_stalled: float = 1e-6
    # the node-share bound's thread beside the MIPs when CG did not converge
    share_bound_share: float = 0.8
    # how long past the search's time a bound thread is waited for; then its best so far stands
    bound_wait_s: float = 0.2
    share_bound: ShareBoundOptions = field(default_factory=ShareBoundOptions)

    # -- incumbents and neighbourhoods (search/incumbent.py, search/neighbourhoods.py) -----------
    # RENS (the MIP over the LP's support) and the second neighbourhood (every class on the LP's
    # pools): shares of the time left, more on big requests, where no LNS follows them
    rens_share: float = 0.25
    rens_share_big: float = 0.6
    second_share: float = 0.5
    second_share_big: float = 0.9
    # on big requests whose incumbent pays at least this share of its cost in egress, no second
    # neighbourhood (it re-packs compute on the LP's pools and finds little there): the
    # dependency-component LNS gets its time
    second_max_egress_share_big: float = 0.05
    # above this universe size a request is "big": the second neighbourhood offers each class its
    # best column by reduced cost on the LP's pools (second_big_best; second_big_split to a class
    # the LP splits), not second_best: more columns made its MIP run to its limit unfinished
    neighbourhood_max_cols: int = 5_000_000
    second_best: int = 5
    second_big_best: int = 1
    second_big_split: int = 2
    # large-neighbourhood search: its share of the time left (lns_share_big when the final MIP is
    # skipped), how many classes a neighbourhood frees, each MIP's time, and how many columns of
    # least reduced cost a free class is offered (doubled up to lns_max_offered_columns when a
    # neighbourhood of every class finds nothing better)
    lns_share: float = 0.6
    lns_share_big: float = 0.85
    lns_min_free: int = 5
    lns_start_free: int = 30
    lns_mip_s: float = 1.5
    improve_min_s: float = 0.05  # an improving MIP with less time than this is not started
    lns_offered_columns: int = 5
    lns_max_offered_columns: int = 40
    # requests with dependencies (search/egress_neighbourhoods.py): every egress_every-th LNS
    # neighbourhood frees whole dependency components, drawn by the egress they pay, and offers
    # each free class its egress_per_cloud cheapest columns per cloud and one at each site where
    # a peer runs (so a service can move with its callers); 0: never
    egress_every: int = 2
    egress_per_cloud: int = 3
    # and a start with each dependency component moved to the site where its compute and egress
    # together cost least (search/co_location.py), built from the cheapest start in at most this
    # share of the search's time (components paying the most egress first); 0: no such start.
    # co_location_share_big above relaxed_min_cols universe columns, where column generation
    # does not converge in time and the answer is mostly the best start
    # Not when egress is below co_location_min_egress_share of that start's cost: moving
    # components then trades node sharing for little, and a start the aggregate capacity rule
    # calls cheaper can pack onto more nodes (bench/RESULTS.md, issue 26 co-location start)
    co_location_share: float = 0.15
    co_location_share_big: float = 0.3
    co_location_min_egress_share: float = 0.05

    # -- the final MIP (search/final_mip.py) -----------------------------------------------------
    # above this many columns the final MIP does not finish its root in time and its cut
    # separation ignores the clock: it is skipped and LNS takes the time
    final_mip_max_cols: int = 20_000
    final_mip_min_s: float = 0.5  # not started with less time left: it would run far past it
    # the final MIP again with the pattern cuts its answer breaks, at most this many more times
    pattern_cut_mip_rounds: int = 3
    final_mip_share: float = 0.75  # HiGHS overruns its limit on big models (presolve, root LP): a margin
    # reduced-cost inclusion: columns at most (the most promising first), as the MIP must finish its root
    include_cols: int = 40_000
    # MIPs from this many columns run through `mip_runner` (a child killed at its limit): HiGHS'
    # cut separation can overrun the limit there; smaller ones stay in process (no pipe, no child)
    isolate_min_cols: int = 2_000
    mip_runner: MipRunner | None = None

    # -- enterprise-sized requests in groups (search/split.py) -----------------------------------
    # universe columns above which a request is split: where search() gets no relaxed-LP bound
    split_min_cols: int = 20_000_000
    # a group weighs sqrt(candidate columns) per class; this weight per group sets how many
    group_weight: float = 62_000.0
    groups_end: float = 0.95  # the groups' share of the time; merging and the bound come after
