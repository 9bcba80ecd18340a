"""Property-based: every returned placement keeps every constraint it was given, places every
replica exactly once, and its bound never exceeds its cost."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.domain import Arch, CapacityType, Dependency, Workload
from broker.errors import Infeasible
from broker.solver import solve

from .support.catalog import GDPR, US_ONLY, problem, table
from .support.checks import assert_valid

TABLE = table(owned_nodes=2)

workload = st.builds(
    lambda i, r, cpu, mem, res, spread, spot, arch, storage: Workload(
        f"w{i}",
        replicas=r,
        cpu=cpu,
        memory_gib=mem,
        residency=res,
        min_sites=min(spread, r),
        capacity_types=(CapacityType.ONDEMAND, CapacityType.RESERVED, CapacityType.SPOT)
        if spot is not None
        else (CapacityType.ONDEMAND, CapacityType.RESERVED),
        max_spot_fraction=spot,
        arch=arch,
        storage_gib=storage,
    ),
    st.integers(0, 10_000),
    st.integers(1, 7),
    st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 6.0]),
    st.sampled_from([1.0, 2.0, 4.0, 6.0, 12.0, 30.0]),
    st.sampled_from([None, GDPR, US_ONLY]),
    st.sampled_from([1, 1, 2]),
    st.sampled_from([None, 0.0, 0.5, 1.0]),
    st.sampled_from([(Arch.AMD64,), (Arch.AMD64, Arch.ARM64)]),
    st.sampled_from([0.0, 0.0, 50.0]),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(workload, min_size=1, max_size=6, unique_by=lambda w: w.name), st.booleans())
def test_every_placement_keeps_every_constraint(ws: list[Workload], linked: bool) -> None:
    if linked and len(ws) > 1:  # a dependency makes the pair singleton classes with egress rows
        first = ws[0]
        ws[0] = Workload(
            **{**{f: getattr(first, f) for f in first.__slots__}, "depends_on": (Dependency(ws[1].name, 3.0),)}
        )  # type: ignore[attr-defined]
    p = problem(ws, tbl=TABLE)
    try:
        res = solve(p, time_limit_s=5)
    except Infeasible as exc:
        assert exc.conflicts  # an impossible draw names what conflicts
        return
    assert_valid(p, res)
    assert res.lower_bound_per_hour <= res.cost_per_hour + 1e-6
    assert 0.0 <= res.gap_pct <= 100.0
