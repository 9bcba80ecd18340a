"""What an instance type is, beyond its size: family, generation, size, CPU maker, GPU name, bare metal.

Pure. Two sources, merged per (provider, instance type):

- facts a catalog states (`InstanceFacts`: the processor, GPU memory, bare metal), bundled in
  `pricing/snapshot/instance_types.csv` for the public catalog;
- what the provider's naming scheme says, parsed here, so a type that only a live feed knows
  still gets its family, generation and size (docs/solver-requirements.md, "Instance requirements", has the
  table per provider).

An attribute the sources do not give stays unknown (None): for a requirement it is a label
the node does not carry (`In` fails, `NotIn` and `DoesNotExist` pass), as in Kubernetes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """What a catalog states about an instance type (None: not stated)."""

    processor: str | None = None  # "Intel Xeon Scalable (Sapphire Rapids)", "AWS Graviton4 Processor"
    gpu_memory_gib: float | None = None  # per GPU
    bare_metal: bool | None = None


@dataclass(frozen=True, slots=True)
class InstanceAttributes:
    category: str | None  # "m" (aws m7i), "d" (azure Dasv5), "n" (gcp n2)
    family: str | None  # "m7i", "dasv5", "n2"
    generation: int | None  # 7, 5, 2
    size: str | None  # "2xlarge", "2" (azure: the vCPU token), "standard-8"
    cpu_manufacturer: str | None  # intel | amd | aws | ampere | google | apple
    processor: str | None
    bare_metal: bool | None
    gpu_memory_gib: float | None  # per GPU


_AWS = re.compile(r"^(?P<family>(?P<category>[a-z]+)(?P<gen>\d+)?[a-z0-9-]*?)\.(?P<size>[a-z0-9-]+)$")
# Standard_<series><vcpus>[-<constrained>][<features>][_<accelerator or variant>...][_v<version>]
_AZURE = re.compile(
    r"^(?:Standard|Basic)_(?P<series>[A-Z]+)(?P<vcpus>\d+)(?:-\d+)?(?P<features>[a-z]*)"
    r"(?:_(?!v\d+$)[A-Za-z0-9]+)*(?:_v(?P<version>\d+))?$"
)
_GCP = re.compile(r"^(?P<family>(?P<category>[a-z]+)(?P<gen>\d+)[a-z]*)-(?P<size>.+)$")

# GCP families on Arm and on AMD: Google's machine family pages (t2a Ampere Altra, c4a/n4a Axion)
_GCP_CPU = {"t2a": "ampere", "c4a": "google", "n4a": "google"}


def _aws(instance_type: str) -> tuple[str | None, str | None, int | None, str | None, str | None]:
    m = _AWS.match(instance_type)
    if m is None:
        return None, None, None, None, None
    family = m["family"]
    gen = int(m["gen"]) if m["gen"] else None
    # the letters after the generation say the CPU maker (m7i Intel, m7a AMD, m7g Graviton)
    letters = re.sub(r"^[a-z]+-?\d+", "", family).split("-")[0]
    vendor = "aws" if "g" in letters else "amd" if "a" in letters else "intel" if gen is not None else None
    if family.startswith("mac"):
        vendor = None  # mac1 Intel, mac2 Apple silicon: the catalog's processor says which
    return m["category"], family, gen, m["size"], vendor


def _azure(instance_type: str) -> tuple[str | None, str | None, int | None, str | None, str | None]:
    m = _AZURE.match(instance_type)
    if m is None:
        return None, None, None, None, None
    series, features = m["series"].lower(), m["features"]
    version = int(m["version"]) if m["version"] else 1  # Azure's first version of a series has no _v suffix
    family = f"{series}{features}v{version}"
    # Azure's size naming: "a" AMD, "p" Arm (Ampere Altra / Cobalt); otherwise Intel
    vendor = "ampere" if "p" in features else "amd" if "a" in features else "intel"
    return series, family, version, m["vcpus"], vendor


def _gcp(instance_type: str) -> tuple[str | None, str | None, int | None, str | None, str | None]:
    m = _GCP.match(instance_type)
    if m is None:
        return None, None, None, None, None
    family = m["family"]
    vendor = _GCP_CPU.get(family) or ("amd" if family.endswith("d") else None if family == "e2" else "intel")
    return m["category"], family, int(m["gen"]), m["size"], vendor


_PARSERS = {"aws": _aws, "azure": _azure, "gcp": _gcp}


def _vendor_of_processor(processor: str) -> str | None:
    p = processor.lower()
    for word, vendor in (("graviton", "aws"), ("intel", "intel"), ("amd", "amd"), ("ampere", "ampere")):
        if word in p:
            return vendor
    if "apple" in p or p.startswith("m1") or p.startswith("m2"):
        return "apple"
    return None


@lru_cache(maxsize=16_384)
def derive(provider: str, instance_type: str, facts: InstanceFacts | None = None) -> InstanceAttributes:
    """The attributes of one instance type of one provider (cached: a catalog has a few thousand)."""
    parse = _PARSERS.get(provider)
    category, family, gen, size, vendor = parse(instance_type) if parse else (None, None, None, None, None)
    facts = facts or InstanceFacts()
    if facts.processor:
        vendor = _vendor_of_processor(facts.processor) or vendor
    bare = facts.bare_metal
    if bare is None and parse is not None:
        # public names say metal (aws "*.metal*", gcp "*-metal"); Azure sells no bare-metal VM sizes
        bare = "metal" in instance_type
    return InstanceAttributes(
        category=category,
        family=family,
        generation=gen,
        size=size,
        cpu_manufacturer=vendor,
        processor=facts.processor,
        bare_metal=bare,
        gpu_memory_gib=facts.gpu_memory_gib,
    )


_GPU_VENDOR_PREFIX = re.compile(r"^(?:nvidia|amd|aws|arm|qualcomm|intel)\s+(?:grid\s+)?")
_GPU_SUFFIX = re.compile(r"(?:-\d+gb|-mega|\s+blackwell)$")
_GPU_MEMORY_SUFFIX = re.compile(r"-(\d+)GB$", re.IGNORECASE)


def gpu_name(model: str | None) -> str | None:
    """A catalog's GPU model as Karpenter's `instance-gpu-name` writes it: the maker's prefix and
    memory variant dropped, lower case, spaces as dashes ("NVIDIA A10G" -> "a10g",
    "A100-80GB" -> "a100", "AMD Radeon Pro V520" -> "radeon-pro-v520")."""
    if not model:
        return None
    name = _GPU_VENDOR_PREFIX.sub("", model.strip().lower())
    name = _GPU_SUFFIX.sub("", name)
    return re.sub(r"\s+", "-", name) or None


def gpu_memory_from_model(model: str | None) -> float | None:
    """GiB per GPU where the model name states it ("A100-80GB", "V100-32GB")."""
    m = _GPU_MEMORY_SUFFIX.search(model or "")
    return float(m.group(1)) if m else None
