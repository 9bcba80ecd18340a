"""Dispatch applies a migration's waves in order through the outbox (fake API servers, official client).

A placement dispatched, then re-planned (more replicas, a small budget): dispatching the new
placement applies the scheduled waves one after the other, each cluster row of wave k+1 only
after wave k's rows are applied and their replicas ready; the app's capacity never dips below
the smaller of before and after; a wave whose replicas are not ready stops the dispatch, and
dispatching again resumes it.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sqlalchemy import select

from broker.app import Broker
from broker.db.dispatch_models import OutboxRow
from broker.dispatch.clusters import Cluster, add_cluster
from broker.dispatch.documents import ClusterIn, DispatchIn, ReplanIn
from broker.dispatch.kube import KubernetesDispatcher
from broker.dispatch.manifests import ClusterBundle
from broker.dispatch.outbox import DispatchService
from broker.dispatch.replan import ReplanService
from tests.integration.dispatch_support import policy
from tests.integration.kube_fake import serve_fake_kube, write_kubeconfig
from tests.integration.test_dispatch_kube import fleet  # noqa: F401  (the fixture)

API = "checkout-api"


class Recording(KubernetesDispatcher):
    """The real dispatcher; also notes each apply and the app's API replicas right after it."""

    def __init__(self, broker: Broker, servers: dict[str, Any], log: list[tuple[str, int]]) -> None:
        super().__init__(policy(broker), timeout_s=2, retries=1, backoff_s=0, sleep=lambda _s: None)
        self.servers, self.log = servers, log

    def apply(self, cluster: Cluster, bundle: ClusterBundle, *, ready_wait_s: float | None = None) -> dict[str, Any]:
        out = super().apply(cluster, bundle, ready_wait_s=0 if ready_wait_s is not None else None)
        running = sum(
            n for k in self.servers.values() for (_ns, name), n in k.replicas().items() if name.startswith(API)
        )
        self.log.append((cluster.name, running))
        return out


def _migrate(
    broker: Broker,
    placement: dict[str, Any],
    svc: DispatchService,
    servers: dict[str, Any],
    stack: ExitStack,
    tmp: Path,
) -> str:
    assert svc.dispatch(placement["id"], DispatchIn())["state"] == "applied"
    replan = ReplanService(broker).replan(
        placement["id"], ReplanIn(reason="demand", replicas={API: 12}, disruption_budget=2)
    )
    assert replan["decision"] == "migrate" and replan["migration"]["schedule"]["waves"]
    new_id = str(replan["new_placement_id"])
    # the grown placement may use a site the first did not: a cluster there too, as an operator would
    for site in sorted({a.site for a in broker.get_placement(new_id).result.assignments} - set(servers)):
        kube, url = stack.enter_context(serve_fake_kube())
        i = len(servers)
        cfg = write_kubeconfig(tmp / f"kc-new{i}.yaml", url, context=f"new{i}")
        known = broker.catalog().sites
        cluster = ClusterIn(name=f"new{i}", site=site, kubeconfig=str(cfg), context=f"new{i}", namespace="shop")
        add_cluster(broker.sessions, cluster, known_sites=known, policy=policy(broker), operator=True)
        servers[site] = kube
    return new_id


def test_waves_are_applied_in_order_and_capacity_never_dips(
    broker: Broker,
    fleet: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    placement, servers = fleet
    log: list[tuple[str, int]] = []
    svc = DispatchService(broker, dispatchers={"kubernetes": Recording(broker, servers, log)})
    before = sum(a["replicas"] for a in placement["assignments"] if a["workload"] == API)
    stack = ExitStack()
    new_id = _migrate(broker, placement, svc, servers, stack, tmp_path)
    log.clear()
    doc = svc.dispatch(new_id, DispatchIn())
    assert doc["state"] == "applied", doc
    assert len(doc["waves"]) >= 2 and all(c["state"] == "done" for w in doc["waves"] for c in w["clusters"])
    with broker.sessions() as s:
        rows = s.scalars(select(OutboxRow).where(OutboxRow.dispatch_id == doc["id"]).order_by(OutboxRow.seq)).all()
        waves = [int(o.payload["wave"]) for o in rows]
        clusters = [o.cluster for o in rows]
    assert waves == sorted(waves) and len(set(waves)) == len(doc["waves"]) + 1
    assert [c for c, _ in log] == clusters  # every row applied once, in wave order
    # make before break, as dispatched: the API's running replicas only grow until the new ones run
    assert all(running >= before for _, running in log)
    assert log[-1][1] == 12 and doc["replicas"][API] == 12
    stack.close()


def test_a_wave_not_ready_stops_the_dispatch_and_a_new_dispatch_resumes(
    broker: Broker,
    fleet: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    placement, servers = fleet
    log: list[tuple[str, int]] = []
    svc = DispatchService(broker, dispatchers={"kubernetes": Recording(broker, servers, log)})
    stack = ExitStack()
    new_id = _migrate(broker, placement, svc, servers, stack, tmp_path)
    for k in servers.values():
        k.ready_cap = 0  # new pods never become ready
    doc = svc.dispatch(new_id, DispatchIn())
    assert doc["state"] == "failed" and "wave 1" in doc["error"] and "not ready" in doc["error"]
    states = [c["state"] for w in doc["waves"] for c in w["clusters"]]
    assert states[0] == "failed" and set(states[1:]) <= {"pending"}  # the next waves did not start
    assert {c["state"] for c in doc["clusters"]} <= {"failed", "pending"}
    for k in servers.values():
        k.ready_cap = None
    again = svc.dispatch(new_id, DispatchIn())
    assert again["id"] == doc["id"] and again["state"] == "applied"
    assert again["replicas"][API] == 12
    stack.close()
