"""Prometheus Alertmanager webhook -> replans.

Alertmanager posts its webhook payload (version 4): `{"version": "4", "status",
"receiver", "groupLabels", "commonLabels", "alerts": [{"status", "labels",
"annotations", "startsAt", "endsAt", "fingerprint", ...}]}`. A firing alert
is a trigger when its `broker_action` label says so (`site_down` or
`node_overload`) or its alertname is a well-known one below; it names the site
by a `site` label, or by a `cluster` label of a registered cluster.

Site down: every placement running there is replanned without the site.
Node overload: the workloads running there get more replicas (demand outgrew
the plan; `replica_increase_pct` annotation, default 25 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SITE_DOWN, NODE_OVERLOAD = "site_down", "node_overload"
SITE_DOWN_ALERTS = frozenset({"SiteDown", "ClusterDown", "ClusterUnreachable", "KubeAPIDown"})
NODE_OVERLOAD_ALERTS = frozenset(
    {"NodeOverload", "NodeCPUOverload", "NodeMemoryPressure", "KubeNodeOverloaded", "NodeHighCPUUsage"}
)
DEFAULT_INCREASE_PCT = 25.0


class AlertIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # Alertmanager adds fields across versions
    status: str = "firing"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    fingerprint: str | None = None


class AlertmanagerWebhook(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: str = "4"
    status: str = "firing"
    receiver: str = ""
    alerts: list[AlertIn] = Field(default_factory=list, max_length=10_000)


@dataclass(frozen=True, slots=True)
class Trigger:
    action: str  # site_down | node_overload
    site: str
    alertname: str
    increase_pct: float = DEFAULT_INCREASE_PCT


def classify(alert: AlertIn) -> str | None:
    action = alert.labels.get("broker_action")
    if action in (SITE_DOWN, NODE_OVERLOAD):
        return action
    name = alert.labels.get("alertname", "")
    if name in SITE_DOWN_ALERTS:
        return SITE_DOWN
    if name in NODE_OVERLOAD_ALERTS:
        return NODE_OVERLOAD
    return None


def triggers(
    payload: AlertmanagerWebhook, cluster_sites: Mapping[str, str]
) -> tuple[list[Trigger], list[dict[str, Any]]]:
    """Deduplicated triggers and the alerts ignored, each with the reason."""
    found: dict[tuple[str, str], Trigger] = {}
    ignored: list[dict[str, Any]] = []
    for i, a in enumerate(payload.alerts):
        name = a.labels.get("alertname", "")
        why = None
        action = classify(a)
        site = a.labels.get("site") or cluster_sites.get(a.labels.get("cluster", ""))
        if a.status != "firing":
            why = f"status is {a.status!r}"
        elif action is None:
            why = "not a site-down or node-overload alert"
        elif not site:
            why = "names no site (label site) and no registered cluster (label cluster)"
        if why or action is None or site is None:
            ignored.append({"index": i, "alertname": name, "reason": why})
            continue
        try:
            pct = float(a.annotations.get("replica_increase_pct", DEFAULT_INCREASE_PCT))
        except ValueError:
            pct = DEFAULT_INCREASE_PCT
        key = (action, site)
        if key not in found:
            found[key] = Trigger(action, site, name, max(1.0, min(pct, 1000.0)))
    # a site that is down is not also overloaded: moving away covers both
    down = {t.site for t in found.values() if t.action == SITE_DOWN}
    return [t for t in found.values() if t.action == SITE_DOWN or t.site not in down], ignored
