"""What a node is beyond its listed size: active vCPUs of constrained sizes, burstable baselines, and
the instance-family group a provider's quota counts it in.

Pure. Read by the snapshot builder and the live feeds (active vCPUs), and by the broker's pool
table (baselines, family groups). The baselines are data (`burstable_baselines.csv`, sources in its
own notes and in docs/solver-requirements.md, "Node classes"); the family groups follow the providers' quota
names (AWS's on-demand and spot quota groups, Azure's per-VM-family quotas, GCP's per-family CPU
quotas).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# Azure's constrained-vCPU sizes: Standard_<series><cores>-<active><features>[_...]; the number after
# the dash is what the VM runs (Standard_E16-4as_v5: 4 of 16), at the parent's memory and price
_AZURE_CONSTRAINED = re.compile(r"^Standard_[A-Z]+\d+-(?P<active>\d+)")


def azure_active_vcpus(size: str) -> int | None:
    """The active vCPUs of a constrained-vCPU Azure size (Standard_M64-16ms: 16); None otherwise."""
    m = _AZURE_CONSTRAINED.match(size)
    return int(m["active"]) if m else None


def active_vcpus(provider: str, instance_type: str, listed: float) -> float:
    """The vCPUs a node of this type can run: the listed count, except where the name constrains it."""
    if provider == "azure":
        active = azure_active_vcpus(instance_type)
        if active is not None and 0 < active < listed:
            return float(active)
    return listed


# ---- burstable baselines ---------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    percent_per_vcpu: float  # sustained share of each vCPU, percent
    source: str


@lru_cache(maxsize=1)
def burstable_baselines() -> dict[tuple[str, str], Baseline]:
    """(provider, instance type) -> published baseline (burstable_baselines.csv)."""
    text = resources.files("pricing").joinpath("burstable_baselines.csv").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    return {
        (r["provider"], r["instance_type"]): Baseline(float(r["baseline_percent_per_vcpu"]), r["source"])
        for r in csv.DictReader(io.StringIO("\n".join(lines)))
    }


def baseline_percent(provider: str, instance_type: str) -> float:
    """Sustained CPU per vCPU in percent: the published baseline of a burstable type, 100 otherwise."""
    hit = burstable_baselines().get((provider, instance_type))
    return hit.percent_per_vcpu if hit is not None else 100.0


# ---- family groups -----------------------------------------------------------------------

GENERAL = "general"
HIGH_MEMORY = "high-memory"
ACCELERATED = "accelerated"
HPC = "hpc"
NODE_CLASSES = (GENERAL, HIGH_MEMORY, ACCELERATED, HPC)
#: classes a workload is kept off unless its requirements name them (docs/solver.md, "Node classes")
OPT_IN_CLASSES = frozenset({ACCELERATED, HPC})

# AWS's vCPU-based on-demand / spot quota groups ("Running On-Demand <group> instances"), by the
# family's leading letters; longest prefix first. Standard covers A, C, D, H, I, M, R, T, Z.
_AWS_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("hpc", "HPC", HPC),
    ("inf", "Inf", ACCELERATED),
    ("trn", "Trn", ACCELERATED),
    ("dl", "DL", ACCELERATED),
    ("vt", "G and VT", ACCELERATED),
    ("u-", "High Memory", HIGH_MEMORY),
    ("u7", "High Memory", HIGH_MEMORY),
    ("mac", "Mac", GENERAL),
    ("f", "F", ACCELERATED),  # FPGA
    ("g", "G and VT", ACCELERATED),
    ("p", "P", ACCELERATED),
    ("x", "X", HIGH_MEMORY),
)

# Azure series -> class (quotas are per VM family, e.g. "Standard NCASv3_T4 Family vCPUs")
_AZURE_ACCELERATED = ("NC", "ND", "NV", "NG", "NP")  # GPU and FPGA (NP) series
_AZURE_HPC = ("HB", "HC", "HX", "H")
_AZURE_HIGH_MEMORY = ("M",)
_AZURE_SERIES = re.compile(r"^(?:Standard|Basic)_(?P<series>[A-Z]+)\d")

# GCP machine families: accelerator-optimised (A2, A3, A4, G2), HPC-optimised (H3, H4D),
# memory-optimised (M1-M4); every family has its own CPU quota (N2_CPUS, C2_CPUS, ...)
_GCP_CLASS = {"a2": ACCELERATED, "a3": ACCELERATED, "a4": ACCELERATED, "a4x": ACCELERATED, "g2": ACCELERATED}
_GCP_CLASS |= {"h3": HPC, "h4d": HPC, "m1": HIGH_MEMORY, "m2": HIGH_MEMORY, "m3": HIGH_MEMORY, "m4": HIGH_MEMORY}


@dataclass(frozen=True)
class FamilyGroup:
    quota_group: str  # the provider's quota group: "aws:Standard", "aws:Inf", "azure:dasv5", "gcp:n2"; "" owned
    node_class: str  # one of NODE_CLASSES


def _azure_family(instance_type: str) -> str | None:
    m = re.match(
        r"^(?:Standard|Basic)_([A-Z]+)\d+(?:-\d+)?([a-z]*)(?:_(?!v\d+$)[A-Za-z0-9]+)*(?:_v(\d+))?$", instance_type
    )
    if m is None:
        return None
    return f"{m[1].lower()}{m[2]}v{m[3] or 1}"


def family_group(provider: str, instance_type: str, gpus: float = 0.0) -> FamilyGroup:
    """The quota group and node class of an instance type (a type with GPUs is always accelerated)."""
    if provider == "aws":
        head = instance_type.split(".", 1)[0]
        group, cls = "Standard", GENERAL
        for prefix, name, klass in _AWS_GROUPS:
            if head.startswith(prefix):
                group, cls = name, klass
                break
        out = FamilyGroup(f"aws:{group}", cls)
    elif provider == "azure":
        m = _AZURE_SERIES.match(instance_type)
        series = m["series"] if m else ""
        cls = GENERAL
        if series.startswith(_AZURE_ACCELERATED):
            cls = ACCELERATED
        elif series in _AZURE_HPC or series.startswith(("HB", "HC", "HX")):
            cls = HPC
        elif series in _AZURE_HIGH_MEMORY:
            cls = HIGH_MEMORY
        out = FamilyGroup(f"azure:{_azure_family(instance_type) or instance_type}", cls)
    elif provider == "gcp":
        family = instance_type.split("-", 1)[0]
        out = FamilyGroup(f"gcp:{family}", _GCP_CLASS.get(family, GENERAL))
    else:  # owned capacity: no provider quota (""), and its GPUs say whether it is accelerated
        out = FamilyGroup("", GENERAL)
    if gpus > 0 and out.node_class != ACCELERATED:
        out = FamilyGroup(out.quota_group, ACCELERATED)
    return out
