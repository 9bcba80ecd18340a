"""Every paginated list refuses offsets beyond a 64-bit integer and takes any below, on both
databases (PostgreSQL's OFFSET is a bigint: larger values were a 500)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.paging import MAX_OFFSET

LISTS = ["/v1/jobs", "/v1/placements", "/v1/pools", "/v1/simulations"]


@pytest.mark.both_backends
@pytest.mark.parametrize("path", LISTS)
def test_offsets_past_64_bits_are_422_and_the_largest_is_an_empty_page(client: TestClient, path: str) -> None:
    for huge in (MAX_OFFSET + 1, 3332301134982510804992):
        r = client.get(path, params={"offset": huge})
        assert r.status_code == 422, (huge, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert any(e["loc"] == ["query", "offset"] for e in r.json()["errors"])
    r = client.get(path, params={"offset": MAX_OFFSET, "limit": 1})
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["items"] == [] and page["offset"] == MAX_OFFSET


def test_every_paginated_operation_bounds_its_offset(shared_client: TestClient) -> None:
    spec = shared_client.get("/openapi.json").json()
    offsets = [
        (path, method, p["schema"])
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        for p in op.get("parameters", [])
        if p["name"] == "offset"
    ]
    assert {path for path, _, _ in offsets} >= set(LISTS)
    assert all(s.get("maximum") == MAX_OFFSET for _, _, s in offsets), offsets
