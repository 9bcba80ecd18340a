"""Kubernetes dispatch through the official client against recorded-format API responses.

Each cluster is a local server speaking the API server's wire format (see
kube_fake.py) behind a real kubeconfig, so the client code path is the one a
live cluster sees.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from broker.app import Broker
from broker.db.dispatch_models import DispatchRow, OutboxRow
from broker.dispatch.clusters import Cluster, add_cluster
from broker.dispatch.documents import ClusterIn, DispatchIn, ReplanIn
from broker.dispatch.kube import KubernetesDispatcher
from broker.dispatch.manifests import ClusterBundle
from broker.dispatch.outbox import DispatchService
from broker.dispatch.replan import ReplanService
from tests.integration.dispatch_support import policy, replicas_by_workload, store_checkout, stored_document
from tests.integration.kube_fake import FakeKube, serve_fake_kube, write_kubeconfig

pytestmark = pytest.mark.usefixtures("server_roots")


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing below catches it."""


class CrashBeforeSecondApply:
    def __init__(self, inner: KubernetesDispatcher) -> None:
        self.inner, self.calls = inner, 0

    def apply(self, cluster: Cluster, bundle: ClusterBundle) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 2:
            raise Crash
        return self.inner.apply(cluster, bundle)


def fast(broker: Broker) -> KubernetesDispatcher:
    return KubernetesDispatcher(policy(broker), timeout_s=2, retries=3, backoff_s=0, sleep=lambda _s: None)


@pytest.fixture()
def fleet(broker: Broker, tmp_path: Path) -> Iterator[tuple[dict[str, Any], dict[str, FakeKube]]]:
    """A stored placement and one fake API server (cluster) per site it uses."""
    placement = store_checkout(broker)
    sites = sorted({a["site"] for a in placement["assignments"]})
    with ExitStack() as stack:
        servers: dict[str, FakeKube] = {}
        for i, site in enumerate(sites):
            kube, url = stack.enter_context(serve_fake_kube())
            cfg = write_kubeconfig(tmp_path / f"kc{i}.yaml", url, context=f"ctx{i}")
            add_cluster(
                broker.sessions,
                ClusterIn(name=f"k{i}", site=site, kubeconfig=str(cfg), context=f"ctx{i}", namespace="shop"),
                known_sites=broker.catalog().sites,
                policy=policy(broker),
                operator=True,
            )
            servers[site] = kube
        yield placement, servers


def _deployment_patches(kube: FakeKube) -> list[tuple[str, str, dict[str, list[str]], str]]:
    return [r for r in kube.requests if r[0] == "PATCH" and "/deployments/" in r[1] and not r[1].endswith("/scale")]


def test_server_side_apply_reads_back_ready_replicas(broker: Broker, fleet: Any) -> None:
    placement, servers = fleet
    doc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)}).dispatch(placement["id"], DispatchIn())
    assert doc["state"] == "applied"
    for kube in servers.values():
        assert kube.requests[0][1] == "/api/v1/namespaces/shop"  # the namespace first
        for _m, _path, query, ctype in _deployment_patches(kube):
            assert ctype == "application/apply-patch+yaml"
            assert query["fieldManager"] == ["placement-broker"] and query["force"] == ["true"]
    for c in doc["clusters"]:
        assert c["result"]["ready_replicas"] == c["replicas"]
    live: dict[str, int] = {}
    for kube in servers.values():
        for d in kube.deployments.values():
            wl = d["metadata"]["annotations"]["placement-broker.dev/workload"]
            live[wl] = live.get(wl, 0) + d["spec"]["replicas"]
    assert live == replicas_by_workload(placement["assignments"])


@pytest.mark.both_backends
def test_crash_between_two_cluster_applies_resumes_to_the_same_end_state(broker: Broker, fleet: Any) -> None:
    placement, servers = fleet
    crashing = DispatchService(broker, dispatchers={"kubernetes": CrashBeforeSecondApply(fast(broker))})
    with pytest.raises(Crash):
        crashing.dispatch(placement["id"], DispatchIn())
    with broker.sessions() as s:
        d = s.scalars(select(DispatchRow)).one()
        items = s.scalars(select(OutboxRow).order_by(OutboxRow.seq)).all()
        assert d.state == "applying" and [o.state for o in items] == ["done", "applying"]
    first, second = (servers[s] for s in sorted(servers))
    assert first.deployments and not second.deployments
    applied_before = len(_deployment_patches(first))

    svc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)})
    expected = {b.cluster: b.replicas() for b in svc.plan(placement["id"], DispatchIn())}
    doc = svc.dispatch(placement["id"], DispatchIn())  # the same command again resumes
    assert doc["id"] == d.id and doc["state"] == "applied"
    assert [c["attempts"] for c in doc["clusters"]] == [1, 2]
    assert len(_deployment_patches(first)) == applied_before  # done work is not repeated
    got = {f"k{i}": {n: r for (_ns, n), r in servers[s].replicas().items()} for i, s in enumerate(sorted(servers))}
    assert got == expected
    assert all(d["metadata"]["generation"] == 1 for k in servers.values() for d in k.deployments.values())


