"""Kueue's side of the MultiKueue dispatcher tests: the manager cluster's objects, and the status
writes Kueue itself makes (server-side applies under its `kueue-admission` field manager, as
pkg/workload/patching does), against the local API server of kube_crd_fake.py."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from broker.integrations import kueue as kq

V = "v1beta1"
NS = "ml"
APPLY = "application/apply-patch+yaml"
KUEUE_MANAGER = "kueue-admission"
STAMP = "2026-05-01T12:00:00Z"


def condition(kind: str, status: str = "True", reason: str = "Ok", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": STAMP}


def check(state: str, message: str = "") -> dict[str, Any]:
    return {"name": "mk", "state": state, "message": message, "lastTransitionTime": STAMP}


def set_up_multikueue(objects: client.CustomObjectsApi, clusters: dict[str, str | None], version: str = V) -> None:
    """AdmissionCheck `mk` -> MultiKueueConfig `mk-config` -> the clusters (name -> site annotation),
    each connected (condition Active=True, as the MultiKueueCluster controller reports it)."""
    objects.create_cluster_custom_object(
        kq.GROUP,
        version,
        "admissionchecks",
        {
            "apiVersion": f"{kq.GROUP}/{version}",
            "kind": "AdmissionCheck",
            "metadata": {"name": "mk"},
            "spec": {
                "controllerName": kq.MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": kq.GROUP, "kind": "MultiKueueConfig", "name": "mk-config"},
            },
        },
    )
    objects.create_cluster_custom_object(
        kq.GROUP,
        version,
        "multikueueconfigs",
        {
            "apiVersion": f"{kq.GROUP}/{version}",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "mk-config"},
            "spec": {"clusters": sorted(clusters)},
        },
    )
    for name, site in clusters.items():
        kubeconfig = {"location": f"{name}-secret", "locationType": "Secret"}
        meta: dict[str, Any] = {"name": name}
        if site:
            meta["annotations"] = {kq.SITE_ANNOTATION: site}
        objects.create_cluster_custom_object(
            kq.GROUP,
            version,
            "multikueueclusters",
            {
                "apiVersion": f"{kq.GROUP}/{version}",
                "kind": "MultiKueueCluster",
                "metadata": meta,
                # v1beta2 moved the connection under clusterSource
                "spec": {"kubeConfig": kubeconfig}
                if version == "v1beta1"
                else {"clusterSource": {"kubeConfig": kubeconfig}},
            },
        )
        objects.patch_cluster_custom_object_status(
            kq.GROUP,
            version,
            "multikueueclusters",
            name,
            {
                "apiVersion": f"{kq.GROUP}/{version}",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "status": {"conditions": [condition("Active", reason="Active")]},
            },
            field_manager="kueue",
            force=True,
            _content_type=APPLY,
        )


def create_workload(
    objects: client.CustomObjectsApi,
    name: str,
    pods: int = 3,
    cpu: str = "2",
    memory: str = "4Gi",
    version: str = V,
    **annotations: str,
) -> dict[str, Any]:
    """A Job's Workload: pod template annotations end up in its pod set, as Kueue builds it."""
    body = {
        "apiVersion": f"{kq.GROUP}/{version}",
        "kind": "Workload",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/job-uid": name}},
        "spec": {
            "queueName": "team-a",
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "trainer:1",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }
    out: dict[str, Any] = objects.create_namespaced_custom_object(kq.GROUP, version, NS, "workloads", body)
    return out


def kueue_applies(
    objects: client.CustomObjectsApi, name: str, status: dict[str, Any], version: str = V
) -> dict[str, Any]:
    """Kueue's admission status write: a forced server-side apply under `kueue-admission`."""
    out: dict[str, Any] = objects.patch_namespaced_custom_object_status(
        kq.GROUP,
        version,
        NS,
        "workloads",
        name,
        {
            "apiVersion": f"{kq.GROUP}/{version}",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "status": status,
        },
        field_manager=KUEUE_MANAGER,  # Kueue's pkg/constants AdmissionName
        force=True,
        _content_type=APPLY,
    )
    return out


def reserve_quota(
    objects: client.CustomObjectsApi, name: str, *extra: dict[str, Any], version: str = V
) -> dict[str, Any]:
    """Kueue reserved quota in the manager's ClusterQueue; the MultiKueue check waits (Pending)."""
    return kueue_applies(
        objects,
        name,
        {
            "conditions": [condition("QuotaReserved", reason="QuotaReserved"), *extra],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 3}]},
            "admissionChecks": [check("Pending")],
        },
        version,
    )


def get(objects: client.CustomObjectsApi, name: str, version: str = V) -> dict[str, Any]:
    out: dict[str, Any] = objects.get_namespaced_custom_object(kq.GROUP, version, NS, "workloads", name)
    return out


def owned_by(obj: dict[str, Any], manager: str, subresource: str | None = "status") -> dict[str, Any]:
    """The fieldsV1 a manager's Apply entry holds."""
    for e in obj["metadata"].get("managedFields") or []:
        if e["manager"] == manager and e["operation"] == "Apply" and e.get("subresource") == subresource:
            fields: dict[str, Any] = e["fieldsV1"]
            return fields
    return {}
