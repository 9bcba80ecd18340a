"""Requirements filter pools exactly as the documented semantics say: table-driven per operator and key."""

from __future__ import annotations

import numpy as np
import pytest

from broker.core.domain import Arch, CapacityType, Pool, Site, SiteKind
from broker.core.instance_attributes import InstanceFacts
from broker.core.pooltable import PoolTable, build_pool_table
from broker.core.requirements import Requirement

SITES = [
    Site("aws:us-east-1", "aws", SiteKind.PUBLIC, "us-east-1", "US", ("US",), 38.9, -77.0),
    Site("azure:eastus", "azure", SiteKind.PUBLIC, "eastus", "US", ("US",), 37.4, -79.0),
    Site("gcp:us-central1", "gcp", SiteKind.PUBLIC, "us-central1", "US", ("US",), 41.2, -95.8),
    Site("private:fra-dc1", "private", SiteKind.PRIVATE, "fra-dc1", "DE", ("EU", "EEA", "DE"), 50.1, 8.7),
    Site("aws:us-east-1-bos-1", "aws", SiteKind.PUBLIC, "us-east-1-bos-1", "US", ("US",), 42.4, -71.1),
]
OD, SPOT, RES = CapacityType.ONDEMAND, CapacityType.SPOT, CapacityType.RESERVED
# site, type, capacity, arch, vcpus, GiB, gpus, gpu model
SPECS = [
    ("aws:us-east-1", "m7i.large", OD, Arch.AMD64, 2, 8, 0, None),  # 0
    ("aws:us-east-1", "m7a.large", SPOT, Arch.AMD64, 2, 8, 0, None),  # 1
    ("aws:us-east-1", "m6i.large", OD, Arch.AMD64, 2, 8, 0, None),  # 2
    ("aws:us-east-1", "c7g.xlarge", OD, Arch.ARM64, 4, 8, 0, None),  # 3
    ("aws:us-east-1", "g5.xlarge", OD, Arch.AMD64, 4, 16, 1, "NVIDIA A10G"),  # 4
    ("azure:eastus", "Standard_NC24ads_A100_v4", OD, Arch.AMD64, 24, 220, 1, "A100-80GB"),  # 5
    ("gcp:us-central1", "n2-standard-8", RES, Arch.AMD64, 8, 32, 0, None),  # 6
    ("private:fra-dc1", "r740", RES, Arch.AMD64, 48, 384, 0, None),  # 7
    ("aws:us-east-1-bos-1", "m5.metal", OD, Arch.AMD64, 96, 384, 0, None),  # 8
]
FACTS = {
    ("aws", "m7i.large"): InstanceFacts("Intel Xeon Scalable (Sapphire Rapids)", None, False),
    ("aws", "m7a.large"): InstanceFacts("AMD EPYC 9R14 Processor", None, False),
    ("aws", "c7g.xlarge"): InstanceFacts("AWS Graviton3 Processor", None, False),
    ("aws", "g5.xlarge"): InstanceFacts("AMD EPYC 7R32", 24.0, False),
    ("aws", "m5.metal"): InstanceFacts("Intel Xeon Platinum 8175", None, True),
}


def table() -> PoolTable:
    pools = [
        Pool(Pool.make_id(s, it, c), s, it, c, a, v, m, g, gm, 1.0, None, "t", "2026-01-01")
        for s, it, c, a, v, m, g, gm in SPECS
    ]
    return build_pool_table(SITES, pools, FACTS)


