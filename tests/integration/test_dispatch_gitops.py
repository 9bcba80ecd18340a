"""GitOps dispatch of stored placements into a real git repository (acceptance of issue 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from broker.app import Broker
from broker.db.dispatch_models import DispatchRow, OutboxRow
from broker.dispatch.base import ApplyFailed
from broker.dispatch.clusters import Cluster
from broker.dispatch.documents import DispatchIn, ReplanIn
from broker.dispatch.gitops import GitOpsDispatcher
from broker.dispatch.manifests import PREFIX, ClusterBundle, Target, build_bundles
from broker.dispatch.outbox import DispatchService
from broker.dispatch.replan import ReplanService
from broker.dispatch.schema import problems
from broker.errors import InvalidRequest, NotFound
from tests.integration.dispatch_support import (
    committed_docs,
    git,
    gitops_clusters,
    new_repo,
    policy,
    replicas_by_workload,
    store_checkout,
    stored_document,
)
from tests.placements import assignment, placement

pytestmark = pytest.mark.usefixtures("server_roots")


def _rows(broker: Broker) -> tuple[int, int]:
    with broker.sessions() as s:
        return (
            s.scalar(select(func.count()).select_from(DispatchRow)) or 0,
            s.scalar(select(func.count()).select_from(OutboxRow)) or 0,
        )


def test_stored_placement_yields_schema_valid_manifests_matching_its_replicas(broker: Broker, tmp_path: Path) -> None:
    placement = store_checkout(broker)
    repo = new_repo(tmp_path / "fleet")
    names = gitops_clusters(broker, repo, {a["site"] for a in placement["assignments"]})
    svc = DispatchService(broker)

    doc = svc.dispatch(placement["id"], DispatchIn())
    assert doc["state"] == "applied" and all(c["state"] == "done" for c in doc["clusters"])

    committed = committed_docs(repo)
    deployments = [d for docs in committed.values() for d in docs if d["kind"] == "Deployment"]
    for docs in committed.values():
        for d in docs:
            assert problems(d) == [], d["metadata"]["name"]
    # replica counts match the placement: per workload and per site
    got: dict[str, int] = {}
    for d in deployments:
        wl = d["metadata"]["annotations"][f"{PREFIX}/workload"]
        got[wl] = got.get(wl, 0) + d["spec"]["replicas"]
    assert got == replicas_by_workload(placement["assignments"])
    for a in placement["assignments"]:
        path_prefix = f"clusters/{names[a['site']]}/shop/"
        here = [
            d
            for f, docs in committed.items()
            if f.startswith(path_prefix)
            for d in docs
            if d["kind"] == "Deployment" and d["metadata"]["annotations"][f"{PREFIX}/pool"] == a["pool"]
        ]
        assert sum(d["spec"]["replicas"] for d in here) == a["replicas"]
        _, itype, _cap = a["pool"].split("/")
        assert all(
            d["spec"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == itype for d in here
        )
    assert placement["id"] in git(repo, "log", "--format=%B")

    # dispatching twice is idempotent: same record, no new commit
    head = git(repo, "rev-parse", "HEAD")
    again = svc.dispatch(placement["id"], DispatchIn())
    assert again["id"] == doc["id"] and git(repo, "rev-parse", "HEAD") == head
    assert _rows(broker) == (1, len(doc["clusters"]))


def test_replan_after_site_failure_moves_and_prunes_in_git(broker: Broker, tmp_path: Path) -> None:
    placement = store_checkout(broker)
    repo = new_repo(tmp_path / "fleet")
    sites = {a["site"] for a in placement["assignments"]}
    names = gitops_clusters(broker, repo, sites)
    svc = DispatchService(broker)
    svc.dispatch(placement["id"], DispatchIn())
    failed = sorted(sites)[0]

    replan = ReplanService(broker).replan(placement["id"], ReplanIn(reason="site_failure", exclude_sites=[failed]))
    assert replan["decision"] == "migrate" and replan["forced_by"]
    new = stored_document(broker, replan["new_placement_id"])
    assert failed not in {a["site"] for a in new["assignments"]}
    assert replicas_by_workload(new["assignments"]) == replicas_by_workload(placement["assignments"])
    gitops_clusters(broker, repo, {a["site"] for a in new["assignments"]} - sites)

    doc = svc.dispatch(new["id"], DispatchIn())
    assert doc["state"] == "applied"
    # the failed site's cluster is dispatched last, with nothing left to run there
    assert doc["clusters"][-1]["cluster"] == names[failed] and doc["clusters"][-1]["replicas"] == {}
    committed = committed_docs(repo)
    assert not [f for f in committed if f.startswith(f"clusters/{names[failed]}/") and "_namespace" not in f]
    live = [d for docs in committed.values() for d in docs if d["kind"] == "Deployment"]
    assert {d["metadata"]["annotations"][f"{PREFIX}/placement-id"] for d in live} == {new["id"]}

    # rolling back = dispatching the old placement again: a new dispatch, not the first one replayed
    first_id = svc.latest(placement["id"])["id"]
    back = svc.dispatch(placement["id"], DispatchIn())
    assert back["state"] == "applied" and back["id"] != first_id
    live = [d for docs in committed_docs(repo).values() for d in docs if d["kind"] == "Deployment"]
    assert {d["metadata"]["annotations"][f"{PREFIX}/placement-id"] for d in live} == {placement["id"]}
    assert sum(d["spec"]["replicas"] for d in live) == sum(a["replicas"] for a in placement["assignments"])


def test_bad_input_leaves_no_records_and_no_commit(broker: Broker, tmp_path: Path) -> None:
    placement = store_checkout(broker)
    repo = new_repo(tmp_path / "fleet")
    sites = sorted({a["site"] for a in placement["assignments"]})
    gitops_clusters(broker, repo, set(sites[:1]))  # the second site has no cluster
    svc = DispatchService(broker)
    with pytest.raises(InvalidRequest) as exc:
        svc.dispatch(placement["id"], DispatchIn())
    assert sites[1] in exc.value.errors[0]["msg"]
    gitops_clusters(broker, repo, set(sites[1:]))
    with pytest.raises(InvalidRequest):
        svc.dispatch(placement["id"], DispatchIn(templates={"orders-db": "kind: Deployment\nspec: {replicas: x}\n"}))
    with pytest.raises(NotFound):
        svc.dispatch("pl_missing", DispatchIn())
    assert _rows(broker) == (0, 0)
    assert git(repo, "rev-list", "--all") == ""
    assert stored_document(broker, placement["id"]) == placement


def _bundle(replicas: int) -> ClusterBundle:
    pushed = placement(
        [assignment("api", "aws:eu-central-1/m6i.large/ondemand", replicas, 0.0)],
        request={"workloads": [{"name": "api", "cpu": 1, "memory_gib": 2}]},
        id="pl_PUSH",
        name="push test",
    )
    (b,) = build_bundles(pushed, {"aws:eu-central-1": [Target("fra", "aws:eu-central-1", "shop")]})
    return b


def test_gitops_pushes_to_the_upstream_and_a_failed_push_is_pushed_on_resume(broker: Broker, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(remote), str(work))
    (work / "README").write_text("fleet\n")
    git(work, "add", "README")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    git(work, "push", "-q", "-u", "origin", "HEAD")
    cluster = Cluster("fra", "aws:eu-central-1", "gitops", "shop", gitops_dir=str(work))
    gitops = GitOpsDispatcher(policy(broker), timeout_s=20)

    first = gitops.apply(cluster, _bundle(3))
    assert first["committed"] and first["pushed"]
    assert git(remote, "rev-parse", "HEAD") == git(work, "rev-parse", "HEAD")
    assert "pl_PUSH" in git(remote, "log", "-1", "--format=%B")

    remote.rename(tmp_path / "away.git")  # the remote is unreachable
    with pytest.raises(ApplyFailed) as exc:
        gitops.apply(cluster, _bundle(5))
    assert exc.value.cluster == "fra" and exc.value.retryable
    (tmp_path / "away.git").rename(remote)
    resumed = gitops.apply(cluster, _bundle(5))  # nothing new to commit, but the push is owed
    assert not resumed["committed"] and resumed["pushed"]
    shown = git(remote, "show", "HEAD:clusters/fra/shop/api.yaml")
    assert "replicas: 5" in shown
