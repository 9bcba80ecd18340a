"""How the PlacementRequest controller and the Kueue dispatcher talk to the API server.

List, then watch: Kubernetes' informer pattern without a second framework. A watch resumes
from the last resourceVersion it saw; when the API server answers 410 Gone (or the watch
breaks), the loop lists everything again, so no change is missed. Writes use optimistic
concurrency: a 409 Conflict means someone wrote in between, so read again and retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

NOT_FOUND, CONFLICT, GONE = 404, 409, 410
WRITE_RETRIES = 5


def list_then_watch(
    stop: threading.Event,
    *,
    resync: Callable[[], str],
    events: Callable[[str, threading.Event], Iterator[dict[str, Any]]],
    handle: Callable[[dict[str, Any]], None],
    after_watch: Callable[[], None] | None = None,
    log: logging.Logger,
) -> None:
    """Until `stop`: `resync()` lists and returns the list's version; each object of `events` from
    that version goes to `handle`; `after_watch` runs when a watch ends without error."""
    resource_version = resync()
    while not stop.is_set():
        try:
            for obj in events(resource_version, stop):
                resource_version = obj["metadata"]["resourceVersion"]
                handle(obj)
            if after_watch is not None:
                after_watch()
        except ApiException as exc:
            if exc.status != GONE:
                log.warning("watch failed (%s), listing again", exc.status)
                stop.wait(1.0)
            resource_version = resync()


def watch_objects(
    objects: client.CustomObjectsApi,
    group: str,
    version: str,
    plural: str,
    *,
    namespace: str | None,
    resource_version: str,
    timeout_s: int,
    stop: threading.Event,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event type, object) until the server ends the watch or `stop` is set.

    A BOOKMARK comes as `{"metadata": {"resourceVersion": ...}, "bookmark": True}` so the caller
    can resume from it; an ERROR event (e.g. 410 Gone: the version is too old) is raised as
    ApiException, and the caller lists again.
    """
    w = watch.Watch()  # type: ignore[no-untyped-call]
    kwargs: dict[str, Any] = {
        "resource_version": resource_version,
        "timeout_seconds": timeout_s,
        "allow_watch_bookmarks": True,
    }
    if namespace:
        stream = w.stream(  # type: ignore[no-untyped-call]
            objects.list_namespaced_custom_object, group, version, namespace, plural, **kwargs
        )
    else:
        stream = w.stream(objects.list_cluster_custom_object, group, version, plural, **kwargs)  # type: ignore[no-untyped-call]
    for event in stream:
        if stop.is_set():
            w.stop()  # type: ignore[no-untyped-call]
            return
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            raise ApiException(status=code or 500, reason=str(obj))
        if kind == "BOOKMARK":
            yield kind, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "bookmark": True}
        else:
            yield kind, obj


def write_until_no_conflict(write: Callable[[], None], reread: Callable[[], bool], what: str) -> bool:
    """`write()`; on 409 Conflict `reread()` the object (False: nothing left to write) and write again.

    False when the object is gone (404) or no longer needs the write; ApiException 409 when it
    kept conflicting for WRITE_RETRIES attempts.
    """
    for _ in range(WRITE_RETRIES):
        try:
            write()
            return True
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return False
            if exc.status != CONFLICT:
                raise
        if not reread():
            return False
    raise ApiException(status=CONFLICT, reason=f"{what} kept conflicting")
