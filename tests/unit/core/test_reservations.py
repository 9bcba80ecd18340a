"""The managed services' published reservation formulas, against examples computed by hand
from each provider's documentation (docs/solver-requirements.md, "Allocatable capacity")."""

from __future__ import annotations

import numpy as np
import pytest

from broker.core.reservations import (
    EVICTION_HARD_MEMORY_GIB,
    MIB,
    aks_cpu_reserved,
    aks_memory_reserved_gib,
    banded_cpu_reserved,
    eks_max_pods,
    eks_memory_reserved_gib,
    gke_memory_reserved_gib,
    reserved,
)


@pytest.mark.parametrize(
    ("vcpus", "expected"),
    [
        (1, 0.060),  # 6 % of the first core
        (2, 0.070),  # + 1 % of the second
        (4, 0.080),  # + 0.5 % of the third and fourth
        (8, 0.090),  # + 0.25 % of every core above four
        (96, 0.080 + 92 * 0.0025),
    ],
)
def test_eks_and_gke_cpu_bands(vcpus: float, expected: float) -> None:
    assert banded_cpu_reserved(np.array([vcpus], dtype=float))[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("gib", "expected"),
    [
        (0.6, 255 * MIB),  # f1-micro: below 1 GiB a flat 255 MiB
        (1.0, 0.25),  # 25 % of the first 4 GiB
        (4.0, 1.0),
        (16.0, 1.0 + 0.8 + 0.8),  # e2-standard-4: 25 % of 4 + 20 % of 4 + 10 % of 8
        (128.0, 1.0 + 0.8 + 0.8 + 0.06 * 112),
        (256.0, 1.0 + 0.8 + 0.8 + 0.06 * 112 + 0.02 * 128),
    ],
)
def test_gke_memory_bands(gib: float, expected: float) -> None:
    assert gke_memory_reserved_gib(np.array([gib]))[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("instance_type", "pods"),
    [
        ("t3a.nano", 4),
        ("t4g.micro", 4),
        ("t3.small", 11),
        ("t3.medium", 17),
        ("m5.large", 29),
        ("m5.xlarge", 58),
        ("m5.2xlarge", 58),
        ("m5.4xlarge", 234),
        ("m5.12xlarge", 234),
        ("m5.24xlarge", 737),
        ("m5.metal", 737),
        ("m7i.metal-24xl", 737),
        ("u-6tb1.unknownsize", 110),
    ],
)
def test_eks_max_pods_from_the_eni_limits(instance_type: str, pods: int) -> None:
    assert eks_max_pods(instance_type) == pods


def test_eks_memory_is_11_mib_per_pod_plus_255() -> None:
    # m5.large: 29 pods -> 11 * 29 + 255 = 574 MiB
    assert eks_memory_reserved_gib(np.array([29.0]))[0] == pytest.approx(574 * MIB)


@pytest.mark.parametrize(
    ("cores", "millicores"),
    [(1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740), (96, 1060), (3, 120)],
)
def test_aks_cpu_table(cores: float, millicores: float) -> None:
    assert aks_cpu_reserved(np.array([cores], dtype=float))[0] * 1000 == pytest.approx(millicores)


def test_aks_memory_published_examples() -> None:
    # "8 GB of memory and up to 30 pods: 20 MB * 30 + 50 MB = 650 MB"
    assert aks_memory_reserved_gib(np.array([8.0]), max_pods=30)[0] == pytest.approx(650 * MIB)
    # "4 GB and up to 70 pods: 25 % * 4 GB = 1000 MB, less than 20 MB * 70 + 50 MB = 1450 MB"
    assert aks_memory_reserved_gib(np.array([4.0]), max_pods=70)[0] == pytest.approx(1.0)


def test_reserved_per_provider_includes_the_eviction_threshold() -> None:
    cpu, mem = reserved(
        ["aws", "gcp", "azure", "private", "edge"],
        ["m5.large", "e2-standard-4", "Standard_D2s_v5", "r740", "nuc"],
        np.array([2.0, 4.0, 2.0, 4.0, 4.0]),
        np.array([8.0, 16.0, 8.0, 16.0, 16.0]),
    )
    assert cpu.tolist() == pytest.approx([0.07, 0.08, 0.10, 0.08, 0.08])
    evict = EVICTION_HARD_MEMORY_GIB
    assert mem.tolist() == pytest.approx(
        [574 * MIB + evict, 2.6 + evict, min(2250 * MIB, 2.0) + evict, 2.6 + evict, 2.6 + evict]
    )
