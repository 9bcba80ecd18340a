"""The Kueue MultiKueue external dispatcher: watch Workloads on the MultiKueue manager cluster and
nominate worker clusters in the broker's cost and residency order (broker/integrations/kueue.py).

Like the PlacementRequest controller, it lists, watches from the list's resourceVersion and lists
again on 410 Gone. Nomination goes by rounds, as Kueue's own incremental dispatcher does: the
cheapest `step` clusters first; when none has admitted the Workload after `round_s`, `step` more;
at most 10. A worker that evicts the Workload after admitting it (Kueue marks the MultiKueue check
Retry while `status.clusterName` names it, then evicts) is recorded in the Workload's
`placement-broker.dev/rejected-clusters` annotation and left out of its later nominations.

The worker clusters of a Workload are those of the MultiKueueConfig its MultiKueue AdmissionCheck
points to; a MultiKueueCluster's broker site is its `placement-broker.dev/site` annotation, else
the site of the broker cluster registered under the same name.

The Kueue API version is the one the cluster serves (API discovery, `/apis`): v1beta2 where
served (Kueue v0.15+, where it is the stored version and v1beta1 is deprecated), else v1beta1
(v0.13, v0.14); `--kueue-version` forces one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.core.domain import Site
from broker.core.pooltable import PoolTable
from broker.integrations import kueue as kq
from broker.operator.apiserver import NOT_FOUND, list_then_watch, watch_objects, write_until_no_conflict
from broker.operator.reconcile import event as event_body

log = logging.getLogger("broker.kueue")
APPLY = "application/apply-patch+yaml"
WORKLOADS = "workloads"

Prices = Callable[[], tuple[Mapping[str, Site], PoolTable]]
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # the versions the dispatcher speaks, preferred first


class KueueNotServed(RuntimeError):
    """The cluster serves no Kueue API version the dispatcher speaks (or discovery failed)."""


def served_versions(api: client.ApiClient) -> list[str]:
    """The versions of Kueue's API group the cluster serves (API discovery, `/apis`)."""
    try:
        groups = client.ApisApi(api).get_api_versions().groups or []
    except ApiException as exc:
        raise KueueNotServed(f"API discovery (/apis) failed: {exc.status} {exc.reason}") from exc
    return [v.version for g in groups if g.name == kq.GROUP for v in g.versions or []]


def served_version(api: client.ApiClient) -> str:
    """The Kueue API version to use on this cluster: the first of KUEUE_VERSIONS it serves."""
    return preferred_version(served_versions(api))


def preferred_version(served: list[str]) -> str:
    """The first of KUEUE_VERSIONS in `served`."""
    for version in KUEUE_VERSIONS:
        if version in served:
            return version
    shown = ", ".join(served) or "none"
    raise KueueNotServed(
        f"the cluster serves no Kueue API the dispatcher speaks ({' or '.join(KUEUE_VERSIONS)}; "
        f"{kq.GROUP} versions served: {shown}): is Kueue (v0.13+) installed?"
    )


@dataclass
class _Round:
    started: float
    width: int


@dataclass
class Topology:
    """The MultiKueue objects of the manager cluster, as the dispatcher needs them."""

    checks: dict[str, list[str]] = field(default_factory=dict)  # MultiKueue AdmissionCheck -> its clusters
    clusters: dict[str, kq.WorkerCluster] = field(default_factory=dict)
    read_at: float = -1e18

    def workers(self, check: str) -> list[kq.WorkerCluster]:
        return [self.clusters.get(n, kq.WorkerCluster(n, None, active=False)) for n in self.checks.get(check, [])]


def _doc(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(value).__name__}")
    return value


