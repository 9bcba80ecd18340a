"""Black-box tests of solve(): every answer keeps every rule of the contract.

The solver tests' synthetic catalog, with reserved pools and cheap owned capacity, keeps these
fast; property-based cases (hypothesis) draw random requests and check each returned placement
against the request (tests/unit/solver/support).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.domain import Arch, CapacityType, Dependency, ResidencyPolicy, UserRegion, Workload
from broker.errors import Infeasible, InvalidRequest
from broker.solver import PlacementProblem, solve
from tests.unit.solver.support import catalog
from tests.unit.solver.support.catalog import GDPR, US_ONLY
from tests.unit.solver.support.checks import assert_valid as check

# reserved pools at every public site, and 3 owned nodes cheaper than any cloud's
TABLE = catalog.table(3, reserved=True, owned_price=0.35)
# RTT from each site to two user regions (ms)
USER_RTT = {
    "eu-users": [8.0, 12.0, 95.0, 100.0, 3.0],
    "us-users": [95.0, 100.0, 6.0, 9.0, 96.0],
}
REGIONS = (UserRegion("eu-users", 50.1, 8.7), UserRegion("us-users", 38.9, -77.0))


def problem(*workloads: Workload) -> PlacementProblem:
    return catalog.problem(workloads, tbl=TABLE, regions=REGIONS, rtt=USER_RTT, time_limit_s=5)


def wl(name: str = "api", **kw: object) -> Workload:
    base: dict[str, object] = {"replicas": 3, "cpu": 1.0, "memory_gib": 2.0}
    base.update(kw)
    return Workload(name=name, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("workload", "expect_site_in"),
    [
        (wl(), {"aws:us-east-1"}),  # cheapest region overall
        (wl(residency=GDPR), {"gcp:europe-west1"}),
        (wl(residency=GDPR, providers=("aws",)), {"aws:eu-central-1"}),
        (wl(latency_slo_ms={"eu-users": 10}), {"aws:eu-central-1"}),
        (wl(residency=US_ONLY, providers=("azure",)), {"azure:eastus"}),
    ],
)
def test_hard_constraints_steer_the_site(workload: Workload, expect_site_in: set[str]) -> None:
    p = problem(workload)
    r = solve(p)
    check(p, r)
    assert {a.site for a in r.assignments} <= expect_site_in


def test_capacity_types_default_excludes_spot_and_listing_spot_uses_it() -> None:
    r = solve(problem(wl()))
    assert all(not a.pool.endswith("/spot") for a in r.assignments)
    r2 = solve(problem(wl(capacity_types=(CapacityType.ONDEMAND, CapacityType.SPOT))))
    assert all(a.pool.endswith("/spot") for a in r2.assignments)
    assert r2.cost_per_hour < r.cost_per_hour


def test_max_spot_fraction_caps_spot_replicas() -> None:
    p = problem(wl(replicas=4, capacity_types=(CapacityType.ONDEMAND, CapacityType.SPOT), max_spot_fraction=0.5))
    r = solve(p)
    check(p, r)
    assert sum(a.replicas for a in r.assignments if a.pool.endswith("/spot")) == 2


def test_arch_and_gpu() -> None:
    p = problem(wl(arch=(Arch.ARM64,)), wl("trainer", replicas=1, cpu=4, memory_gib=16, gpus=1))
    r = solve(p)
    check(p, r)
    assert {a.pool.split("/")[1] for a in r.assignments if a.workload == "api"} == {"arm"}
    assert {a.pool.split("/")[1] for a in r.assignments if a.workload == "trainer"} == {"gpu"}


def test_spread_over_sites() -> None:
    p = problem(wl(replicas=4, min_sites=3))
    r = solve(p)
    check(p, r)
    assert len({a.site for a in r.assignments}) >= 3


def test_shared_nodes_are_cheaper_than_one_node_per_workload() -> None:
    # two workloads of half a large node each fit one large node together
    p = problem(wl("a", replicas=1, cpu=8, memory_gib=8), wl("b", replicas=1, cpu=8, memory_gib=8))
    r = solve(p)
    check(p, r)
    assert sum(n.count for n in r.nodes) == 1
    greedy = next(b for b in r.baselines if b.policy == "greedy-cheapest-fit")
    assert greedy.cost_per_hour is not None and r.cost_per_hour < greedy.cost_per_hour


def test_owned_capacity_is_used_first_and_never_exceeded() -> None:
    germany = ResidencyPolicy("de", allowed_countries=frozenset({"DE"}))
    # 12 replicas of 16 vCPUs: 3 fit an owned 48-vCPU node, only 3 owned nodes exist
    p = problem(wl(replicas=12, cpu=16, memory_gib=64, residency=germany))
    r = solve(p)
    check(p, r)
    assert sum(n.count for n in r.nodes if n.pool.startswith("private:")) == 3
    assert sum(a.replicas for a in r.assignments if a.site == "private:fra-dc1") == 9
    assert any(
        "capacity:private:fra-dc1/r740/reserved max_nodes=3" in b for a in r.assignments for b in a.explanation.binding
    )


def test_egress_pulls_dependent_workloads_together() -> None:
    heavy = Dependency("db", gib_per_hour=500.0)
    p = problem(wl("api", replicas=2, depends_on=(heavy,)), wl("db", replicas=1, cpu=2, memory_gib=4, residency=GDPR))
    r = solve(p)
    check(p, r)
    assert {a.site for a in r.assignments if a.workload == "api"} == {
        a.site for a in r.assignments if a.workload == "db"
    }
    assert r.egress_cost_per_hour == pytest.approx(0.0)


def test_storage_is_priced_at_the_site() -> None:
    p = problem(wl(replicas=2, storage_gib=100))
    r = solve(p)
    check(p, r)
    assert r.storage_cost_per_hour == pytest.approx(2 * 100 * 1.073741824 * 0.08 / 730, abs=1e-6)


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (
            wl(residency=GDPR, latency_slo_ms={"us-users": 20}),
            {"residency:gdpr-eu on api", "latency_slo_ms:us-users<=20 on api"},
        ),
        (wl(cpu=64), {"size:cpu=64,memory_gib=2 on api"}),
        (wl(arch=(Arch.ARM64,), gpus=1), {"size:cpu=1,memory_gib=2,gpus=1 on api", "arch:[arm64] on api"}),
        (wl(replicas=1, min_sites=2), {"spread.min_sites>=2 on api", "replicas=1 on api"}),
        (
            wl(min_sites=3, residency=GDPR, providers=("aws", "gcp")),
            None,
        ),  # 2 public EU sites + none private: conflict
    ],
)
def test_infeasible_requests_name_a_minimal_conflict(workload: Workload, expected: set[str] | None) -> None:
    with pytest.raises(Infeasible) as exc:
        solve(problem(workload))
    conflicts = set(exc.value.conflicts)
    if expected is not None:
        assert conflicts == expected
    else:
        assert "spread.min_sites>=3 on api" in conflicts and "residency:gdpr-eu on api" in conflicts


def test_unknown_dependency_is_invalid() -> None:
    with pytest.raises(InvalidRequest) as exc:
        solve(problem(wl(depends_on=(Dependency("nope", 1.0),))))
    assert exc.value.errors[0]["loc"][-1] == "workload"


def test_explanations_name_binding_constraints_and_next_best() -> None:
    p = problem(wl(residency=GDPR))
    r = solve(p)
    a = r.assignments[0]
    assert "residency:gdpr-eu on api" in a.explanation.binding
    assert a.explanation.next_best is not None and not a.explanation.next_best.startswith(a.site + "/")
    assert r.rejected["api"]["residency"] > 0


workload_st = st.builds(
    lambda i, replicas, cpu, mem, arch, caps, res, slo, spread, spot: Workload(
        name=f"w{i}",
        replicas=replicas,
        cpu=cpu,
        memory_gib=mem,
        arch=arch,
        capacity_types=caps,
        residency=res,
        latency_slo_ms=slo,
        min_sites=min(spread, replicas),
        max_spot_fraction=spot,
    ),
    st.integers(0, 10_000),
    st.integers(1, 12),
    st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0, 12.0]),
    st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0, 32.0]),
    st.sampled_from([(Arch.AMD64,), (Arch.ARM64,), (Arch.AMD64, Arch.ARM64)]),
    st.sampled_from(
        [
            (CapacityType.ONDEMAND,),
            (CapacityType.ONDEMAND, CapacityType.SPOT),
            (CapacityType.ONDEMAND, CapacityType.RESERVED),
            (CapacityType.SPOT, CapacityType.RESERVED),
        ]
    ),
    st.sampled_from([None, GDPR, US_ONLY]),
    st.sampled_from([{}, {"eu-users": 15.0}, {"us-users": 10.0}, {"eu-users": 200.0}]),
    st.integers(1, 3),
    st.sampled_from([None, 0.5, 1.0]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(workload_st, min_size=1, max_size=4, unique_by=lambda w: w.name))
def test_every_answer_satisfies_every_constraint(workloads: list[Workload]) -> None:
    p = problem(*workloads)
    try:
        r = solve(p, time_limit_s=3)
    except Infeasible as exc:
        assert exc.conflicts, "an infeasible answer must name its conflicts"
        return
    check(p, r)
