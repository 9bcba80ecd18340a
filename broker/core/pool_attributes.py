"""The well-known attributes of every pool as columns, and instance requirements as masks over them.

Text attributes are integer codes into a vocabulary (-1: unknown), numbers are float64 (NaN:
unknown), so a requirement over ~190k pools is one table lookup or comparison, not a loop.
Instance-type attributes are derived once per distinct (provider, instance type), a few
thousand, and broadcast to the pools. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.core.domain import Site
from broker.core.instance_attributes import InstanceFacts, derive, gpu_memory_from_model, gpu_name
from broker.core.requirements import ATTRIBUTES, Kind, Operator, Requirement

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
Codes = npt.NDArray[np.int32]

FactsByType = Mapping[tuple[str, str], InstanceFacts]  # (provider, instance type) -> facts


@dataclass(frozen=True)
class TextColumn:
    codes: Codes  # per pool, -1 = unknown
    vocab: tuple[str, ...]  # as the catalog writes it
    lower: tuple[str, ...]  # what requirements compare against

    def value(self, i: int) -> str | None:
        c = int(self.codes[i])
        return None if c < 0 else self.vocab[c]


@dataclass(frozen=True)
class PoolAttributes:
    text: dict[str, TextColumn]
    number: dict[str, FloatArray]
    n: int

    def of(self, i: int) -> dict[str, str | bool | int | float]:
        """The known attributes of pool `i`, in ATTRIBUTES order (for the API)."""
        out: dict[str, str | bool | int | float] = {}
        for name, (kind, _) in ATTRIBUTES.items():
            if name in self.number:
                x = float(self.number[name][i])
                if x == x:
                    out[name] = int(x) if kind is Kind.NUMBER and x.is_integer() else x
                continue
            v = self.text[name].value(i)
            if v is not None:
                out[name] = v == "true" if kind is Kind.FLAG else v
        return out

    def mask(self, req: Requirement) -> BoolArray:
        """Pools that meet `req` (Kubernetes semantics: an unknown attribute is an absent label)."""
        if req.attribute in self.number:
            col = self.number[req.attribute]
            known = ~np.isnan(col)
            if req.operator is Operator.GT:
                return np.asarray(known & (col > req.numbers[0]), dtype=bool)
            if req.operator is Operator.LT:
                return np.asarray(known & (col < req.numbers[0]), dtype=bool)
            hit = known & np.isin(np.round(col, 6), np.round(np.array(req.numbers, dtype=np.float64), 6))
        else:
            tc = self.text[req.attribute]
            known = tc.codes >= 0
            wanted = set(req.texts)
            # one slot per vocabulary entry, and a last False one that code -1 (unknown) lands on
            table = np.array([v in wanted for v in tc.lower] + [False], dtype=bool)
            hit = table[tc.codes]
        if req.operator is Operator.IN:
            return np.asarray(hit, dtype=bool)
        if req.operator is Operator.NOT_IN:
            return np.asarray(~hit, dtype=bool)
        if req.operator is Operator.EXISTS:
            return np.asarray(known, dtype=bool)
        return np.asarray(~known, dtype=bool)  # DoesNotExist


def _text(values: Sequence[str | None] | npt.NDArray[np.object_]) -> TextColumn:
    """Codes over the distinct values (None and "" are unknown: -1)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))  # a C hash table, not a loop
    vocab = tuple(str(u) for u in uniques)
    codes = np.asarray(codes, dtype=np.int32)
    if "" in vocab:
        codes = np.where(codes == vocab.index(""), -1, codes).astype(np.int32)
    return TextColumn(codes, vocab, tuple(v.lower() for v in vocab))


def _broadcast(col: TextColumn, idx: npt.NDArray[np.int64]) -> TextColumn:
    return TextColumn(np.asarray(col.codes[idx], dtype=np.int32), col.vocab, col.lower)


@dataclass(frozen=True)
class PoolColumns:
    """What the attributes are built from: the pool table's columns (pooltable.py)."""

    sites: Sequence[Site]
    instance_types: Sequence[str]  # per pool
    site_idx: npt.NDArray[np.int64]
    arch: TextColumn  # codes into the arch names
    capacity_type: TextColumn
    vcpus: FloatArray
    memory_gib: FloatArray
    gpus: FloatArray
    gpu_model: npt.NDArray[np.object_]  # "" = none
    baseline: FloatArray  # sustained share of each vCPU (1: not burstable)
    node_class: TextColumn  # codes into pricing.node_classes.NODE_CLASSES
    quota_group: npt.NDArray[np.object_]


