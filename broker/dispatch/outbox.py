"""Durable dispatch: a state machine with an outbox in the database.

A dispatch goes pending -> applying -> applied | failed. It is written with
one outbox row per cluster (the exact manifests to apply) in one transaction
before anything is applied; each row goes pending -> applying -> done | failed
and is committed before and after its apply. A crash leaves rows in `applying`
or `pending`; dispatching the same placement again finds the same record (the
(placement, manifest fingerprint) pair is unique) and resumes from the first
row not done. Rows already done are not applied again; a row that was
interrupted is applied again, which is safe because every apply is idempotent
(server-side apply; a git commit only when the tree changed).

Clusters that gain replicas are applied first and clusters that only lose
replicas last, and the run stops at the first failure: a dispatch that cannot
start new replicas never removes old ones. A placement that follows another one
of the app is applied in the migration plan's scheduled waves (`wave_bundles.py`):
rows of wave k+1 after wave k's, a wave's Kubernetes rows done only once their
replicas are ready.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from broker.app import Broker
from broker.core.placement import Placement
from broker.db.dispatch_models import DispatchRow, OutboxRow, ReplanRow
from broker.db.session import transaction
from broker.dispatch.base import ApplyFailed, Dispatcher
from broker.dispatch.clusters import GITOPS, KUBERNETES, Cluster, list_clusters
from broker.dispatch.documents import DispatchIn
from broker.dispatch.gitops import GitOpsDispatcher
from broker.dispatch.kube import KubernetesDispatcher
from broker.dispatch.manifests import ClusterBundle, Target, build_bundles, dns_label, total_replicas
from broker.dispatch.migration import MigrationPlan, plan_migration, resolve_max_unavailable, slots_from_assignments
from broker.dispatch.policy import TargetPolicy
from broker.dispatch.schema import check_bundles
from broker.dispatch.wave_bundles import intermediate_waves
from broker.errors import NotFound
from broker.ids import new_dispatch_id
from broker.placements.store import PlacementStore

PENDING, APPLYING, APPLIED, FAILED, DONE = "pending", "applying", "applied", "failed", "done"


def fingerprint(bundles: list[ClusterBundle], previous: str = "") -> str:
    """Idempotency key: the exact manifests per cluster and the dispatch they follow."""
    raw = json.dumps([previous, [b.to_json() for b in bundles]], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


class DispatchService:
    def __init__(self, broker: Broker, *, dispatchers: Mapping[str, Dispatcher] | None = None) -> None:
        self.broker = broker
        cfg = broker.settings
        self.policy = TargetPolicy.from_settings(cfg)
        self.dispatchers: Mapping[str, Dispatcher] = dispatchers or {
            KUBERNETES: KubernetesDispatcher(
                self.policy,
                timeout_s=cfg.dispatch_timeout_s,
                retries=cfg.dispatch_retries,
                ready_wait_s=cfg.dispatch_ready_wait_s,
            ),
            GITOPS: GitOpsDispatcher(self.policy, timeout_s=cfg.gitops_timeout_s),
        }

    # ---- planning (no writes) ---------------------------------------------------------

    def _placement(self, placement_id: str, tenant: str) -> Placement:
        return PlacementStore(self.broker.sessions).get(placement_id, tenant=tenant)

    def plan(self, placement_id: str, doc: DispatchIn, *, tenant: str = "default") -> list[ClusterBundle]:
        """The bundles a dispatch would apply, validated; nothing is written."""
        return self._plan(placement_id, doc, tenant)[0]

    def _plan(self, placement_id: str, doc: DispatchIn, tenant: str) -> tuple[list[ClusterBundle], str]:
        bundles, previous, _ = self._plan_waves(placement_id, doc, tenant)
        return bundles, previous

    def _plan_waves(
        self, placement_id: str, doc: DispatchIn, tenant: str
    ) -> tuple[list[ClusterBundle], str, list[list[ClusterBundle]]]:
        """The final bundles, the previous dispatch of the app, and the migration's waves before the last."""
        placement = self._placement(placement_id, tenant)
        clusters = {c.name: c for c in list_clusters(self.broker.sessions, tenant=tenant)}
        targets: dict[str, list[Target]] = {}
        for c in clusters.values():
            targets.setdefault(c.site, []).append(c.target())
        table = self.broker.catalog().table
        pools = {a.pool for a in placement.result.assignments}
        pool_arch = {p: table.pools[table.pool_index[p]].arch.value for p in pools if p in table.pool_index}
        render: dict[str, Any] = {"templates": doc.templates, "images": doc.images}
        bundles = build_bundles(placement, targets, pool_arch=pool_arch, **render)
        check_bundles(bundles)
        leavers, previous = self._leavers(placement, bundles, clusters, tenant)
        waves: list[list[ClusterBundle]] = []
        before = self._previous_placement(previous, tenant)
        if before is not None:
            old_pools = {a.pool for a in before.result.assignments}
            pool_arch.update(
                {p: table.pools[table.pool_index[p]].arch.value for p in old_pools if p in table.pool_index}
            )
            plan = self._migration(before, placement)
            waves = intermediate_waves(before, placement, plan, targets, pool_arch=pool_arch, **render)
            for wave in waves:
                check_bundles(wave)
        return bundles + leavers, previous, waves

    def _previous_placement(self, dispatch_id: str, tenant: str) -> Placement | None:
        if not dispatch_id:
            return None
        with self.broker.sessions() as s:
            pid = s.scalar(select(DispatchRow.placement_id).where(DispatchRow.id == dispatch_id))
        try:
            return self._placement(str(pid), tenant) if pid else None
        except NotFound:  # the previous placement is gone: apply the target state at once
            return None

    def _migration(self, old: Placement, new: Placement) -> MigrationPlan:
        """The migration plan the replan showed (its budget and failed sites), or one with defaults."""
        with self.broker.sessions() as s:
            replan = s.scalars(
                select(ReplanRow)
                .where(ReplanRow.from_placement == old.id, ReplanRow.to_placement == new.id)
                .order_by(ReplanRow.created_at.desc())
                .limit(1)
            ).first()
            shown = dict(replan.document) if replan is not None else {}
        budget = int(shown.get("migration", {}).get("disruption_budget", 10))
        workloads = new.request.get("workloads", [])
        return plan_migration(
            slots_from_assignments(old.result.assignments),
            slots_from_assignments(new.result.assignments),
            depends_on={w["name"]: [d["workload"] for d in w.get("depends_on", [])] for w in workloads},
            disruption_budget=budget,
            max_unavailable={
                w["name"]: resolve_max_unavailable(w.get("max_unavailable"), int(w["replicas"]), budget)
                for w in workloads
            },
            failed_sites=shown.get("excluded_sites", ()),
            with_rollback=False,
        )

    def _leavers(
        self, placement: Placement, bundles: list[ClusterBundle], clusters: Mapping[str, Cluster], tenant: str
    ) -> tuple[list[ClusterBundle], str]:
        """Empty bundles for clusters that ran this app under another placement but get nothing now.

        Also returns the id of that previous dispatch: it is part of the idempotency key,
        so re-dispatching a placement after another one of the app ran applies it again.
        """
        app = dns_label(placement.name)
        with self.broker.sessions() as s:
            last = s.scalars(
                select(DispatchRow)
                .where(DispatchRow.tenant == tenant, DispatchRow.app == app, DispatchRow.placement_id != placement.id)
                .order_by(DispatchRow.created_at.desc())
                .limit(1)
            ).first()
            if last is None:
                return [], ""
            previous = s.scalars(select(OutboxRow).where(OutboxRow.dispatch_id == last.id)).all()
            had = {o.cluster: o.payload for o in previous if o.payload.get("manifests")}
        now = {b.cluster for b in bundles}
        leavers = [
            ClusterBundle(name, str(payload["namespace"]), app, str(placement.id), ())
            for name, payload in sorted(had.items())
            if name not in now and name in clusters
        ]
        return leavers, last.id

    # ---- dispatching ------------------------------------------------------------------

    def dispatch(self, placement_id: str, doc: DispatchIn, *, tenant: str = "default") -> dict[str, Any]:
        bundles, previous, waves = self._plan_waves(placement_id, doc, tenant)
        if doc.dry_run:
            out = {
                "placement_id": placement_id,
                "dry_run": True,
                "state": "planned",
                "replicas": total_replicas(bundles),
                "clusters": [b.to_json() for b in bundles],
            }
            if waves:
                out["waves"] = [
                    {"wave": k, "clusters": [b.to_json() for b in wave]} for k, wave in enumerate(waves, start=1)
                ]
            return out
        dispatch_id = self._record(placement_id, bundles, tenant, previous, waves)
        return self.run(dispatch_id)

    def _record(
        self,
        placement_id: str,
        bundles: list[ClusterBundle],
        tenant: str,
        previous: str,
        waves: list[list[ClusterBundle]] | None = None,
    ) -> str:
        waves = waves or []
        key = previous + "".join(f"|wave:{len(w)}" for w in waves)
        fp = fingerprint([b for w in waves for b in w] + bundles, key) if waves else fingerprint(bundles, previous)
        existing = self._find(placement_id, fp)
        if existing is not None:
            return existing
        did = new_dispatch_id()
        # a migration's waves first, in order, each waiting for its new replicas to be ready;
        # then clusters that gain replicas, and clusters that only lose replicas last
        rows = [(b, {"wave": k, "await_ready": True}) for k, wave in enumerate(waves, start=1) for b in wave]
        last = {"wave": len(waves) + 1} if waves else {}
        rows += [(b, last) for b in sorted(bundles, key=lambda b: (not b.manifests, b.cluster))]
        try:
            with transaction(self.broker.sessions) as s:
                s.add(
                    DispatchRow(
                        id=did,
                        tenant=tenant,
                        placement_id=placement_id,
                        app=bundles[0].app if bundles else "",
                        fingerprint=fp,
                        state=PENDING,
                        created_at=_now(),
                        updated_at=_now(),
                    )
                )
                s.flush()  # the parent row first: the outbox rows reference it
                for seq, (b, extra) in enumerate(rows):
                    s.add(
                        OutboxRow(
                            dispatch_id=did,
                            seq=seq,
                            cluster=b.cluster,
                            state=PENDING,
                            attempts=0,
                            payload={**b.to_json(), **extra},
                            updated_at=_now(),
                        )
                    )
        except IntegrityError:  # a concurrent dispatch of the same placement recorded it first
            found = self._find(placement_id, fp)
            if found is None:
                raise
            return found
        return did

    def _find(self, placement_id: str, fp: str) -> str | None:
        with self.broker.sessions() as s:
            return s.scalar(
                select(DispatchRow.id).where(DispatchRow.placement_id == placement_id, DispatchRow.fingerprint == fp)
            )

    def run(self, dispatch_id: str) -> dict[str, Any]:
        """Apply the outbox rows not done yet, in order; stop at the first failure."""
        with transaction(self.broker.sessions) as s:
            d = s.get(DispatchRow, dispatch_id)
            if d is None:
                raise NotFound(f"dispatch {dispatch_id!r} does not exist")
            if d.state == APPLIED:
                return self._document(dispatch_id)
            tenant = d.tenant
            d.state, d.error, d.updated_at = APPLYING, None, _now()
            todo = [
                (o.id, o.cluster, o.payload)
                for o in s.scalars(
                    select(OutboxRow).where(OutboxRow.dispatch_id == dispatch_id).order_by(OutboxRow.seq)
                )
                if o.state != DONE
            ]
        clusters = {c.name: c for c in list_clusters(self.broker.sessions, tenant=tenant)}
        for item_id, cluster_name, payload in todo:
            self._mark(item_id, APPLYING)
            try:
                cluster = clusters.get(cluster_name)
                if cluster is None:
                    raise ApplyFailed(cluster_name, "is no longer registered")
                result = self._apply(cluster, payload)
            except ApplyFailed as exc:
                self._mark(item_id, FAILED, error=exc.detail)
                self._finish(dispatch_id, FAILED, exc.detail)
                return self._document(dispatch_id)
            self._mark(item_id, DONE, result=result)
        self._finish(dispatch_id, APPLIED, None)
        return self._document(dispatch_id)

    def _apply(self, cluster: Cluster, payload: dict[str, Any]) -> dict[str, Any]:
        """Apply one outbox row; a migration wave's row is done only once its replicas are ready."""
        bundle = ClusterBundle.from_json(payload)
        dispatcher = self.dispatchers[cluster.kind]
        if not payload.get("await_ready") or cluster.kind != KUBERNETES:
            return dispatcher.apply(cluster, bundle)  # a GitOps wave is done once committed (Argo/Flux sync it)
        wait = self.broker.settings.dispatch_wave_ready_wait_s
        result = dispatcher.apply(cluster, bundle, ready_wait_s=wait)  # type: ignore[call-arg]
        ready, want = result.get("ready_replicas") or {}, bundle.replicas()
        short = {n: f"{ready.get(n, 0)}/{k}" for n, k in want.items() if ready.get(n, 0) < k}
        if short:
            raise ApplyFailed(
                cluster.name,
                f"wave {payload['wave']}: replicas not ready after {wait:g} s ({short}); "
                "the next wave waits for them (dispatch again to resume)",
                retryable=True,
            )
        return result

    def _mark(
        self, item_id: int, state: str, *, error: str | None = None, result: dict[str, Any] | None = None
    ) -> None:
        with transaction(self.broker.sessions) as s:
            o = s.get(OutboxRow, item_id)
            assert o is not None  # rows are never deleted while their dispatch exists
            o.state, o.error, o.updated_at = state, error, _now()
            if state == APPLYING:
                o.attempts += 1
            if result is not None:
                o.result = result

    def _finish(self, dispatch_id: str, state: str, error: str | None) -> None:
        with transaction(self.broker.sessions) as s:
            d = s.get(DispatchRow, dispatch_id)
            assert d is not None
            d.state, d.error, d.updated_at = state, error, _now()

    def resume_unfinished(self, *, tenant: str | None = None) -> list[dict[str, Any]]:
        """Run every dispatch left pending or applying (after a crash); for a worker or start-up."""
        with self.broker.sessions() as s:
            q = select(DispatchRow.id).where(DispatchRow.state.in_([PENDING, APPLYING]))
            if tenant is not None:
                q = q.where(DispatchRow.tenant == tenant)
            ids = list(s.scalars(q.order_by(DispatchRow.created_at)))
        return [self.run(i) for i in ids]

    # ---- reading ----------------------------------------------------------------------

    def _document(self, dispatch_id: str) -> dict[str, Any]:
        with self.broker.sessions() as s:
            d = s.get(DispatchRow, dispatch_id)
            if d is None:
                raise NotFound(f"dispatch {dispatch_id!r} does not exist")
            items = s.scalars(
                select(OutboxRow).where(OutboxRow.dispatch_id == dispatch_id).order_by(OutboxRow.seq)
            ).all()
            waves = [o for o in items if o.payload.get("await_ready")]
            items = [o for o in items if not o.payload.get("await_ready")]
            bundles = [ClusterBundle.from_json(o.payload) for o in items]
            extra = {"waves": _wave_rows(waves)} if waves else {}
            return {
                "id": d.id,
                "placement_id": d.placement_id,
                "app": d.app,
                "state": d.state,
                "error": d.error,
                "created_at": d.created_at.isoformat(),
                "updated_at": d.updated_at.isoformat(),
                "replicas": total_replicas(bundles),
                "clusters": [
                    {
                        "cluster": o.cluster,
                        "namespace": o.payload.get("namespace"),
                        **_cluster_state(o, [w for w in waves if w.cluster == o.cluster]),
                        "replicas": b.replicas(),
                        "result": o.result,
                    }
                    for o, b in zip(items, bundles, strict=True)
                ],
                **extra,
            }

    def get(self, dispatch_id: str, *, tenant: str = "default") -> dict[str, Any]:
        doc = self._document(dispatch_id)
        if self._placement_tenant(doc["placement_id"]) != tenant:
            raise NotFound(f"dispatch {dispatch_id!r} does not exist")
        return doc

    def _placement_tenant(self, placement_id: str) -> str | None:
        return PlacementStore(self.broker.sessions).tenant_of(placement_id)

    def latest(self, placement_id: str, *, tenant: str = "default") -> dict[str, Any]:
        if self._placement_tenant(placement_id) != tenant:
            raise NotFound(f"placement {placement_id!r} does not exist")
        with self.broker.sessions() as s:
            did = s.scalar(
                select(DispatchRow.id)
                .where(DispatchRow.placement_id == placement_id)
                .order_by(DispatchRow.created_at.desc())
                .limit(1)
            )
        if did is None:
            raise NotFound(f"placement {placement_id!r} has not been dispatched")
        return self._document(did)


def _wave_rows(rows: list[OutboxRow]) -> list[dict[str, Any]]:
    """A migration's waves before the last: each wave's clusters, their state and replicas."""
    out: dict[int, list[dict[str, Any]]] = {}
    for o in rows:
        out.setdefault(int(o.payload["wave"]), []).append(
            {
                "cluster": o.cluster,
                "state": o.state,
                "attempts": o.attempts,
                "error": o.error,
                "replicas": ClusterBundle.from_json(o.payload).replicas(),
            }
        )
    return [{"wave": k, "clusters": cs} for k, cs in sorted(out.items())]


def _cluster_state(final: OutboxRow, earlier: list[OutboxRow]) -> dict[str, Any]:
    """A cluster's state over its rows: a wave that failed or is applying speaks for the cluster."""
    attempts = final.attempts + sum(o.attempts for o in earlier)
    for o in earlier:
        if o.state in (FAILED, APPLYING):
            return {"state": o.state, "attempts": attempts, "error": o.error}
    return {"state": final.state, "attempts": attempts, "error": final.error}
