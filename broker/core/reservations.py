"""What the managed Kubernetes services hold back on every node (kube-reserved, system-reserved
and the hard eviction threshold), from each service's published formula.

A node's allocatable capacity is its raw size minus these reservations (and the DaemonSets
every node runs, a setting: see allocatable.py). Formulas, per provider (docs/solver-requirements.md,
"Allocatable capacity"):

- aws (EKS optimised AMI bootstrap): CPU 6 % of the first core, 1 % of the second, 0.5 % of
  the third and fourth, 0.25 % of every core above four; memory 11 MiB * max pods + 255 MiB,
  max pods from the VPC CNI's ENI limit of the instance size (below), 110 where the size is
  not one of those.
- azure (AKS 1.29 and later): CPU by the published table (60, 100, 140, 180, 260, 420, 740
  millicores at 1, 2, 4, 8, 16, 32, 64 cores; linear between and 10 m per core above); memory
  min(20 MiB * max pods + 50 MiB, 25 % of the node's memory), max pods 110.
- gcp (GKE Standard), and private and edge sites (no published formula of their own): CPU as
  EKS; memory 255 MiB below 1 GiB, else 25 % of the first 4 GiB, 20 % of the next 4, 10 % of
  the next 8, 6 % of the next 112 and 2 % above 128 GiB.
- every provider: the kubelet's hard eviction threshold, memory.available < 100 MiB.

Pure and vectorised: the catalog computes this once per pool when it builds its pool table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MIB = 1.0 / 1024.0  # in GiB
EVICTION_HARD_MEMORY_GIB = 100 * MIB

# (cores up to, share of each core in the band): EKS and GKE publish the same CPU bands
_CPU_BANDS = ((1.0, 0.06), (2.0, 0.01), (4.0, 0.005), (np.inf, 0.0025))
# (GiB up to, share of each GiB in the band): GKE's (and pre-1.29 AKS's) regressive memory rate
_MEMORY_BANDS = ((4.0, 0.25), (8.0, 0.20), (16.0, 0.10), (128.0, 0.06), (np.inf, 0.02))
GKE_SMALL_MACHINE_GIB = 1.0  # below it GKE reserves a flat 255 MiB
GKE_SMALL_MACHINE_RESERVED_GIB = 255 * MIB

# AKS 1.29+: published kube-reserved CPU in millicores at these core counts
_AKS_CPU_CORES = np.array([0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
_AKS_CPU_MILLI = np.array([0.0, 60.0, 100.0, 140.0, 180.0, 260.0, 420.0, 740.0])
_AKS_CPU_MILLI_PER_CORE_ABOVE = 10.0
AKS_MAX_PODS = 110  # kubenet's and Kubernetes' default; Azure CNI clusters are often set lower
EKS_DEFAULT_MAX_PODS = 110  # sizes the ENI table below does not know

# ENI-limited max pods of current-generation (Nitro) instance sizes, as the EKS AMI's
# eni-max-pods table has them for the m5/c5/r5 families: ENIs * (IPv4 addresses per ENI - 1) + 2
_EKS_PODS_BY_SIZE = {"nano": 4, "micro": 4, "small": 11, "medium": 17, "large": 29}
_XLARGE = re.compile(r"^(\d*)xlarge$")


def _banded(amount: FloatArray, bands: Sequence[tuple[float, float]]) -> FloatArray:
    """sum over bands of (the part of `amount` inside the band) * the band's rate."""
    out = np.zeros_like(amount)
    lower = 0.0
    for upper, rate in bands:
        out += np.clip(amount - lower, 0.0, upper - lower) * rate
        lower = upper
    return out


def banded_cpu_reserved(vcpus: FloatArray) -> FloatArray:
    """EKS and GKE kube-reserved CPU, in vCPUs."""
    return _banded(np.asarray(vcpus, dtype=np.float64), _CPU_BANDS)


def gke_memory_reserved_gib(memory_gib: FloatArray) -> FloatArray:
    mem = np.asarray(memory_gib, dtype=np.float64)
    return np.where(mem < GKE_SMALL_MACHINE_GIB, GKE_SMALL_MACHINE_RESERVED_GIB, _banded(mem, _MEMORY_BANDS))


def eks_memory_reserved_gib(max_pods: FloatArray) -> FloatArray:
    return (11.0 * np.asarray(max_pods, dtype=np.float64) + 255.0) * MIB


def aks_cpu_reserved(vcpus: FloatArray) -> FloatArray:
    cores = np.asarray(vcpus, dtype=np.float64)
    inside = np.interp(cores, _AKS_CPU_CORES, _AKS_CPU_MILLI)
    above = _AKS_CPU_MILLI[-1] + (cores - _AKS_CPU_CORES[-1]) * _AKS_CPU_MILLI_PER_CORE_ABOVE
    out: FloatArray = np.where(cores > _AKS_CPU_CORES[-1], above, inside) / 1000.0
    return out


def aks_memory_reserved_gib(memory_gib: FloatArray, max_pods: float = AKS_MAX_PODS) -> FloatArray:
    mem = np.asarray(memory_gib, dtype=np.float64)
    return np.minimum((20.0 * max_pods + 50.0) * MIB, 0.25 * mem)


@lru_cache(maxsize=4096)  # a catalog repeats a few hundred instance types over its regions
def eks_max_pods(instance_type: str) -> int:
    """The VPC CNI's max pods for an EC2 instance type, from its size (the part after the dot)."""
    size = instance_type.partition(".")[2]
    if size in _EKS_PODS_BY_SIZE:
        return _EKS_PODS_BY_SIZE[size]
    if size.startswith("metal"):
        return 737
    m = _XLARGE.match(size)
    if m is None:
        return EKS_DEFAULT_MAX_PODS
    n = int(m.group(1) or 1)
    if n <= 2:
        return 58
    return 234 if n < 16 else 737


def reserved(
    providers: Sequence[str], instance_types: Sequence[str], vcpus: FloatArray, memory_gib: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Per node: (vCPUs, GiB of memory) the provider's managed Kubernetes keeps from pods,
    the eviction threshold included. Element-wise over the given nodes."""
    prov = np.asarray(providers, dtype=object)
    cpu_in = np.asarray(vcpus, dtype=np.float64)
    mem_in = np.asarray(memory_gib, dtype=np.float64)
    aws, azure = prov == "aws", prov == "azure"
    cpu = np.where(azure, aks_cpu_reserved(cpu_in), banded_cpu_reserved(cpu_in))
    mem = np.where(azure, aks_memory_reserved_gib(mem_in), gke_memory_reserved_gib(mem_in))
    if aws.any():
        at = np.flatnonzero(aws)
        pods = np.array([eks_max_pods(t) for t in np.asarray(instance_types, dtype=object)[at].tolist()])
        mem[at] = eks_memory_reserved_gib(pods)
    return cpu, mem + EVICTION_HARD_MEMORY_GIB
