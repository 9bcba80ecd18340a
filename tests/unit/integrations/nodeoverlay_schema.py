"""A JSON Schema for karpenter.sh/v1alpha1 NodeOverlay, written from the validation rules of
Karpenter's API type (NodeOverlaySpec): requirements (1..100 node selector requirements, `In` with
values, `Gt`/`Lt` with one non-negative integer), `priceAdjustment` and `price` patterns, and the rule
that an overlay sets one of them, not both."""

from __future__ import annotations

from typing import Any

REQUIREMENT: dict[str, Any] = {
    "type": "object",
    "required": ["key", "operator"],
    "additionalProperties": False,
    "properties": {
        "key": {"type": "string", "minLength": 1, "maxLength": 316},
        "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]},
        "values": {"type": "array", "items": {"type": "string"}},
    },
    "allOf": [
        {
            "if": {"properties": {"operator": {"const": "In"}}},
            "then": {"required": ["values"], "properties": {"values": {"minItems": 1}}},
        },
        {
            "if": {"properties": {"operator": {"enum": ["Gt", "Lt", "Gte", "Lte"]}}},
            "then": {"properties": {"values": {"minItems": 1, "maxItems": 1, "items": {"pattern": r"^\d+$"}}}},
        },
    ],
}

NODE_OVERLAY: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "karpenter.sh/v1alpha1"},
        "kind": {"const": "NodeOverlay"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
            },
        },
        "spec": {
            "type": "object",
            "required": ["requirements"],
            "additionalProperties": False,
            "properties": {
                "requirements": {"type": "array", "minItems": 1, "maxItems": 100, "items": REQUIREMENT},
                "priceAdjustment": {
                    "type": "string",
                    "pattern": r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$",
                },
                "price": {"type": "string", "pattern": r"^\d+(\.\d+)?$"},
                "capacity": {"type": "object"},
                "weight": {"type": "integer", "minimum": 1, "maximum": 10000},
            },
            "not": {"required": ["price", "priceAdjustment"]},
        },
    },
}
