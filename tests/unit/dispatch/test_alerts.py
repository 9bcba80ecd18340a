"""Alertmanager webhook payloads -> replan triggers."""

from __future__ import annotations

from typing import Any

import pytest

from broker.dispatch.alerts import NODE_OVERLOAD, SITE_DOWN, AlertIn, AlertmanagerWebhook, classify, triggers


def _payload(*alerts: dict[str, Any]) -> AlertmanagerWebhook:
    # the shape Alertmanager (v0.27) posts to a webhook receiver
    return AlertmanagerWebhook.model_validate(
        {
            "version": "4",
            "groupKey": '{}:{alertname="SiteDown"}',
            "truncatedAlerts": 0,
            "status": "firing",
            "receiver": "placement-broker",
            "groupLabels": {},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "alerts": [
                {
                    "status": a.get("status", "firing"),
                    "labels": a["labels"],
                    "annotations": a.get("annotations", {}),
                    "startsAt": "2026-12-02T10:00:00Z",
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus:9090/graph",
                    "fingerprint": "c2f3a9b1d0e4f5a6",
                }
                for a in alerts
            ],
        }
    )


@pytest.mark.parametrize(
    ("labels", "action"),
    [
        ({"alertname": "SiteDown"}, SITE_DOWN),
        ({"alertname": "KubeAPIDown"}, SITE_DOWN),
        ({"alertname": "NodeOverload"}, NODE_OVERLOAD),
        ({"alertname": "Custom", "broker_action": "node_overload"}, NODE_OVERLOAD),
        ({"alertname": "Watchdog"}, None),
        ({"alertname": "Custom", "broker_action": "reboot"}, None),
    ],
)
def test_classify(labels: dict[str, str], action: str | None) -> None:
    assert classify(AlertIn(labels=labels)) == action


def test_triggers_dedupe_map_clusters_and_explain_what_is_ignored() -> None:
    payload = _payload(
        {"labels": {"alertname": "SiteDown", "site": "aws:eu-west-3"}},
        {"labels": {"alertname": "ClusterDown", "cluster": "par-1"}},  # same site via the registry
        {"labels": {"alertname": "NodeOverload", "site": "aws:eu-west-3"}},  # site is down anyway
        {"labels": {"alertname": "NodeOverload", "cluster": "mil-1"}, "annotations": {"replica_increase_pct": "50"}},
        {"labels": {"alertname": "NodeOverload", "site": "gcp:x"}, "status": "resolved"},
        {"labels": {"alertname": "NodeOverload", "cluster": "unknown"}},
        {"labels": {"alertname": "Watchdog"}},
    )
    found, ignored = triggers(payload, {"par-1": "aws:eu-west-3", "mil-1": "aws:eu-south-1"})
    assert [(t.action, t.site, t.increase_pct) for t in found] == [
        (SITE_DOWN, "aws:eu-west-3", 25.0),
        (NODE_OVERLOAD, "aws:eu-south-1", 50.0),
    ]
    assert [i["index"] for i in ignored] == [4, 5, 6]
    assert "resolved" in ignored[0]["reason"] and "no site" in ignored[1]["reason"]
