"""The MultiKueue dispatcher's pure core: reading Workloads, pricing them per site, ranking clusters."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest

from broker.core.domain import Arch, CapacityType
from broker.core.residency import resolve_policy
from broker.integrations import kueue as kq
from tests.unit.integrations.small_catalog import POOLS, SITE_BY_ID, table

TABLE = table()


def container(
    cpu: str | None = None, memory: str | None = None, *, limits: bool = False, gpu: str | None = None
) -> dict[str, Any]:
    res = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpu)) if v is not None}
    return {"name": "c", "resources": {"limits" if limits else "requests": res}}


def workload(
    *pod_sets: tuple[int, list[dict[str, Any]]],
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    sets = [
        {
            "name": f"ps{i}",
            "count": count,
            "template": {"metadata": {"annotations": template_annotations or {}}, "spec": {"containers": containers}},
        }
        for i, (count, containers) in enumerate(pod_sets)
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-1",
            "namespace": "ml",
            "uid": "u-1",
            "resourceVersion": "7",
            "annotations": annotations or {},
        },
        "spec": {"podSets": sets},
        "status": status or {},
    }


# ---- reading ------------------------------------------------------------------------------


def test_requests_sum_containers_take_limits_where_requests_are_missing_and_cover_init_containers() -> None:
    wl = workload((4, [container("500m", "1Gi"), container("1", "3Gi", limits=True)]))
    wl["spec"]["podSets"][0]["template"]["spec"]["initContainers"] = [container("2", "1Gi")]
    (ps,) = kq.workload_ask(wl).pod_sets
    assert (ps.count, ps.cpu, ps.memory_gib, ps.gpus, ps.arch) == (4, 2.0, 4.0, 0.0, Arch.AMD64)


def test_residency_and_capacity_types_come_from_annotations() -> None:
    wl = workload(
        (1, [container("1", "1Gi", gpu="1")]),
        annotations={kq.CAPACITY_ANNOTATION: "spot, ondemand"},
        template_annotations={kq.RESIDENCY_ANNOTATION: "gdpr-eu"},
    )
    ask = kq.workload_ask(wl)
    assert ask.residency == (resolve_policy("gdpr-eu"),)
    assert ask.capacity_types == (CapacityType.SPOT, CapacityType.ONDEMAND)
    assert ask.pod_sets[0].gpus == 1.0


@pytest.mark.parametrize(
    ("wl", "names"),
    [
        (workload((1, [container("lots")])), "spec.podSets[0].template.spec.containers[0].resources.cpu"),
        (workload((1, [container("1")]), annotations={kq.RESIDENCY_ANNOTATION: "moon"}), "unknown policy"),
        (workload((1, [container("1")]), annotations={kq.CAPACITY_ANNOTATION: "cheap"}), kq.CAPACITY_ANNOTATION),
    ],
)
def test_bad_input_names_the_field(wl: dict[str, Any], names: str) -> None:
    with pytest.raises(kq.WorkloadInputError, match=names.replace("[", r"\[").replace("]", r"\]")):
        kq.workload_ask(wl)


def test_a_workload_awaits_nomination_only_with_quota_a_pending_check_and_no_cluster() -> None:
    quota = {"type": "QuotaReserved", "status": "True", "reason": "x", "message": "", "lastTransitionTime": "t"}
    check = {"name": "mk", "state": "Pending"}
    wl = workload((1, [container("1")]), status={"conditions": [quota], "admissionChecks": [check]})
    assert kq.multikueue_check(wl, ["mk"]) == check
    assert kq.multikueue_check(wl, ["other"]) is None
    assert kq.awaiting_nomination(wl, check)
    assert not kq.awaiting_nomination(wl, {**check, "state": "Ready"})
    assert not kq.awaiting_nomination({**wl, "status": {**wl["status"], "clusterName": "w1"}}, check)
    assert not kq.awaiting_nomination({**wl, "status": {"admissionChecks": [check]}}, check)
    finished = {**quota, "type": "Finished"}
    assert not kq.awaiting_nomination({**wl, "status": {**wl["status"], "conditions": [quota, finished]}}, check)


def test_a_rejection_is_the_cluster_that_gave_the_workload_back() -> None:
    retry = {"name": "mk", "state": "Retry"}
    wl = workload((1, [container("1")]), status={"clusterName": "w1", "admissionChecks": [retry]})
    assert kq.rejected_by(wl, retry, None) == "w1"
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "AdmissionCheck",
        "message": "",
        "lastTransitionTime": "t",
    }
    after = workload((1, [container("1")]), status={"conditions": [evicted]})
    assert kq.rejected_by(after, {"name": "mk", "state": "Pending"}, "w1") == "w1"
    preempted = {**evicted, "reason": "Preempted"}  # the manager preempted it: no worker's doing
    assert kq.rejected_by(workload((1, []), status={"conditions": [preempted]}), None, "w1") is None
    assert kq.rejected(workload((1, []), annotations={kq.REJECTED_ANNOTATION: "w1, w2,"})) == ("w1", "w2")


# ---- pricing ------------------------------------------------------------------------------


def reference_cost(ask: kq.WorkloadAsk, site: str) -> float:
    """The same model as a plain loop: each pod set on its cheapest fitting pool of the site."""
    total = 0.0
    for ps in ask.pod_sets:
        best = math.inf
        for p in POOLS:
            if p.site != site or p.capacity_type not in ask.capacity_types or p.arch != ps.arch:
                continue
            if p.gpus > 0 and ps.gpus <= 0:  # pods without accelerators never price a GPU node
                continue
            per = kq.PODS_PER_NODE
            for need, have in ((ps.cpu, p.vcpus), (ps.memory_gib, p.memory_gib), (ps.gpus, p.gpus)):
                if need > 0:
                    per = min(per, math.floor(have / need + 1e-9))
            if per < 1:
                continue
            nodes = math.ceil(ps.count / per)
            if p.max_nodes is None or nodes <= p.max_nodes:
                best = min(best, nodes * p.price_per_hour)
        total += best if ps.count > 0 else 0.0
    return total


def test_a_hand_worked_price() -> None:
    # 3 pods of 2 cores / 4 GiB at aws:eu-central-1: m.large fits 1 per node (3 x 0.10), m.2xlarge 4 (1 x 0.36)
    ask = kq.workload_ask(workload((3, [container("2", "4Gi")])))
    assert kq.site_costs(ask, TABLE, ["aws:eu-central-1"]) == {"aws:eu-central-1": pytest.approx(0.30)}
    # 5 such pods: 5 x 0.10 against 2 x 0.36
    ask5 = kq.workload_ask(workload((5, [container("2", "4Gi")])))
    assert kq.site_costs(ask5, TABLE, ["aws:eu-central-1"])["aws:eu-central-1"] == pytest.approx(0.50)


def test_prices_match_a_plain_loop_over_the_pools() -> None:
    rng = random.Random(27)
    sites = [s.id for s in SITE_BY_ID.values()]
    for _ in range(60):
        sets = [
            (rng.randint(0, 12), [container(str(rng.choice([0.25, 1, 2, 3, 6])), f"{rng.choice([1, 4, 10, 40])}Gi")])
            for _ in range(rng.randint(1, 3))
        ]
        caps = rng.choice(["ondemand", "spot,ondemand", "reserved", "ondemand,reserved"])
        ask = kq.workload_ask(workload(*sets, annotations={kq.CAPACITY_ANNOTATION: caps}))
        got = kq.site_costs(ask, TABLE, sites)
        for s in sites:
            assert got[s] == pytest.approx(reference_cost(ask, s)), (ask, s)


def test_gpu_and_arm_pods_need_pools_that_have_them() -> None:
    gpu = kq.workload_ask(workload((2, [container("4", "16Gi", gpu="1")])))
    costs = kq.site_costs(gpu, TABLE, ["aws:eu-central-1", "gcp:europe-west3", "azure:westeurope"])
    assert costs == {"aws:eu-central-1": 6.0, "gcp:europe-west3": 7.2, "azure:westeurope": math.inf}
    arm = workload((2, [container("2", "8Gi")]))
    arm["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    costs = kq.site_costs(kq.workload_ask(arm), TABLE, ["gcp:europe-west3", "aws:eu-central-1"])
    assert costs == {"gcp:europe-west3": pytest.approx(0.11), "aws:eu-central-1": math.inf}


def test_a_bounded_pool_counts_only_up_to_its_nodes() -> None:
    ask = kq.workload_ask(workload((2, [container("2", "16Gi")]), annotations={kq.CAPACITY_ANNOTATION: "reserved"}))
    assert kq.site_costs(ask, TABLE, ["aws:eu-west-2"])["aws:eu-west-2"] == pytest.approx(0.10)  # 2 of 2 nodes
    more = kq.workload_ask(workload((3, [container("2", "16Gi")]), annotations={kq.CAPACITY_ANNOTATION: "reserved"}))
    assert kq.site_costs(more, TABLE, ["aws:eu-west-2"])["aws:eu-west-2"] == math.inf


# ---- ranking ------------------------------------------------------------------------------

CLUSTERS = [
    kq.WorkerCluster("fra", "aws:eu-central-1"),
    kq.WorkerCluster("ams", "azure:westeurope"),
    kq.WorkerCluster("fra-gcp", "gcp:europe-west3"),
    kq.WorkerCluster("iad", "aws:us-east-1"),
    kq.WorkerCluster("lon", "aws:eu-west-2"),
    kq.WorkerCluster("onprem", None),
    kq.WorkerCluster("down", "aws:us-east-1", active=False),
]


def ranked(wl: dict[str, Any], rejected: tuple[str, ...] = ()) -> kq.Ranking:
    ask = kq.workload_ask(wl)
    costs = kq.site_costs(ask, TABLE, {c.site for c in CLUSTERS if c.site})
    return kq.rank(ask, CLUSTERS, costs, SITE_BY_ID, rejected)


def test_clusters_rank_by_the_workload_cost_at_their_site_then_unpriced_ones() -> None:
    r = ranked(workload((3, [container("2", "4Gi")])))
    costs = [r.cost_per_hour[n] for n in r.ordered if n in r.cost_per_hour]
    assert costs == sorted(costs)
    # 3 x 0.08 at iad, 3 x 0.09 at ams, 0.30 at fra (either pool), 3 x 0.11 at lon, 3 x 0.12 at fra-gcp
    assert r.ordered == ("iad", "ams", "fra", "lon", "fra-gcp", "onprem")
    assert "down" in r.excluded and "inactive" in r.excluded["down"]


def test_residency_leaves_out_forbidden_sites_and_sites_it_cannot_check() -> None:
    r = ranked(workload((3, [container("2", "4Gi")]), template_annotations={kq.RESIDENCY_ANNOTATION: "gdpr-eu"}))
    assert r.ordered == ("ams", "fra", "fra-gcp")
    assert "not allowed" in r.excluded["iad"] and "not allowed" in r.excluded["lon"]
    assert "residency cannot be checked" in r.excluded["onprem"]


def test_rejecting_clusters_are_left_out_until_every_candidate_has_rejected() -> None:
    wl = workload((3, [container("2", "4Gi")]), template_annotations={kq.RESIDENCY_ANNOTATION: "gdpr-eu"})
    r = ranked(wl, ("ams",))
    assert r.ordered == ("fra", "fra-gcp") and "rejected" in r.excluded["ams"] and not r.restarted
    again = ranked(wl, ("ams", "fra", "fra-gcp"))
    assert again.ordered == ("ams", "fra", "fra-gcp") and again.restarted


def test_a_workload_that_fits_nowhere_gets_no_candidate() -> None:
    r = ranked(workload((1, [container("64", "4Gi")])))
    assert r.ordered == ("onprem",)  # only the unpriced cluster, where the broker knows no pools
    assert all("no pool" in r.excluded[n] for n in ("fra", "ams", "iad"))


def test_at_most_ten_clusters_are_nominated() -> None:
    many = [kq.WorkerCluster(f"w{i:02d}", s.id) for i, s in itertools.product(range(3), SITE_BY_ID.values())]
    many = [kq.WorkerCluster(f"w{i:02d}", c.site) for i, c in enumerate(many)]
    ask = kq.workload_ask(workload((1, [container("1", "1Gi")])))
    r = kq.rank(ask, many, kq.site_costs(ask, TABLE, SITE_BY_ID), SITE_BY_ID)
    assert len(r.ordered) == 15
    assert kq.nomination(r, 1) == list(r.ordered[:1])
    assert kq.nomination(r, 12) == list(r.ordered[:10])


# ---- writing ------------------------------------------------------------------------------


def test_the_apply_carries_kueues_admission_fields_and_the_nomination() -> None:
    def cond(kind: str) -> dict[str, Any]:
        return {"type": kind, "status": "True", "reason": "r", "message": "", "lastTransitionTime": "t"}

    status = {
        "conditions": [cond("QuotaReserved"), cond("Evicted"), cond("SomeoneElses")],
        "admission": {"clusterQueue": "cq"},
        "admissionChecks": [{"name": "mk", "state": "Pending", "message": "", "lastTransitionTime": "t"}],
        "reclaimablePods": [{"name": "ps0", "count": 1}],  # the job controller's, not admission's
        "nominatedClusterNames": ["old"],
    }
    wl = workload((1, [container("1")]), status=status)
    body = kq.status_apply(wl, ["fra", "ams"])
    assert body["metadata"] == {"name": "job-train-1", "namespace": "ml", "uid": "u-1", "resourceVersion": "7"}
    assert body["status"]["nominatedClusterNames"] == ["fra", "ams"]
    assert [c["type"] for c in body["status"]["conditions"]] == ["QuotaReserved", "Evicted"]
    assert body["status"]["admission"] == status["admission"]
    assert body["status"]["admissionChecks"] == status["admissionChecks"]
    assert "reclaimablePods" not in body["status"]
    assert "nominatedClusterNames" not in kq.status_apply(wl, [])["status"]  # omitted: the apply clears it


def test_kueues_configured_dispatcher_is_read_from_its_configuration() -> None:
    text = (
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nmultiKueue:\n  dispatcherName: "
        + kq.DISPATCHER_NAME
    )
    assert kq.configured_dispatcher(text) == kq.DISPATCHER_NAME
    assert kq.configured_dispatcher("kind: Configuration\n") is None
    with pytest.raises(kq.WorkloadInputError):
        kq.configured_dispatcher("multiKueue: [")


def test_the_apply_keeps_whatever_else_kueues_manager_owns() -> None:
    """A field or condition type a newer Kueue applies, known from the Workload's managedFields
    (the real server keys list items: k:{"type":...}), is carried too, so the apply cannot drop it."""
    status = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "t"},
            {"type": "FutureGate", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "t"},
            {"type": "Unowned", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "t"},
        ],
        "futureField": {"x": 1},
        "reclaimablePods": [{"name": "ps0", "count": 1}],
    }
    wl = workload((1, [container("1")]), status=status)
    wl["metadata"]["managedFields"] = [
        {
            "manager": "kueue-admission",
            "operation": "Apply",
            "subresource": "status",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {'k:{"type":"QuotaReserved"}': {".": {}}, 'k:{"type":"FutureGate"}': {".": {}}},
                    "f:futureField": {"f:x": {}},
                }
            },
        },
        {
            "manager": "kueue-job",
            "operation": "Apply",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:reclaimablePods": {}}},
        },
    ]
    assert kq.owned_by_kueue(wl) == ({"conditions", "futureField"}, {"QuotaReserved", "FutureGate"})
    body = kq.status_apply(wl, ["fra"])
    assert [c["type"] for c in body["status"]["conditions"]] == ["QuotaReserved", "FutureGate"]
    assert body["status"]["futureField"] == {"x": 1}
    assert "reclaimablePods" not in body["status"]