def coded(codes: npt.NDArray[np.int64], names: Sequence[str]) -> TextColumn:
    """A column whose codes already exist (the table's arch and capacity-type indexes)."""
    return TextColumn(np.asarray(codes, dtype=np.int32), tuple(names), tuple(x.lower() for x in names))


def build_pool_attributes(cols: PoolColumns, facts: FactsByType) -> PoolAttributes:
    n = len(cols.instance_types)
    site_idx = cols.site_idx
    text: dict[str, TextColumn] = {}
    number: dict[str, FloatArray] = {}
    for name, per_site in (
        ("provider", [s.provider for s in cols.sites]),
        ("region", [s.region for s in cols.sites]),
        ("site", [s.id for s in cols.sites]),
        ("site_kind", [s.kind.value for s in cols.sites]),
    ):
        text[name] = _broadcast(_text(per_site), site_idx)

    # (provider, instance type) per pool as one integer key, made unique in numpy
    providers = sorted({s.provider for s in cols.sites})
    site_provider = np.array([providers.index(s.provider) for s in cols.sites] + [0], dtype=np.int64)
    name_code, name_of = pd.factorize(np.asarray(cols.instance_types, dtype=object))  # a C hash table
    width = max(len(name_of), 1)
    keys, type_of = np.unique(site_provider[site_idx] * width + name_code, return_inverse=True)
    type_index = [(providers[k // width], str(name_of[k % width])) for k in keys.tolist()]
    derived = [derive(prov, it, facts.get((prov, it))) for prov, it in type_index]
    text["instance_type"] = _broadcast(_text([it for _, it in type_index]), type_of)
    for name, field in (
        ("instance_category", "category"),
        ("instance_family", "family"),
        ("instance_size", "size"),
        ("cpu_manufacturer", "cpu_manufacturer"),
        ("processor", "processor"),
    ):
        text[name] = _broadcast(_text([getattr(a, field) for a in derived]), type_of)
    text["bare_metal"] = _broadcast(
        _text([None if a.bare_metal is None else str(a.bare_metal).lower() for a in derived]), type_of
    )
    gen = np.array([np.nan if a.generation is None else a.generation for a in derived] + [np.nan], dtype=np.float64)
    number["instance_generation"] = gen[type_of]

    text["arch"] = cols.arch
    text["capacity_type"] = cols.capacity_type
    number["vcpus"] = cols.vcpus
    number["memory_gib"] = cols.memory_gib
    has_gpu = cols.gpus > 0
    # Karpenter labels GPU count, name and memory on GPU instance types only
    number["gpus"] = np.where(has_gpu, cols.gpus, np.nan)
    models = _text(cols.gpu_model)
    names = _text([gpu_name(m) for m in models.vocab])
    text["gpu_name"] = TextColumn(
        np.where(has_gpu & (models.codes >= 0), np.append(names.codes, -1)[models.codes], -1).astype(np.int32),
        names.vocab,
        names.lower,
    )
    by_model = np.array([gpu_memory_from_model(m) or np.nan for m in models.vocab] + [np.nan], dtype=np.float64)
    type_memory = np.array(
        [np.nan if a.gpu_memory_gib is None else a.gpu_memory_gib for a in derived] + [np.nan], dtype=np.float64
    )
    memory = type_memory[type_of]
    memory = np.where(np.isnan(memory), by_model[models.codes], memory)
    number["gpu_memory_gib"] = np.where(has_gpu, memory, np.nan)
    burstable = cols.baseline < 1.0
    text["burstable"] = TextColumn(burstable.astype(np.int32), ("false", "true"), ("false", "true"))
    number["cpu_baseline_percent"] = np.round(cols.baseline * 100.0, 6)
    text["node_class"] = cols.node_class
    text["quota_group"] = _text(cols.quota_group)
    return PoolAttributes(text=text, number=number, n=n)