class KueueDispatcher:
    def __init__(
        self,
        api: client.ApiClient,
        prices: Prices,
        *,
        registered: Mapping[str, str] | None = None,
        version: str | None = None,  # None: what the cluster serves (served_version)
        namespace: str | None = None,
        step: int = 1,
        round_s: float = 300.0,
        watch_timeout_s: int = 60,
        topology_ttl_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.prices = prices
        self.registered = dict(registered or {})  # broker cluster name -> site
        self.version = version or served_version(api)
        self.namespace = namespace
        self.step = max(1, step)
        self.round_s = round_s
        self.watch_timeout_s = watch_timeout_s
        self.topology_ttl_s = topology_ttl_s
        self.clock = clock
        self._topology = Topology()
        self._rounds: dict[str, _Round] = {}
        # Workloads awaiting nomination: uid -> (when the next round starts, inf if none, namespace, name)
        self._waiting: dict[str, tuple[float, str, str]] = {}
        self._last_cluster: dict[str, str] = {}
        self._told: dict[str, str] = {}  # uid -> last event message (an unchanged answer is not repeated)
        self.relists = 0
        self.nominations = 0

    # ---- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        list_then_watch(
            stop, resync=self.resync, events=self._events, handle=self._handle, after_watch=self.tick, log=log
        )

    def _handle(self, obj: dict[str, Any]) -> None:
        if not obj.get("bookmark"):
            self.reconcile_safely(obj)

    def resync(self) -> str:
        """Read the MultiKueue objects, reconcile every Workload, return the list's resourceVersion."""
        self.relists += 1
        self.topology(refresh=True)
        listed = self._list_workloads()
        for obj in listed.get("items", []):
            self.reconcile_safely(obj)
        return str(listed["metadata"]["resourceVersion"])

    def tick(self) -> None:
        """Widen the nominations whose round is over; nominate every waiting Workload again when
        the MultiKueue objects changed (a cluster went inactive, a site annotation moved)."""
        before = self._topology
        after = self.topology()
        moved = after is not before and (after.checks, after.clusters) != (before.checks, before.clusters)
        t = self.clock()
        for uid, (due, ns, name) in list(self._waiting.items()):
            if moved or due <= t:
                try:
                    self.reconcile_safely(self._get(ns, name))
                except ApiException as exc:
                    if exc.status == NOT_FOUND:
                        self._forget(uid)

    def _events(self, resource_version: str, stop: threading.Event) -> Iterator[dict[str, Any]]:
        timeout = self.watch_timeout_s
        due = min((d for d, _, _ in self._waiting.values()), default=math.inf)
        if math.isfinite(due):  # end the watch in time for the next round
            timeout = max(1, min(timeout, int(due - self.clock()) + 1))
        events = watch_objects(
            self.objects,
            kq.GROUP,
            self.version,
            WORKLOADS,
            namespace=self.namespace,
            resource_version=resource_version,
            timeout_s=timeout,
            stop=stop,
        )
        for kind, obj in events:
            if kind == "DELETED":
                self._forget(str(obj["metadata"].get("uid")))
            elif kind in ("BOOKMARK", "ADDED", "MODIFIED"):
                yield obj

    # ---- the MultiKueue objects ---------------------------------------------------------

    def topology(self, *, refresh: bool = False) -> Topology:
        if not refresh and self.clock() - self._topology.read_at < self.topology_ttl_s:
            return self._topology
        configs = {
            c["metadata"]["name"]: [str(n) for n in (c.get("spec") or {}).get("clusters") or []]
            for c in self._list_cluster_scoped("multikueueconfigs")
        }
        checks: dict[str, list[str]] = {}
        for ac in self._list_cluster_scoped("admissionchecks"):
            spec = ac.get("spec") or {}
            params = spec.get("parameters") or {}
            if spec.get("controllerName") == kq.MULTIKUEUE_CONTROLLER and params.get("kind") == "MultiKueueConfig":
                checks[ac["metadata"]["name"]] = configs.get(str(params.get("name")), [])
        clusters = {}
        for mkc in self._list_cluster_scoped("multikueueclusters"):
            name = mkc["metadata"]["name"]
            site = ((mkc["metadata"].get("annotations") or {}).get(kq.SITE_ANNOTATION)) or self.registered.get(name)
            active = any(
                c.get("type") == "Active" and c.get("status") == "True"
                for c in (mkc.get("status") or {}).get("conditions") or []
            )
            clusters[name] = kq.WorkerCluster(name, site, active)
        self._topology = Topology(checks, clusters, self.clock())
        return self._topology

    # ---- one Workload -------------------------------------------------------------------

    def reconcile_safely(self, wl: dict[str, Any]) -> None:
        try:
            self.reconcile(wl)
        except ApiException as exc:  # the next event, round or resync retries
            log.warning("dispatching %s failed: %s %s", _key(wl), exc.status, exc.reason)

    def reconcile(self, wl: dict[str, Any]) -> None:
        meta = wl["metadata"]
        uid = str(meta.get("uid"))
        if meta.get("deletionTimestamp"):
            self._forget(uid)
            return
        topo = self.topology()
        check = kq.multikueue_check(wl, topo.checks)
        if check is None and (wl.get("status") or {}).get("admissionChecks"):
            check = kq.multikueue_check(wl, self.topology(refresh=True).checks)  # a check created since
            topo = self._topology
        if check is None:
            self._forget(uid)
            return
        gone = kq.rejected_by(wl, check, self._last_cluster.get(uid))
        if gone and gone not in kq.rejected(wl):
            wl = self._record_rejection(wl, gone)
        cluster = (wl.get("status") or {}).get("clusterName")
        if cluster:
            self._last_cluster[uid] = str(cluster)
        else:
            self._last_cluster.pop(uid, None)
        if not kq.awaiting_nomination(wl, check):
            self._rounds.pop(uid, None)
            self._waiting.pop(uid, None)
            return
        self._nominate(wl, topo.workers(str(check["name"])))

    def _nominate(self, wl: dict[str, Any], workers: list[kq.WorkerCluster]) -> None:
        uid = str(wl["metadata"].get("uid"))
        try:
            ask = kq.workload_ask(wl)
        except kq.WorkloadInputError as exc:
            self._tell(wl, "Warning", "InvalidWorkload", str(exc))
            return
        sites, table = self.prices()
        costs = kq.site_costs(ask, table, {w.site for w in workers if w.site})
        ranking = kq.rank(ask, workers, costs, sites, kq.rejected(wl))
        t = self.clock()
        r = self._rounds.get(uid)
        if r is None:
            r = self._rounds[uid] = _Round(t, self.step)
        elif t - r.started >= self.round_s:
            r.started, r.width = t, r.width + self.step
        names = kq.nomination(ranking, r.width)
        wider = len(names) < min(len(ranking.ordered), kq.MAX_NOMINATED)
        due = r.started + self.round_s if wider else math.inf
        self._waiting[uid] = (due, wl["metadata"]["namespace"], wl["metadata"]["name"])
        if not names:  # withdraw what no longer qualifies (an apply without the field clears it)
            if kq.nominated(wl):
                self._apply(wl, names)
            self._tell(wl, "Warning", "NoWorkerCluster", kq.reason(ranking, names))
            return
        if list(kq.nominated(wl)) != names and self._apply(wl, names):
            self.nominations += 1
            self._tell(wl, "Normal", "Nominated", kq.reason(ranking, names))

    def _apply(self, wl: dict[str, Any], names: list[str]) -> bool:
        """Server-side apply of the nomination under Kueue's admission field manager; a 409 (the
        Workload changed since it was read) reads it again and retries while it still waits."""
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]

        def write() -> None:
            self.objects.patch_namespaced_custom_object_status(
                kq.GROUP,
                self.version,
                ns,
                WORKLOADS,
                name,
                kq.status_apply(wl, names),
                field_manager=kq.FIELD_MANAGER,
                force=True,
                _content_type=APPLY,
            )

        def reread() -> bool:
            nonlocal wl
            wl = self._get(ns, name)
            check = kq.multikueue_check(wl, self._topology.checks)
            return kq.awaiting_nomination(wl, check) and list(kq.nominated(wl)) != names

        return write_until_no_conflict(write, reread, f"nomination of {ns}/{name}")

    def _record_rejection(self, wl: dict[str, Any], cluster: str) -> dict[str, Any]:
        value = ",".join([*kq.rejected(wl), cluster])
        log.info("%s was given back by %s", _key(wl), cluster)
        body = {"metadata": {"annotations": {kq.REJECTED_ANNOTATION: value}}}
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        updated = _doc(self.objects.patch_namespaced_custom_object(kq.GROUP, self.version, ns, WORKLOADS, name, body))
        self._tell(updated, "Normal", "Rejected", f"worker cluster {cluster} evicted the workload; not nominated again")
        return updated

    def _forget(self, uid: str) -> None:
        self._rounds.pop(uid, None)
        self._waiting.pop(uid, None)
        self._last_cluster.pop(uid, None)
        self._told.pop(uid, None)

    # ---- API calls ----------------------------------------------------------------------

    def _list_workloads(self) -> dict[str, Any]:
        if self.namespace:
            return _doc(self.objects.list_namespaced_custom_object(kq.GROUP, self.version, self.namespace, WORKLOADS))
        return _doc(self.objects.list_cluster_custom_object(kq.GROUP, self.version, WORKLOADS))

    def _list_cluster_scoped(self, plural: str) -> list[dict[str, Any]]:
        items = _doc(self.objects.list_cluster_custom_object(kq.GROUP, self.version, plural)).get("items") or []
        return [i for i in items if isinstance(i, dict)]

    def _get(self, ns: str, name: str) -> dict[str, Any]:
        return _doc(self.objects.get_namespaced_custom_object(kq.GROUP, self.version, ns, WORKLOADS, name))

    def _tell(self, wl: dict[str, Any], kind: str, why: str, message: str) -> None:
        meta = wl["metadata"]
        uid = str(meta.get("uid"))
        if self._told.get(uid) == f"{why}:{message}":
            return
        self._told[uid] = f"{why}:{message}"
        body = event_body(
            wl,
            api_version=f"{kq.GROUP}/{self.version}",
            kind="Workload",
            event_type=kind,
            reason=why,
            message=message,
            component="placement-broker-dispatcher",
        )
        try:
            self.core.create_namespaced_event(meta["namespace"], body)  # type: ignore[arg-type]
        except ApiException as exc:  # an event is a courtesy: the nomination is in the status
            log.info("event for %s not recorded: %s", _key(wl), exc.status)


def kueue_configuration_problem(api: client.ApiClient, ref: str, name: str) -> tuple[bool, str]:
    """(fatal, message) about Kueue's configured dispatcher: fatal when Kueue names another one
    (its own dispatcher would fight the broker's nominations); a warning when the ConfigMap
    (NAMESPACE/NAME, key controller_manager_config.yaml) cannot be read."""
    ns, _, cm_name = ref.partition("/")
    try:
        cm = client.CoreV1Api(api).read_namespaced_config_map(cm_name, ns)
    except ApiException as exc:
        return (
            False,
            f"cannot read Kueue's configuration {ref} ({exc.status}): check multiKueue.dispatcherName yourself",
        )
    text = (cm.data or {}).get("controller_manager_config.yaml", "")
    try:
        configured = kq.configured_dispatcher(text)
    except kq.WorkloadInputError as exc:
        return True, str(exc)
    if configured != name:
        shown = configured or "unset (AllAtOnce)"
        return True, f"Kueue's multiKueue.dispatcherName is {shown}, not {name}: set it to {name} ({ref})"
    return False, ""


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
