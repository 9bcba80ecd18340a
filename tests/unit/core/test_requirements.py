"""Requirement validation (what the API answers 422 to) and the label-selector syntax of GET /v1/pools."""

from __future__ import annotations

import pytest

from broker.core.requirements import Operator, Requirement, RequirementError
from broker.core.selector import clauses, parse_clause


@pytest.mark.parametrize(
    ("key", "operator", "values", "message"),
    [
        ("karpenter.k8s.aws/instance-colour", "In", ["red"], "unknown requirement key"),
        ("instance/family", "In", ["m7i"], "unknown requirement key"),  # short names have no prefix
        ("instance-family", "Equals", ["m7i"], "unknown operator"),
        ("instance-family", "in", ["m7i"], "unknown operator"),  # operators are case-sensitive, as in Kubernetes
        ("instance-family", "In", [], "at least one value"),
        ("instance-family", "NotIn", [], "at least one value"),
        ("instance-family", "Exists", ["m7i"], "takes no values"),
        ("gpu_name", "DoesNotExist", ["t4"], "takes no values"),
        ("instance-generation", "Gt", ["five"], "not a number"),
        ("instance-generation", "Gt", ["5", "6"], "exactly one value"),
        ("instance-generation", "Lt", [], "exactly one value"),
        ("instance-generation", "Gt", ["nan"], "finite"),
        ("instance-family", "Gt", ["5"], "not numeric"),
        ("vcpus", "In", ["4", "many"], "not a number"),
        ("bare_metal", "In", ["yes"], "not true or false"),
    ],
)
def test_bad_requirements_say_why(key: str, operator: str, values: list[str], message: str) -> None:
    with pytest.raises(RequirementError, match=message):
        Requirement.parse(key, operator, values)


def test_labels_resolve_to_attributes_in_their_own_unit() -> None:
    r = Requirement.parse("karpenter.k8s.aws/instance-memory", "Gt", ["16384"])
    assert (r.attribute, r.numbers) == ("memory_gib", (16.0,))
    r = Requirement.parse("karpenter.k8s.aws/instance-gpu-memory", "In", ["24576"])
    assert (r.attribute, r.numbers) == ("gpu_memory_gib", (24.0,))
    assert Requirement.parse("karpenter.sh/capacity-type", "In", ["On-Demand"]).texts == ("ondemand",)
    assert Requirement.parse("instance-family", "In", ["M7i"]).texts == ("m7i",)


@pytest.mark.parametrize(
    ("clause", "key", "operator", "values"),
    [
        ("instance-family in (m7i, m7a)", "instance-family", Operator.IN, ("m7i", "m7a")),
        ("karpenter.k8s.aws/instance-family notin (m5)", "karpenter.k8s.aws/instance-family", Operator.NOT_IN, ("m5",)),
        ("gpu_name", "gpu_name", Operator.EXISTS, ()),
        ("!gpu_name", "gpu_name", Operator.DOES_NOT_EXIST, ()),
        ("arch=arm64", "arch", Operator.IN, ("arm64",)),
        ("arch==arm64", "arch", Operator.IN, ("arm64",)),
        ("arch!=arm64", "arch", Operator.NOT_IN, ("arm64",)),
        ("instance-generation>5", "instance-generation", Operator.GT, ("5",)),
        ("vcpus < 16", "vcpus", Operator.LT, ("16",)),
    ],
)
def test_selector_clauses(clause: str, key: str, operator: Operator, values: tuple[str, ...]) -> None:
    r = parse_clause(clause)
    assert (r.key, r.operator, r.values) == (key, operator, values)


def test_selector_splits_at_commas_outside_parentheses() -> None:
    assert clauses("a in (x,y),b>5,!c") == ["a in (x,y)", "b>5", "!c"]


@pytest.mark.parametrize("clause", ["", "a in x", "a >", "= x", "a in (x"])
def test_bad_selector_clauses(clause: str) -> None:
    with pytest.raises(RequirementError):
        parse_clause(clause)