def test_transient_errors_are_retried_and_persistent_ones_fail_cleanly(broker: Broker, fleet: Any) -> None:
    placement, servers = fleet
    first = servers[sorted(servers)[0]]
    first.fail = [("PATCH", "/deployments/", 503)] * 2
    svc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)})
    assert svc.dispatch(placement["id"], DispatchIn())["state"] == "applied"

    # a new placement of the same app, scaled down where it runs (moves cost too much to pay
    # back: the re-plan starts from the placement in force, so its sites keep their clusters);
    # the cluster keeps answering 503
    scaled = ReplanIn(replicas={"checkout-api": 4}, migration_cost_per_replica=1000.0)
    again = ReplanService(broker).replan(placement["id"], scaled)
    assert {a["site"] for a in again["new_placement"]["assignments"]} <= set(servers)
    first.fail = [("PATCH", "/deployments/", 503)] * 10
    before = first.replicas()
    doc = svc.dispatch(again["new_placement_id"], DispatchIn())
    assert doc["state"] == "failed" and "HTTP 503" in doc["error"] and "'k0'" in doc["error"]
    assert [c["state"] for c in doc["clusters"]] == ["failed", "pending"]  # stops at the first failure
    assert first.replicas() == before


def test_unreachable_cluster_fails_clearly_and_resumes_once_reachable(broker: Broker, tmp_path: Path) -> None:
    placement = store_checkout(broker)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead_port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    cfg = write_kubeconfig(tmp_path / "kc.yaml", f"http://127.0.0.1:{dead_port}", context="dead")
    for i, site in enumerate(sorted({a["site"] for a in placement["assignments"]})):
        add_cluster(
            broker.sessions,
            # two registrations on one API server: distinct namespaces keep them apart
            ClusterIn(name=f"k{i}", site=site, kubeconfig=str(cfg), context="dead", namespace=f"ns{i}"),
            known_sites=broker.catalog().sites,
            policy=policy(broker),
            operator=True,
        )
    svc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)})
    doc = svc.dispatch(placement["id"], DispatchIn())
    assert doc["state"] == "failed" and "unreachable" in doc["error"]
    assert doc["clusters"][0]["state"] == "failed" and doc["clusters"][0]["attempts"] == 1
    assert stored_document(broker, placement["id"])["assignments"] == placement["assignments"]

    with serve_fake_kube() as (kube, url):
        write_kubeconfig(cfg, url, context="dead")  # the operator fixes the cluster
        resumed = svc.dispatch(placement["id"], DispatchIn())
    assert resumed["id"] == doc["id"] and resumed["state"] == "applied"
    assert sum(kube.replicas().values()) == sum(a["replicas"] for a in placement["assignments"])


def test_replicas_leaving_a_cluster_are_scaled_down(broker: Broker, fleet: Any, tmp_path: Path) -> None:
    placement, servers = fleet
    svc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)})
    svc.dispatch(placement["id"], DispatchIn())
    failed = sorted(servers)[0]
    replan = ReplanService(broker).replan(placement["id"], ReplanIn(reason="site_failure", exclude_sites=[failed]))
    new = stored_document(broker, replan["new_placement_id"])
    with ExitStack() as stack:
        for j, site in enumerate(sorted({a["site"] for a in new["assignments"]} - set(servers))):
            kube, url = stack.enter_context(serve_fake_kube())
            cfg = write_kubeconfig(tmp_path / f"new{j}.yaml", url, context="n")
            add_cluster(
                broker.sessions,
                ClusterIn(name=f"n{j}", site=site, kubeconfig=str(cfg), context="n", namespace="shop"),
                known_sites=broker.catalog().sites,
                policy=policy(broker),
                operator=True,
            )
            servers[site] = kube
        doc = svc.dispatch(new["id"], DispatchIn())
    assert doc["state"] == "applied"
    last = doc["clusters"][-1]
    assert last["replicas"] == {} and sorted(last["result"]["scaled_down"]) == sorted(
        n for (_ns, n) in servers[failed].deployments
    )
    assert set(servers[failed].replicas().values()) == {0}
    scale_calls = [r for r in servers[failed].requests if r[1].endswith("/scale")]
    assert scale_calls and all(r[3] == "application/merge-patch+json" for r in scale_calls)


STATEFUL = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: orders-db
  template:
    spec:
      containers:
        - name: postgres
          image: postgres:17
          volumeMounts: [{name: data, mountPath: /var/lib/postgresql/data}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 500Gi}}
"""


def test_statefulset_templates_are_applied_and_read_back(broker: Broker, fleet: Any) -> None:
    placement, servers = fleet
    svc = DispatchService(broker, dispatchers={"kubernetes": fast(broker)})
    doc = svc.dispatch(placement["id"], DispatchIn(templates={"orders-db": STATEFUL}))
    assert doc["state"] == "applied"
    sets = [s for kube in servers.values() for s in kube.statefulsets.values()]
    assert sum(s["spec"]["replicas"] for s in sets) == replicas_by_workload(placement["assignments"])["orders-db"]
    assert all(s["spec"]["serviceName"] == "orders-db" and s["spec"]["volumeClaimTemplates"] for s in sets)
    assert not [
        d for kube in servers.values() for d in kube.deployments.values() if "orders-db" in d["metadata"]["name"]
    ]
    for c in doc["clusters"]:
        assert c["result"]["ready_replicas"] == c["replicas"]
