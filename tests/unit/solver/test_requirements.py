"""Instance requirements in the solver: candidates, conflicts and explanations name them, and every
placed pool meets every requirement (property-based, checked against a plain-Python reading of the
documented semantics, not the masks the solver uses)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.core.domain import Arch, CapacityType, Pool, Workload
from broker.core.instance_attributes import derive, gpu_name
from broker.core.requirements import Requirement
from broker.errors import Infeasible
from broker.solver import solve
from broker.solver.prepare.candidates import prepare
from broker.solver.prepare.filters import allowed_opt_in_classes
from pricing.node_classes import OPT_IN_CLASSES

from .support.catalog import problem
from .support.checks import assert_valid
from .support.typed_catalog import FACTS, typed_table

TABLE = typed_table()
EVERY_ARCH = (Arch.AMD64, Arch.ARM64)
EVERY_CAP = tuple(CapacityType)


def wl(*reqs: Requirement, name: str = "api", replicas: int = 3, cpu: float = 1.0, mem: float = 2.0) -> Workload:
    return Workload(name, replicas, cpu, mem, arch=EVERY_ARCH, capacity_types=EVERY_CAP, requirements=tuple(reqs))


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement.parse(key, op, list(values))


def test_a_requirement_may_select_a_dominated_pool() -> None:
    # every m7i here is dominated by an m6i as large and cheaper: without requirements the solver
    # never considers them, with one it must (the cheapest m7i, spot)
    assert all(TABLE.dominated[TABLE.pool_index[p.id]] for p in TABLE.pools if p.instance_type.startswith("m7i"))
    res = solve(problem([wl(req("karpenter.k8s.aws/instance-family", "In", "m7i"))], tbl=TABLE), time_limit_s=5)
    assert {a.pool for a in res.assignments} == {"aws:us-east-1/m7i.large/spot"}


def test_with_requirements_a_pool_another_allowed_pool_dominates_is_no_candidate() -> None:
    # vcpus > 1 allows the m6i and the m7i alike: the m7i of the same size costs more, so it is
    # never needed (the candidates stay as few as without requirements); the test above rules
    # the m6i out, and the m7i is a candidate again
    prep = prepare(problem([wl(req("vcpus", "Gt", "1"))], tbl=TABLE))
    types = {TABLE.pools[p].instance_type for p in prep.workloads[0].cand}
    assert {"m6i.large", "m6i.xlarge"} <= types
    assert not types & {"m7i.large", "m7i.xlarge"}


def test_family_and_generation_as_karpenter_users_write_them() -> None:
    w = wl(req("instance-family", "In", "m7i", "m7a"), req("instance-generation", "Gt", "5"), replicas=4)
    p = problem([w], tbl=TABLE)
    res = solve(p, time_limit_s=5)
    assert_valid(p, res)
    assert all(a.pool.split("/")[1].split(".")[0] in ("m7i", "m7a") for a in res.assignments)
    # the requirement is why a cheaper home was passed over
    binding = res.assignments[0].explanation.binding
    assert "requirements[0]:instance-family In [m7i,m7a] on api" in binding


def test_an_impossible_requirement_is_named_in_the_conflict() -> None:
    w = Workload("api", 2, 1.0, 2.0, providers=("azure",), requirements=(req("instance-family", "In", "m7i"),))
    with pytest.raises(Infeasible) as err:
        solve(problem([w], tbl=TABLE), time_limit_s=5)
    assert set(err.value.conflicts) == {
        "providers:[azure] on api",
        "requirements[0]:instance-family In [m7i] on api",
    }


def test_two_requirements_that_contradict_each_other_are_both_named() -> None:
    w = wl(req("instance-generation", "Gt", "6"), req("karpenter.k8s.aws/instance-generation", "Lt", "7"))
    with pytest.raises(Infeasible) as err:
        solve(problem([w], tbl=TABLE), time_limit_s=5)
    assert err.value.conflicts == [
        "requirements[0]:instance-generation Gt 6 on api",
        "requirements[1]:karpenter.k8s.aws/instance-generation Lt 7 on api",
    ]


def test_rejections_count_the_pools_requirements_exclude() -> None:
    prep = prepare(problem([wl(req("gpu_name", "In", "a100"), cpu=1.0)], tbl=TABLE))
    assert prep.rejected["api"]["requirement"] == TABLE.n_pools - 2  # the A100 node, on demand and spot


def test_workloads_that_differ_only_in_requirements_get_different_candidates() -> None:
    a = wl(req("cpu_manufacturer", "In", "amd"), name="a")
    b = wl(req("cpu_manufacturer", "In", "intel"), name="b")
    prep = prepare(problem([a, b], tbl=TABLE))
    ca, cb = (set(wd.cand.tolist()) for wd in prep.workloads)
    assert ca and cb and not ca & cb


# ---- property: every placed pool meets every requirement ----------------------------------

SITE_OF = {s.id: s for s in TABLE.sites}


def reference_attributes(p: Pool) -> dict[str, Any]:
    """The documented attributes of a pool, computed from the Pool itself (not from the columns)."""
    s = SITE_OF[p.site]
    d = derive(s.provider, p.instance_type, FACTS.get((s.provider, p.instance_type)))
    out: dict[str, Any] = {
        "provider": s.provider,
        "region": s.region,
        "site": s.id,
        "site_kind": s.kind.value,
        "instance_type": p.instance_type.lower(),
        "instance_category": d.category,
        "instance_family": d.family,
        "instance_generation": d.generation,
        "instance_size": d.size,
        "cpu_manufacturer": d.cpu_manufacturer,
        "processor": d.processor.lower() if d.processor else None,
        "arch": p.arch.value,
        "vcpus": p.vcpus,
        "memory_gib": p.memory_gib,
        "gpu_name": gpu_name(p.gpu_model) if p.gpus else None,
        "gpus": p.gpus or None,
        "gpu_memory_gib": (d.gpu_memory_gib or (80.0 if p.gpu_model == "A100-80GB" else None)) if p.gpus else None,
        "bare_metal": None if d.bare_metal is None else str(d.bare_metal).lower(),
        "capacity_type": p.capacity_type.value,
    }
    return out


def _node_class(p: Pool) -> str:
    return str(TABLE.attributes.of(TABLE.pool_index[p.id])["node_class"])


def meets(p: Pool, r: Requirement) -> bool:
    v = reference_attributes(p)[r.attribute]
    if r.operator.value == "Exists":
        return v is not None
    if r.operator.value == "DoesNotExist":
        return v is None
    if r.operator.value == "Gt":
        return v is not None and v > r.numbers[0]
    if r.operator.value == "Lt":
        return v is not None and v < r.numbers[0]
    hit = v is not None and (v in r.numbers if r.numbers else v in r.texts)
    return hit if r.operator.value == "In" else not hit


TEXT_VALUES = {
    "provider": ["aws", "azure", "gcp", "private"],
    "instance_family": ["m7i", "m7a", "m6i", "m5", "c7g", "dasv5", "n2", "n2d", "c4a", "g5"],
    "cpu_manufacturer": ["intel", "amd", "aws", "google"],
    "kubernetes.io/arch": ["amd64", "arm64"],
    "karpenter.sh/capacity-type": ["on-demand", "spot", "reserved"],
    "gpu_name": ["a10g", "a100", "t4"],
    "bare_metal": ["true", "false"],
    "site_kind": ["public", "private", "edge"],
}
NUMBER_VALUES = {
    "instance-generation": ["2", "4", "5", "6", "7"],
    "karpenter.k8s.aws/instance-cpu": ["2", "4", "8", "24"],
    "karpenter.k8s.aws/instance-memory": ["8192", "16384", "32768"],
    "gpus": ["0", "1"],
}

text_req = st.sampled_from(sorted(TEXT_VALUES)).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(TEXT_VALUES[k]), min_size=1, max_size=3, unique=True),
    )
)
number_req = st.sampled_from(sorted(NUMBER_VALUES)).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.sampled_from(["In", "NotIn", "Gt", "Lt"]),
        st.lists(st.sampled_from(NUMBER_VALUES[k]), min_size=1, max_size=2, unique=True),
    )
)
exists_req = st.tuples(
    st.sampled_from(["gpu_name", "processor", "instance_family", "bare_metal"]),
    st.sampled_from(["Exists", "DoesNotExist"]),
    st.just([]),
)


def _build(k: str, op: str, values: list[str]) -> Requirement:
    return Requirement.parse(k, op, values[:1] if op in ("Gt", "Lt") else values)


requirement = st.one_of(text_req, number_req, exists_req).map(lambda t: _build(*t))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(requirement, min_size=1, max_size=3),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.integers(1, 5),
)
def test_every_placed_pool_meets_every_requirement(reqs: list[Requirement], cpu: float, replicas: int) -> None:
    w = wl(*reqs, replicas=replicas, cpu=cpu, mem=2 * cpu)
    p = problem([w], tbl=TABLE)
    fits = [q for q in TABLE.pools if q.vcpus >= cpu and q.memory_gib >= 2 * cpu and (q.max_nodes or 1) > 0]
    # accelerated and HPC families only where the workload opts in (docs/solver.md, "Node classes")
    opted = allowed_opt_in_classes(w)
    fits = [q for q in fits if (c := _node_class(q)) not in OPT_IN_CLASSES or c in opted]
    allowed = [q for q in fits if all(meets(q, r) for r in reqs)]
    try:
        res = solve(p, time_limit_s=5)
    except Infeasible as exc:
        assert not allowed, f"infeasible, yet {allowed[0].id} meets every requirement"
        assert any(c.startswith("requirements[") for c in exc.conflicts)
        return
    assert_valid(p, res)
    placed = {TABLE.pools[TABLE.pool_index[a.pool]] for a in res.assignments}
    for q in placed:
        for r in reqs:
            assert meets(q, r), f"{q.id} does not meet {r.describe()}"
    assert placed <= set(allowed)


def test_the_reference_reading_agrees_with_the_masks_on_every_pool() -> None:
    for k, vals in {**TEXT_VALUES, **NUMBER_VALUES}.items():
        for op in ("In", "NotIn", "Exists", "DoesNotExist", *(("Gt", "Lt") if k in NUMBER_VALUES else ())):
            r = _build(k, op, [] if op in ("Exists", "DoesNotExist") else vals)
            mask = TABLE.attributes.mask(r)
            assert [meets(q, r) for q in TABLE.pools] == mask.tolist(), r.describe()