ALL = set(range(len(SPECS)))
CASES = [
    # key, operator, values, pools that meet it
    ("provider", "In", ["aws"], {0, 1, 2, 3, 4, 8}),
    ("provider", "NotIn", ["aws", "azure"], {6, 7}),
    ("topology.kubernetes.io/region", "In", ["eastus", "us-central1"], {5, 6}),
    ("site", "In", ["aws:us-east-1-bos-1"], {8}),
    ("site_kind", "In", ["private", "edge"], {7}),  # an AWS Local Zone is public
    ("site-kind", "NotIn", ["public"], {7}),
    ("node.kubernetes.io/instance-type", "In", ["m7i.large", "standard_nc24ads_a100_v4"], {0, 5}),  # any case
    ("karpenter.k8s.aws/instance-family", "In", ["m7i", "m7a"], {0, 1}),
    ("instance-family", "NotIn", ["m7i", "m7a"], ALL - {0, 1}),  # r740 has no family: NotIn holds
    ("instance_family", "Exists", [], ALL - {7}),
    ("instance_family", "DoesNotExist", [], {7}),
    ("karpenter.k8s.aws/instance-category", "In", ["m"], {0, 1, 2, 8}),
    ("karpenter.k8s.aws/instance-generation", "Gt", ["5"], {0, 1, 2, 3}),  # g5 is 5: not greater
    ("instance-generation", "Lt", ["5"], {5, 6}),
    ("instance_generation", "In", ["7", "2"], {0, 1, 3, 6}),
    ("instance_generation", "DoesNotExist", [], {7}),
    ("karpenter.k8s.aws/instance-size", "In", ["large"], {0, 1, 2}),
    ("instance_size", "In", ["metal"], {8}),
    ("karpenter.k8s.aws/instance-cpu-manufacturer", "In", ["amd"], {1, 4, 5}),
    ("cpu_manufacturer", "NotIn", ["intel"], {1, 3, 4, 5, 7}),
    ("processor", "In", ["aws graviton3 processor"], {3}),
    ("processor", "Exists", [], {0, 1, 3, 4, 8}),
    ("kubernetes.io/arch", "In", ["arm64"], {3}),
    ("arch", "NotIn", ["arm64"], ALL - {3}),
    ("karpenter.k8s.aws/instance-cpu", "Gt", ["8"], {5, 7, 8}),
    ("vcpus", "In", ["4", "8"], {3, 4, 6}),
    ("vcpus", "Lt", ["2.5"], {0, 1, 2}),
    ("karpenter.k8s.aws/instance-memory", "In", ["16384"], {4}),  # MiB
    ("memory_gib", "Gt", ["200"], {5, 7, 8}),
    ("karpenter.k8s.aws/instance-gpu-name", "In", ["a10g", "a100"], {4, 5}),
    ("gpu_name", "DoesNotExist", [], ALL - {4, 5}),
    ("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"], {4, 5}),
    ("gpus", "Lt", ["1"], set()),  # no GPU: the label is absent, Lt does not hold (Karpenter)
    ("karpenter.k8s.aws/instance-gpu-memory", "Gt", ["32768"], {5}),  # MiB per GPU
    ("gpu_memory_gib", "In", ["24"], {4}),
    ("bare_metal", "In", ["true"], {8}),
    ("bare-metal", "In", ["false"], {0, 1, 2, 3, 4, 5, 6}),  # private: unknown
    ("bare_metal", "DoesNotExist", [], {7}),
    ("karpenter.sh/capacity-type", "In", ["on-demand"], {0, 2, 3, 4, 5, 8}),
    ("capacity_type", "In", ["spot", "reserved"], {1, 6, 7}),
    ("capacity_type", "NotIn", ["ondemand"], {1, 6, 7}),
    ("burstable", "In", ["true"], set()),  # none of these is burstable (tests/unit/core/test_node_classes.py)
    ("cpu_baseline_percent", "In", ["100"], ALL),  # a node that is not burstable sustains every vCPU
    ("node_class", "In", ["accelerated"], {4, 5}),  # g5 (AWS G and VT group), NC A100
    ("node_class", "In", ["general"], {0, 1, 2, 3, 6, 7, 8}),
    ("quota_group", "In", ["aws:Standard"], {0, 1, 2, 3, 8}),
    ("quota_group", "In", ["aws:G and VT", "azure:ncadsv4"], {4, 5}),
]


@pytest.mark.parametrize(("key", "operator", "values", "expected"), CASES, ids=lambda x: str(x))
def test_requirement_meets_exactly_the_documented_pools(
    key: str, operator: str, values: list[str], expected: set[int]
) -> None:
    mask = table().attributes.mask(Requirement.parse(key, operator, values))
    assert set(np.flatnonzero(mask).tolist()) == expected


def test_every_operator_and_every_attribute_is_covered() -> None:
    from broker.core.requirements import ATTRIBUTES, Operator, resolve_key

    assert {op for _, op, _, _ in CASES} == {o.value for o in Operator}
    assert {resolve_key(k)[0] for k, _, _, _ in CASES} == set(ATTRIBUTES)


def test_pool_lists_its_known_attributes() -> None:
    t = table()
    assert t.attributes.of(4) == {
        "provider": "aws",
        "region": "us-east-1",
        "site": "aws:us-east-1",
        "site_kind": "public",
        "instance_type": "g5.xlarge",
        "instance_category": "g",
        "instance_family": "g5",
        "instance_generation": 5,
        "instance_size": "xlarge",
        "cpu_manufacturer": "amd",
        "processor": "AMD EPYC 7R32",
        "arch": "amd64",
        "vcpus": 4,
        "memory_gib": 16,
        "gpu_name": "a10g",
        "gpus": 1,
        "gpu_memory_gib": 24,
        "bare_metal": False,
        "capacity_type": "ondemand",
        "burstable": False,
        "cpu_baseline_percent": 100,
        "node_class": "accelerated",
        "quota_group": "aws:G and VT",
    }
    assert set(t.attributes.of(7)) == {
        "provider", "region", "site", "site_kind", "instance_type", "arch", "vcpus", "memory_gib", "capacity_type",
        "burstable", "cpu_baseline_percent", "node_class",  # owned capacity has no provider quota group
    }  # fmt: skip


def test_compact_and_replaced_tables_keep_the_attributes_of_their_pools() -> None:
    import dataclasses

    t = table()
    capped = dataclasses.replace(t, max_nodes=np.zeros(t.n_pools))
    assert capped.attributes is t.attributes  # per-request copies share the columns
    compact = t.compact()
    req = Requirement.parse("instance-family", "In", ["m7i"])
    kept = {compact.pools[i].id for i in np.flatnonzero(compact.attributes.mask(req))}
    assert kept == {p.id for p, ok in zip(t.pools, t.attributes.mask(req), strict=True) if ok} & set(compact.pool_index)
