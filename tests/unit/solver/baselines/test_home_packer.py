"""The answer's headline baseline: the home cloud's Kubernetes packer (on-demand, declared
requests), or for a re-plan the placement in force; the per-workload greedy as a second figure.
Costs pinned by hand on the synthetic catalog (support/catalog.py: small node 2 vCPU / 4 GiB at
0.08 $/h x the site's factor, aws:us-east-1 0.9 the cheapest; spot at 0.35 of on-demand)."""

from __future__ import annotations

import dataclasses

import pytest

from broker.core.domain import Baseline, CapacityType, PlacementResult, Workload
from broker.solver import SolverOptions, solve
from broker.solver.baselines.compare import ANYWHERE, GREEDY, IN_FORCE
from broker.solver.baselines.costs import usd_arrays
from broker.solver.baselines.home import KUBERNETES_PACKER, home_workloads
from broker.solver.prepare.candidates import prepare

from ..support.catalog import GDPR, US_ONLY, problem

SPOT_OK = (CapacityType.ONDEMAND, CapacityType.SPOT)
SMALL_US_EAST = 0.08 * 0.9


def _named(res: PlacementResult, policy: str) -> Baseline:
    return next(b for b in res.baselines if b.policy == policy)


def test_savings_pct_is_against_the_packer_and_the_home_packer_is_named() -> None:
    # 4 replicas of 1 vCPU / 2 GiB that tolerate spot: the packer (on-demand only) opens a small
    # node for the first replica, LeastAllocated puts the second beside it: 2 small nodes at the
    # cheapest site; the broker runs the same nodes on spot
    p = problem([Workload("web", 4, 1, 2, capacity_types=SPOT_OK)])
    res = solve(p, time_limit_s=10)
    # the headline is the same packer over every allowed pool (spot here): the strictest figure
    assert res.baseline.policy == ANYWHERE
    assert [b.policy for b in res.baselines] == [ANYWHERE, KUBERNETES_PACKER, GREEDY]
    assert res.baselines[0] == res.baseline
    home = _named(res, KUBERNETES_PACKER)
    assert "on-demand" in home.description
    assert home.cost_per_hour == pytest.approx(2 * SMALL_US_EAST, abs=1e-6)
    assert res.cost_per_hour == pytest.approx(2 * SMALL_US_EAST * 0.35, abs=1e-6)
    assert res.baseline.cost_per_hour is not None
    assert res.savings_pct == pytest.approx((1 - res.cost_per_hour / res.baseline.cost_per_hour) * 100, abs=0.01)
    # the greedy (each workload alone, spot allowed) is a named figure too
    assert _named(res, GREEDY).cost_per_hour is not None and _named(res, GREEDY).description


def test_the_home_site_runs_the_most_cores_and_others_go_where_they_must() -> None:
    ws = [
        Workload("eu-big", 4, 2, 4, residency=GDPR, min_sites=2),
        Workload("eu", 2, 1, 2, residency=GDPR),
        Workload("us", 1, 1, 2, residency=US_ONLY),
    ]
    p = problem(ws)
    t = p.table
    prep = prepare(p)
    home = home_workloads(prep.workloads, usd_arrays(p), [str(x) for x in t.site_provider])
    sites = [{t.sites[int(t.site_idx[q])].id for q in wd.cand} for wd in home]
    caps = {t.pools[int(q)].capacity_type for wd in home for q in wd.cand}
    # EU workloads hold 10 of 11 cores: home is the cheapest EU site (gcp, factor 1.0 < aws 1.1);
    # the spread workload's second site is the next cheapest EU site; the US workload runs at the
    # cheapest US site (the home provider has none there)
    assert sites == [{"gcp:europe-west1", "aws:eu-central-1"}, {"gcp:europe-west1"}, {"aws:us-east-1"}]
    assert caps == {CapacityType.ONDEMAND}  # owned reserved nodes and spot are not the default cluster


def test_the_home_packer_runs_the_declared_requests() -> None:
    sized = problem([Workload("web", 4, 1, 2)])
    declared = dataclasses.replace(sized.request, workloads=(Workload("web", 4, 2, 4),))
    res = solve(dataclasses.replace(sized, declared=declared), time_limit_s=10)
    # declared 2 vCPU / 4 GiB: one small node per replica
    assert _named(res, KUBERNETES_PACKER).cost_per_hour == pytest.approx(4 * SMALL_US_EAST, abs=1e-6)
    assert res.cost_per_hour == pytest.approx(2 * SMALL_US_EAST, abs=1e-6)


def test_a_replan_compares_with_the_placement_in_force() -> None:
    # in force: the 4 replicas on one large on-demand node at aws:eu-central-1 (0.70 x 1.1)
    base = problem([Workload("web", 4, 1, 2)])
    p = dataclasses.replace(base, current={"aws:eu-central-1/large/ondemand": {"web": 4}})
    res = solve(p, time_limit_s=10)
    assert res.baseline.policy == IN_FORCE
    assert res.baseline.cost_per_hour == pytest.approx(0.70 * 1.1, abs=1e-6)
    assert res.savings_pct == pytest.approx((1 - res.cost_per_hour / (0.70 * 1.1)) * 100, abs=0.01)
    assert [b.policy for b in res.baselines] == [IN_FORCE, ANYWHERE, KUBERNETES_PACKER, GREEDY]


def test_a_partial_placement_in_force_is_no_baseline() -> None:
    # only 2 of the 4 replicas run now: keeping it is not running the request, the packer is the baseline
    base = problem([Workload("web", 4, 1, 2)])
    res = solve(dataclasses.replace(base, current={"aws:eu-central-1/large/ondemand": {"web": 2}}), time_limit_s=10)
    assert res.baseline.policy == ANYWHERE
    assert _named(res, KUBERNETES_PACKER).cost_per_hour == pytest.approx(2 * SMALL_US_EAST, abs=1e-6)


def test_callers_that_read_no_savings_can_skip_the_baselines() -> None:
    res = solve(problem([Workload("web", 4, 1, 2)]), time_limit_s=10, options=SolverOptions(price_baselines=False))
    assert (res.baseline.policy, res.baseline.cost_per_hour, res.savings_pct) == (ANYWHERE, None, None)
    assert len(res.baselines) == 1
