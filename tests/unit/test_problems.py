"""broker.problems: the field paths of an error name the user's fields, not pydantic's union labels."""

from __future__ import annotations

from typing import Any

import pytest

from broker.problems import field_errors, user_locs


@pytest.mark.parametrize(
    ("locs", "fields"),
    [
        # a union that failed: each member tried, under its label
        ([["w", 0, "residency", "str"], ["w", 0, "residency", "InlineResidency", "allowed_countries"]],
         [["w", 0, "residency"], ["w", 0, "residency", "allowed_countries"]]),
        ([["m", "constrained-int"], ["m", "constrained-str"]], [["m"], ["m"]]),
        ([["v", "function-after[_valid(), RequirementIn]"], ["v", "list[int]"]], [["v"], ["v"]]),
        # a tagged union inside a union: its label and the tag's value
        ([["x", "tagged-union[A,B]", "a", "size"], ["x", "str"]], [["x", "size"], ["x"]]),
        # the user's fields and mapping keys stay, even where they look like labels
        ([["body", "name"], ["body", "replicas"]], [["body", "name"], ["body", "replicas"]]),
        ([["slo", "EU"], ["slo", "US"]], [["slo", "EU"], ["slo", "US"]]),
        ([["slo", "str"]], [["slo", "str"]]),
    ],
)  # fmt: skip
def test_user_locs_drop_union_member_labels_only(locs: list[list[Any]], fields: list[list[Any]]) -> None:
    assert user_locs(locs) == fields


def test_field_errors_use_the_user_s_fields() -> None:
    errors = [
        {"loc": ["body", "m", "constrained-int"], "msg": "a"},
        {"loc": ["body", "m", "constrained-str"], "msg": "b"},
    ]
    assert [e["loc"] for e in field_errors(errors)] == [["body", "m"], ["body", "m"]]
