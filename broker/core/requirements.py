"""Instance requirements: `{key, operator, values}` over well-known pool attributes.

Kubernetes NodeSelectorRequirement semantics, as Karpenter applies them to instance types:

- `In`: the attribute is known and equals one of `values`;
- `NotIn`: the attribute is unknown or equals none of `values`;
- `Exists` / `DoesNotExist`: the attribute is known / unknown (no `values`);
- `Gt` / `Lt`: the attribute is known and greater / less than the one numeric value.

Keys are the broker's short names (`instance_family` or `instance-family`) or the Kubernetes
and Karpenter well-known labels (`karpenter.k8s.aws/instance-family`, `kubernetes.io/arch`, ...),
with the label's unit (`karpenter.k8s.aws/instance-memory` is MiB, `memory_gib` GiB). Text
compares case-insensitively. The table is in docs/solver-requirements.md, "Instance requirements". Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class Kind(StrEnum):
    TEXT = "text"
    NUMBER = "number"
    FLAG = "flag"  # "true" | "false"


#: attribute -> (kind, what it is); the order is the order the API lists them in
ATTRIBUTES: dict[str, tuple[Kind, str]] = {
    "provider": (Kind.TEXT, "aws | azure | gcp | private | edge"),
    "region": (Kind.TEXT, "the site's region (an AWS Local Zone's zone code)"),
    "site": (Kind.TEXT, "the site id, e.g. aws:eu-central-1"),
    "site_kind": (Kind.TEXT, "public | private | edge"),
    "instance_type": (Kind.TEXT, "the provider's instance type name"),
    "instance_category": (Kind.TEXT, "the family's leading letters: m (m7i), d (Dasv5), n (n2)"),
    "instance_family": (Kind.TEXT, "m7i, dasv5, n2 (derived from the type name per provider)"),
    "instance_generation": (Kind.NUMBER, "7 (m7i), 5 (Standard_D2as_v5), 2 (n2-standard-8)"),
    "instance_size": (Kind.TEXT, "2xlarge, metal (aws); the vCPU token (azure); standard-8 (gcp)"),
    "cpu_manufacturer": (Kind.TEXT, "intel | amd | aws | ampere | google | apple"),
    "processor": (Kind.TEXT, "the catalog's processor name, where it states one"),
    "arch": (Kind.TEXT, "amd64 | arm64"),
    "vcpus": (Kind.NUMBER, "vCPUs per node"),
    "memory_gib": (Kind.NUMBER, "memory per node, GiB"),
    "gpu_name": (Kind.TEXT, "t4, a10g, a100, h100 (absent without GPUs)"),
    "gpus": (Kind.NUMBER, "GPUs per node (absent without GPUs)"),
    "gpu_memory_gib": (Kind.NUMBER, "memory per GPU, GiB, where the catalog states it"),
    "bare_metal": (Kind.FLAG, "true | false"),
    "capacity_type": (Kind.TEXT, "ondemand (or on-demand) | spot | reserved"),
    "burstable": (Kind.FLAG, "true for burstable types (AWS T family, Azure B-series, GCP shared-core)"),
    "cpu_baseline_percent": (
        Kind.NUMBER,
        "share of each vCPU a node sustains: the published baseline, 100 if not burstable",
    ),
    "node_class": (Kind.TEXT, "general | high-memory | accelerated | hpc"),
    "quota_group": (Kind.TEXT, "the provider's quota group: aws:Standard, aws:Inf, azure:dasv5, gcp:n2"),
}

_MIB = 1.0 / 1024.0
#: well-known labels -> (attribute, factor turning the label's unit into the attribute's)
LABELS: dict[str, tuple[str, float]] = {
    "topology.kubernetes.io/region": ("region", 1.0),
    "node.kubernetes.io/instance-type": ("instance_type", 1.0),
    "beta.kubernetes.io/instance-type": ("instance_type", 1.0),
    "kubernetes.io/arch": ("arch", 1.0),
    "beta.kubernetes.io/arch": ("arch", 1.0),
    "karpenter.sh/capacity-type": ("capacity_type", 1.0),
    "karpenter.k8s.aws/instance-category": ("instance_category", 1.0),
    "karpenter.k8s.aws/instance-family": ("instance_family", 1.0),
    "karpenter.k8s.aws/instance-generation": ("instance_generation", 1.0),
    "karpenter.k8s.aws/instance-size": ("instance_size", 1.0),
    "karpenter.k8s.aws/instance-cpu-manufacturer": ("cpu_manufacturer", 1.0),
    "karpenter.k8s.aws/instance-cpu": ("vcpus", 1.0),
    "karpenter.k8s.aws/instance-memory": ("memory_gib", _MIB),
    "karpenter.k8s.aws/instance-gpu-name": ("gpu_name", 1.0),
    "karpenter.k8s.aws/instance-gpu-count": ("gpus", 1.0),
    "karpenter.k8s.aws/instance-gpu-memory": ("gpu_memory_gib", _MIB),
}

MAX_VALUES = 500

# Karpenter writes on-demand; the broker's capacity type is ondemand
_SYNONYMS = {"capacity_type": {"on-demand": "ondemand"}}


class RequirementError(ValueError):
    """A requirement that cannot be evaluated; the message says why (a 422 at the API)."""


def resolve_key(key: str) -> tuple[str, float]:
    """(attribute, unit factor) of a requirement key; RequirementError if unknown."""
    if key in LABELS:
        return LABELS[key]
    short = key.replace("-", "_")
    if "/" not in key and short in ATTRIBUTES:
        return short, 1.0
    raise RequirementError(
        f"unknown requirement key {key!r}; known: {', '.join(ATTRIBUTES)} (or - for _), "
        "and their Kubernetes / Karpenter labels (docs/solver.md, Instance requirements)"
    )


def _number(value: str, key: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise RequirementError(f"{key}: {value!r} is not a number") from None
    if not math.isfinite(x):
        raise RequirementError(f"{key}: {value!r} is not a finite number")
    return x


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str  # as written
    operator: Operator
    values: tuple[str, ...]  # as written (numbers as text)
    attribute: str  # resolved, see ATTRIBUTES
    texts: tuple[str, ...] = ()  # TEXT / FLAG values, normalised (lower case)
    numbers: tuple[float, ...] = ()  # NUMBER values in the attribute's unit

    @staticmethod
    def parse(key: str, operator: str, values: tuple[str, ...] | list[str] = ()) -> Requirement:
        """Validate and resolve one requirement (RequirementError says what is wrong)."""
        attribute, factor = resolve_key(key)
        try:
            op = Operator(operator)
        except ValueError:
            raise RequirementError(
                f"unknown operator {operator!r}; known: {', '.join(o.value for o in Operator)}"
            ) from None
        vals = tuple(values)
        if len(vals) > MAX_VALUES:
            raise RequirementError(f"{key}: at most {MAX_VALUES} values")
        if op in (Operator.IN, Operator.NOT_IN) and not vals:
            raise RequirementError(f"{key} {op.value}: needs at least one value")
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and vals:
            raise RequirementError(f"{key} {op.value}: takes no values")
        kind = ATTRIBUTES[attribute][0]
        if op in (Operator.GT, Operator.LT):
            if len(vals) != 1:
                raise RequirementError(f"{key} {op.value}: needs exactly one value")
            if kind is not Kind.NUMBER:
                raise RequirementError(f"{key} {op.value}: {key} is not numeric")
        if kind is Kind.NUMBER:
            nums = tuple(_number(v, key) * factor for v in vals)
            return Requirement(key, op, vals, attribute, numbers=nums)
        texts = tuple(_SYNONYMS.get(attribute, {}).get(v.lower(), v.lower()) for v in vals)
        if kind is Kind.FLAG:
            bad = [v for v in texts if v not in ("true", "false")]
            if bad:
                raise RequirementError(f"{key}: {bad[0]!r} is not true or false")
        return Requirement(key, op, vals, attribute, texts=texts)

    def describe(self) -> str:
        """As a user wrote it, for conflict lists: `karpenter.k8s.aws/instance-family In [m7i,m7a]`."""
        if self.operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return f"{self.key} {self.operator.value}"
        if self.operator in (Operator.GT, Operator.LT):
            return f"{self.key} {self.operator.value} {self.values[0]}"
        return f"{self.key} {self.operator.value} [{','.join(self.values)}]"
