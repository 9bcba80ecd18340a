"""Dispatches interrupted by a crash are resumed by the next API start (no Redis) or `broker worker`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from broker.app import Broker
from broker.db.dispatch_models import DispatchRow, OutboxRow
from broker.dispatch.clusters import Cluster
from broker.dispatch.documents import DispatchIn
from broker.dispatch.gitops import GitOpsDispatcher
from broker.dispatch.manifests import ClusterBundle
from broker.dispatch.outbox import DispatchService
from broker.jobs import worker
from broker.placements.documents import placement_document
from tests.integration.dispatch_support import (
    committed_docs,
    gitops_clusters,
    new_repo,
    policy,
    replicas_by_workload,
)
from tests.integration.service_support import open_broker, service_client, small_request

pytestmark = [pytest.mark.both_backends, pytest.mark.usefixtures("server_roots")]


class Crash(Exception):
    """The process dies here (not an ApplyFailed: nothing records the failure)."""


class CrashAfterFirstApply:
    def __init__(self, broker: Broker) -> None:
        self.inner = GitOpsDispatcher(policy(broker))
        self.applied = 0

    def apply(self, cluster: Cluster, bundle: ClusterBundle) -> dict[str, Any]:
        if self.applied == 1:
            raise Crash
        self.applied += 1
        return self.inner.apply(cluster, bundle)


def _interrupted(broker: Broker, repo: Path) -> tuple[str, dict[str, Any]]:
    """A stored placement over two sites whose dispatch crashed after the first cluster."""
    body = small_request("resume", replicas=4)
    body["workloads"][0]["spread"] = {"min_sites": 2}
    stored_placement, stored = broker.place({**body, "dry_run": False})
    assert stored
    placement = placement_document(stored_placement)
    gitops_clusters(broker, repo, {a["site"] for a in placement["assignments"]})
    with pytest.raises(Crash):
        crashing = DispatchService(broker, dispatchers={"gitops": CrashAfterFirstApply(broker)})
        crashing.dispatch(placement["id"], DispatchIn())
    with broker.sessions() as s:
        d = s.scalars(select(DispatchRow)).one()
        states = [o.state for o in s.scalars(select(OutboxRow).order_by(OutboxRow.seq))]
    assert d.state == "applying" and states == ["done", "applying"]
    return d.id, placement


def _replicas_in_repo(repo: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for docs in committed_docs(repo).values():
        for d in docs:
            if d["kind"] == "Deployment":
                wl = d["metadata"]["annotations"]["placement-broker.dev/workload"]
                out[wl] = out.get(wl, 0) + d["spec"]["replicas"]
    return out


def test_api_start_resumes_an_interrupted_dispatch(db_url: str, tmp_path: Path) -> None:
    b = open_broker(db_url)
    repo = new_repo(tmp_path / "fleet")
    dispatch_id, placement = _interrupted(b, repo)
    with service_client(b) as c:  # the API restarts (in-process jobs: it is its own worker)
        for _ in range(200):
            doc = c.get(f"/v1/dispatches/{dispatch_id}").json()
            if doc["state"] != "applying":
                break
            time.sleep(0.05)
    assert doc["state"] == "applied", doc
    assert [x["attempts"] for x in doc["clusters"]] == [1, 2]  # the done cluster is not applied again
    assert _replicas_in_repo(repo) == replicas_by_workload(placement["assignments"])


def test_worker_start_resumes_an_interrupted_dispatch(db_url: str, tmp_path: Path) -> None:
    b = open_broker(db_url)
    repo = new_repo(tmp_path / "fleet")
    dispatch_id, placement = _interrupted(b, repo)
    assert worker.serve(b, burst=True) == 0  # `broker worker --burst`: no job, but the dispatch resumed
    doc = DispatchService(b).get(dispatch_id, tenant="default")
    assert doc["state"] == "applied" and [x["attempts"] for x in doc["clusters"]] == [1, 2]
    assert _replicas_in_repo(repo) == replicas_by_workload(placement["assignments"])
    assert worker.resume_dispatches(b) == 0  # nothing left
