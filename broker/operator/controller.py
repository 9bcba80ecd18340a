"""The PlacementRequest controller: list, then watch from the list's resourceVersion, and reconcile.

Built on the official Kubernetes client the dispatcher already uses (same kubeconfig and TLS
handling, no second framework): a watch resumes from the last resourceVersion it saw; when the API
server answers 410 Gone (that version is compacted away) the controller lists again and resumes
from the new list, so no change is missed and nothing is processed from a stale cache. Reconciling
is level-based (needs_solve compares status.observedGeneration with metadata.generation), and
the controller remembers per object which generation it answered: an event from before the status
write (the finalizer patch's MODIFIED, a relist) carries no status yet, and must not solve (store,
dispatch) that generation again. So seeing an object twice does no harm.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from broker.app import Broker
from broker.core.placement import Placement
from broker.dispatch.documents import DispatchIn
from broker.dispatch.outbox import APPLIED, DispatchService
from broker.errors import BrokerError, Infeasible, InvalidRequest
from broker.operator import reconcile as rc
from broker.operator.apiserver import list_then_watch, watch_objects, write_until_no_conflict

log = logging.getLogger("broker.operator")


class PlacementController:
    def __init__(
        self,
        broker: Broker,
        api: client.ApiClient,
        *,
        namespace: str | None = None,
        tenant_of: Callable[[str], str] = lambda namespace: namespace,
        watch_timeout_s: int = 60,
    ) -> None:
        self.broker = broker
        self.objects = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.tenant_of = tenant_of
        self.watch_timeout_s = watch_timeout_s
        self.relists = 0  # how often a 410 (or a broken watch) made the controller list again
        # uid -> the generation whose answer is in status (events older than that write still arrive)
        self.answered: dict[str, int | None] = {}
        # uid -> (generation, status, event) solved but not written yet (the write failed): the next
        # event writes this answer instead of solving, storing and dispatching the generation again
        self.unwritten: dict[str, tuple[int | None, dict[str, Any], tuple[str, str, str]]] = {}

    # ---- the loop -----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        list_then_watch(stop, resync=self.resync, events=self._events, handle=self.reconcile_safely, log=log)

    def resync(self) -> str:
        """List every PlacementRequest, reconcile each, and return the list's resourceVersion."""
        self.relists += 1
        listed = self._list(rc.REQUESTS)
        self._forget_all_but({obj["metadata"]["uid"] for obj in listed.get("items", [])})
        for obj in listed.get("items", []):
            self.reconcile_safely(obj)
        return str(listed["metadata"]["resourceVersion"])

    def _events(self, resource_version: str, stop: threading.Event) -> Iterator[dict[str, Any]]:
        events = watch_objects(
            self.objects,
            rc.GROUP,
            rc.VERSION,
            rc.REQUESTS,
            namespace=self.namespace,
            resource_version=resource_version,
            timeout_s=self.watch_timeout_s,
            stop=stop,
        )
        for kind, obj in events:
            if kind in ("BOOKMARK", "ADDED", "MODIFIED"):
                yield obj

    # ---- one object ---------------------------------------------------------------------

    def reconcile_safely(self, obj: dict[str, Any]) -> None:
        if obj.get("bookmark"):
            return
        try:
            self.reconcile(obj)
        except ApiException as exc:  # the next event or resync retries; the loop goes on
            log.warning("reconcile of %s failed: %s %s", _key(obj), exc.status, exc.reason)

    def reconcile(self, obj: dict[str, Any]) -> None:
        ns, name, uid = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["metadata"]["uid"]
        if rc.is_deleting(obj):
            self._forget(uid)
            if rc.has_finalizer(obj):
                self._set_finalizers(ns, name, [f for f in obj["metadata"]["finalizers"] if f != rc.FINALIZER])
            return
        if not rc.has_finalizer(obj):
            obj = self._set_finalizers(ns, name, [*(obj["metadata"].get("finalizers") or []), rc.FINALIZER])
        generation = obj["metadata"].get("generation")
        if not rc.needs_solve(obj) or self.answered.get(uid) == generation:
            return
        status, event = self._answer_once(obj, uid, generation)
        written = self._write_status(ns, name, status, generation)  # raises: the answer stays unwritten
        self.unwritten.pop(uid, None)
        if written:
            self.answered[uid] = generation
            self._event(obj, *event)

    def _answer_once(
        self, obj: dict[str, Any], uid: str, generation: int | None
    ) -> tuple[dict[str, Any], tuple[str, str, str]]:
        """The answer for `generation`: solved now, or the one solved before whose status write failed."""
        pending = self.unwritten.get(uid)
        if pending is not None and pending[0] == generation:
            return pending[1], pending[2]
        status, event = self._answer(obj, generation)
        self.unwritten[uid] = (generation, status, event)
        return status, event

    def _forget(self, uid: str) -> None:
        self.answered.pop(uid, None)
        self.unwritten.pop(uid, None)

    def _forget_all_but(self, uids: set[str]) -> None:
        """Drop what is remembered of objects a list no longer holds (deleted while not watched)."""
        for uid in {*self.answered, *self.unwritten} - uids:
            self._forget(uid)

    def _answer(self, obj: dict[str, Any], generation: int | None) -> tuple[dict[str, Any], tuple[str, str, str]]:
        ns = obj["metadata"]["namespace"]
        tenant = self.tenant_of(ns)
        policies = self._list(rc.POLICIES, ns).get("items", [])
        doc, filled = rc.request_document(obj, policies)
        limit = rc.cost_limit(policies)
        try:
            if limit is not None:  # check the cost before anything is stored
                trial, _ = self.broker.place({**doc, "dry_run": True}, tenant=tenant)
                if trial.result.cost_per_hour > limit:
                    msg = (
                        f"placement costs {trial.result.cost_per_hour} USD/h, over the policy's maxCostPerHour {limit}"
                    )
                    return rc.failed_status("Failed", "OverBudget", msg, generation), ("Warning", "OverBudget", msg)
            answer, _ = self.broker.place(doc, tenant=tenant)
        except InvalidRequest as exc:
            msg = rc.invalid_message(exc.detail, exc.errors, filled=filled)
            reason = "InvalidPolicy" if rc.blames_policy(exc.errors, filled) else "InvalidSpec"
            return rc.failed_status("Invalid", reason, msg, generation), ("Warning", reason, msg)
        except Infeasible as exc:
            msg = "infeasible: " + "; ".join(exc.conflicts)
            return rc.failed_status("Infeasible", "Infeasible", msg, generation), ("Warning", "Infeasible", msg)
        except BrokerError as exc:
            msg = exc.detail
            return rc.failed_status("Failed", type(exc).__name__, msg, generation), ("Warning", "Failed", msg)
        if not (obj.get("spec") or {}).get("dispatch"):
            status = rc.placed_status(answer, generation)
            return status, ("Normal", "Placed", status["message"])
        return self._dispatch(answer, generation, tenant)

    def _dispatch(
        self, answer: Placement, generation: int | None, tenant: str
    ) -> tuple[dict[str, Any], tuple[str, str, str]]:
        """Dispatch the stored placement. A failure is not the spec's: the placement stays in status
        (phase Failed, reason DispatchFailed) and can be dispatched by its id once the cause is fixed."""
        dispatch_id = None
        try:
            done = DispatchService(self.broker).dispatch(str(answer.id), DispatchIn(), tenant=tenant)
        except InvalidRequest as exc:  # e.g. no cluster registered for a chosen site
            failure = rc.invalid_message(exc.detail, exc.errors, root="")
        except BrokerError as exc:
            failure = exc.detail
        else:
            dispatch_id = str(done["id"])
            if done["state"] == APPLIED:
                status = rc.dispatched_status(answer, generation, dispatch_id)
                return status, ("Normal", "Dispatched", status["message"])
            failure = f"dispatch {dispatch_id} {done['state']}: {done.get('error') or 'no error recorded'}"
        status = rc.dispatch_failed_status(answer, generation, failure, dispatch_id)
        return status, ("Warning", "DispatchFailed", status["message"])

    # ---- API calls ----------------------------------------------------------------------

    def _list(self, plural: str, namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or self.namespace
        if ns:
            return _doc(self.objects.list_namespaced_custom_object(rc.GROUP, rc.VERSION, ns, plural))
        return _doc(self.objects.list_cluster_custom_object(rc.GROUP, rc.VERSION, plural))

    def _set_finalizers(self, ns: str, name: str, finalizers: list[str]) -> dict[str, Any]:
        body = {"metadata": {"finalizers": finalizers}}
        return _doc(self.objects.patch_namespaced_custom_object(rc.GROUP, rc.VERSION, ns, rc.REQUESTS, name, body))

    def _write_status(self, ns: str, name: str, status: dict[str, Any], generation: int | None) -> bool:
        """Write the status for `generation` with optimistic concurrency: a 409 means someone wrote
        in between, so read again and retry, unless the spec moved on (the next event answers it)."""
        current = self._get(ns, name)

        def write() -> None:
            body = {**current, "status": status}
            self.objects.replace_namespaced_custom_object_status(rc.GROUP, rc.VERSION, ns, rc.REQUESTS, name, body)

        def reread() -> bool:
            nonlocal current
            current = self._get(ns, name)
            return bool(current["metadata"].get("generation") == generation)

        if current["metadata"].get("generation") != generation:
            return False
        return write_until_no_conflict(write, reread, f"status of {ns}/{name}")

    def _get(self, ns: str, name: str) -> dict[str, Any]:
        return _doc(self.objects.get_namespaced_custom_object(rc.GROUP, rc.VERSION, ns, rc.REQUESTS, name))

    def _event(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        body = rc.event(
            obj,
            api_version=f"{rc.GROUP}/{rc.VERSION}",
            kind="PlacementRequest",
            event_type=kind,
            reason=reason,
            message=message,
            component="placement-broker",
        )
        try:
            self.core.create_namespaced_event(obj["metadata"]["namespace"], body)  # type: ignore[arg-type]
        except ApiException as exc:  # an event is a courtesy: the status already says it
            log.info("event for %s not recorded: %s", _key(obj), exc.status)


def _doc(value: object) -> dict[str, Any]:
    """Custom-object calls answer plain JSON objects; the client types them as `object`."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(value).__name__}")
    return value


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
