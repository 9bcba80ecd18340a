"""Family, generation, size and CPU maker from instance-type names; GPU names as Karpenter writes them."""

from __future__ import annotations

import pytest

from broker.core.instance_attributes import InstanceFacts, derive, gpu_memory_from_model, gpu_name


@pytest.mark.parametrize(
    ("provider", "itype", "category", "family", "generation", "size", "vendor", "metal"),
    [
        ("aws", "m7i.2xlarge", "m", "m7i", 7, "2xlarge", "intel", False),
        ("aws", "m7a.large", "m", "m7a", 7, "large", "amd", False),
        ("aws", "c7g.medium", "c", "c7g", 7, "medium", "aws", False),
        ("aws", "c7i-flex.large", "c", "c7i-flex", 7, "large", "intel", False),
        ("aws", "x8i.metal-48xl", "x", "x8i", 8, "metal-48xl", "intel", True),
        ("aws", "u-6tb1.metal", "u", "u-6tb1", None, "metal", None, True),
        ("azure", "Standard_D2as_v5", "d", "dasv5", 5, "2", "amd", False),
        ("azure", "Standard_E64-16s_v6", "e", "esv6", 6, "64", "intel", False),
        ("azure", "Standard_B2pls_v2", "b", "bplsv2", 2, "2", "ampere", False),
        ("azure", "Standard_NC24ads_A100_v4", "nc", "ncadsv4", 4, "24", "amd", False),
        ("azure", "Standard_F16", "f", "fv1", 1, "16", "intel", False),  # a series' first version has no _v
        ("gcp", "n2-standard-8", "n", "n2", 2, "standard-8", "intel", False),
        ("gcp", "n2d-highmem-4", "n", "n2d", 2, "highmem-4", "amd", False),
        ("gcp", "c4a-highcpu-4", "c", "c4a", 4, "highcpu-4", "google", False),
        ("gcp", "t2a-standard-1", "t", "t2a", 2, "standard-1", "ampere", False),
        ("gcp", "e2-micro", "e", "e2", 2, "micro", None, False),
        ("gcp", "c3-highcpu-192-metal", "c", "c3", 3, "highcpu-192-metal", "intel", True),
    ],
)
def test_names_give_family_generation_size_and_cpu_maker(
    provider: str,
    itype: str,
    category: str,
    family: str,
    generation: int | None,
    size: str,
    vendor: str | None,
    metal: bool,
) -> None:
    a = derive(provider, itype)
    assert (a.category, a.family, a.generation, a.size) == (category, family, generation, size)
    assert a.cpu_manufacturer == vendor
    assert a.bare_metal is metal


def test_stated_facts_win_over_the_name() -> None:
    # inf2 reads as Intel by the name's letters; the catalog says AMD
    a = derive("aws", "inf2.xlarge", InstanceFacts(processor="AMD EPYC 7R13 Processor", bare_metal=False))
    assert a.cpu_manufacturer == "amd" and a.processor == "AMD EPYC 7R13 Processor"
    assert derive("aws", "m7g.large", InstanceFacts(processor="AWS Graviton3 Processor")).cpu_manufacturer == "aws"


def test_private_types_have_no_name_derived_attributes() -> None:
    a = derive("private", "r740")
    assert (a.family, a.generation, a.size, a.cpu_manufacturer, a.bare_metal) == (None, None, None, None, None)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("NVIDIA A10G", "a10g"),
        ("A100-80GB", "a100"),
        ("H100-MEGA", "h100"),
        ("AMD Radeon Pro V520", "radeon-pro-v520"),
        ("NVIDIA GRID K520", "k520"),
        ("NVIDIA B200 Blackwell", "b200"),
        ("T4", "t4"),
        (None, None),
        ("", None),
    ],
)
def test_gpu_names_follow_karpenter(model: str | None, name: str | None) -> None:
    assert gpu_name(model) == name


def test_gpu_memory_from_the_model_suffix() -> None:
    assert gpu_memory_from_model("A100-80GB") == 80.0
    assert gpu_memory_from_model("V100-32GB") == 32.0
    assert gpu_memory_from_model("A100") is None
