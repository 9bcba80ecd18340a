"""How large kube-scheduler's extender requests get with full Node objects (nodeCacheCapable: false).

Builds ExtenderArgs for one pod and N nodes shaped as a Karpenter-managed EKS node serialises
(labels, annotations, conditions, addresses, node info, `--images` entries in status.images),
prints the bytes per node, then posts each size to /extender/filter and /extender/prioritize
through the project's test client on a fresh SQLite catalog: status (413 above
BROKER_MAX_BODY_BYTES) and time. docs/kubernetes.md (Request size on big clusters) quotes it.

    python bench/extender_body.py [--nodes 500 2000 5000] [--images 0 10 50]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from broker.app import Broker
from broker.settings import Settings

_CONDITIONS = [
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
]


def node(i: int, images: int) -> dict[str, Any]:
    name = f"ip-10-0-{i // 250}-{i % 250}.eu-central-1.compute.internal"
    karpenter = {
        "instance-category": "m",
        "instance-cpu": "4",
        "instance-family": "m6i",
        "instance-generation": "6",
        "instance-memory": "16384",
        "instance-size": "xlarge",
    }
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "m6i.xlarge",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "eu-central-1",
        "failure-domain.beta.kubernetes.io/zone": "eu-central-1a",
        "k8s.io/cloud-provider-aws": "0123456789abcdef0123456789abcdef",
        **{f"karpenter.k8s.aws/{k}": v for k, v in karpenter.items()},
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6i.xlarge",
        "topology.ebs.csi.aws.com/zone": "eu-central-1a",
        "topology.k8s.aws/zone-id": "euc1-az2",
        "topology.kubernetes.io/region": "eu-central-1",
        "topology.kubernetes.io/zone": "eu-central-1a",
    }
    annotations = {
        "alpha.kubernetes.io/provided-node-ip": "10.0.1.23",
        "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-0123456789abcdef0"}',
        "karpenter.k8s.aws/ec2nodeclass-hash": "1234567890123456789",
        "karpenter.sh/nodepool-hash": "9876543210987654321",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    repo = "123456789012.dkr.ecr.eu-central-1.amazonaws.com/team/service"
    resources = {"ephemeral-storage": "20959212Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "pods": "58"}
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": f"3f2a1c9e-0b7d-4e55-9a1f-{i:012d}",
            "resourceVersion": "123456789",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"providerID": f"aws:///eu-central-1a/i-0{i:016x}"},
        "status": {
            "capacity": {**resources, "cpu": "4", "memory": "15896156Ki"},
            "allocatable": {**resources, "cpu": "3920m", "memory": "14879324Ki"},
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "lastHeartbeatTime": "2025-06-01T12:00:00Z",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                    "reason": reason,
                    "message": message,
                }
                for kind, status, reason, message in _CONDITIONS
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.1.23"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "ec2" + "0" * 29,
                "systemUUID": "ec2" + "0" * 33,
                "bootID": "0" * 36,
                "kernelVersion": "6.1.119-129.201.amzn2023.x86_64",
                "osImage": "Amazon Linux 2023.6.20241212",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.31.3-eks-59bf375",
                "kubeProxyVersion": "v1.31.3-eks-59bf375",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {"names": [f"{repo}-{k}@sha256:{'a' * 64}", f"{repo}-{k}:v1.2.{k}"], "sizeBytes": 123456789}
                for k in range(images)
            ],
        },
    }


def extender_args(nodes: int, images: int) -> bytes:
    pod = {
        "metadata": {
            "name": "api-0",
            "namespace": "shop",
            "annotations": {"placement-broker.dev/pool": "aws:eu-central-1/m6i.xlarge/reserved"},
        },
        "spec": {"containers": [{"name": "api", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]},
    }
    items = [node(i, images) for i in range(nodes)]
    return json.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[500, 2000, 5000])
    ap.add_argument("--images", type=int, nargs="+", default=[0, 10, 50])
    args = ap.parse_args()
    for images in args.images:
        per_node = len(extender_args(1, images)) - len(extender_args(0, images))
        print(f"{images:>3} images: {per_node:,} bytes per node")
    broker = Broker.open(Settings(database_url=f"sqlite:///{tempfile.mkdtemp()}/broker.db"))
    broker.catalog()
    with TestClient(create_app(broker=broker)) as client:
        for images in args.images:
            for nodes in args.nodes:
                body = extender_args(nodes, images)
                for verb in ("filter", "prioritize"):
                    start = time.perf_counter()
                    r = client.post(f"/extender/{verb}", content=body, headers={"Content-Type": "application/json"})
                    ms = (time.perf_counter() - start) * 1000
                    size = f"{len(body) / 1e6:6.2f} MB"
                    print(f"{nodes:>6} nodes {images:>3} images {verb:<10} {size}  {r.status_code}  {ms:.0f} ms")


if __name__ == "__main__":
    main()
