"""Big requests: gzip-compressed bodies, the body limit on compressed and decompressed bytes,
and a default limit that takes the largest request the solver is meant to take."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from broker.settings import Settings
from tests.integration.service_support import open_broker, service_client, small_request

BENCH = Path(__file__).resolve().parents[2] / "bench" / "solver.py"
GZ = {"content-type": "application/json", "content-encoding": "gzip"}


def _bench_request(n: int) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("bench_solver", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc: dict[str, Any] = mod.generate(n)
    return doc


@pytest.fixture(scope="module")
def small_limit(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    import shutil

    path = tmp_path_factory.mktemp("encoding") / "broker.db"
    shutil.copy(template_db, path)
    with service_client(open_broker(f"sqlite:///{path}", max_body_bytes=100_000)) as c:
        yield c


def test_a_gzip_body_is_the_same_request(small_limit: TestClient) -> None:
    doc = small_request("gz", dry_run=True)
    plain = small_limit.post("/v1/placements", json=doc)
    packed = small_limit.post("/v1/placements", content=gzip.compress(json.dumps(doc).encode()), headers=GZ)
    assert plain.status_code == packed.status_code == 200, packed.text
    assert packed.json()["cost_per_hour"] == plain.json()["cost_per_hour"]
    # several gzip members are one body (RFC 1952)
    raw = json.dumps(doc).encode()
    two = gzip.compress(raw[:20]) + gzip.compress(raw[20:])
    assert small_limit.post("/v1/placements", content=two, headers=GZ).status_code == 200


def test_a_gzip_bomb_stops_at_the_limit(small_limit: TestClient) -> None:
    bomb = gzip.compress(b'{"name": "' + b"a" * 50_000_000 + b'"}')
    assert len(bomb) < 100_000  # small on the wire
    r = small_limit.post("/v1/placements", content=bomb, headers=GZ)
    assert r.status_code == 413 and "decompressed" in r.json()["detail"]
    assert r.headers["content-type"] == "application/problem+json"


def test_compressed_bytes_over_the_limit_are_413(small_limit: TestClient) -> None:
    noise = gzip.compress(bytes(range(256)) * 1000, compresslevel=0)  # stored, not shrunk
    assert small_limit.post("/v1/placements", content=noise, headers=GZ).status_code == 413


def test_not_gzip_is_422_and_another_coding_is_415(small_limit: TestClient) -> None:
    r = small_limit.post("/v1/placements", content=b"{not gzip at all}", headers=GZ)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body"], r.text
    cut = gzip.compress(json.dumps(small_request()).encode())[:-12]
    r = small_limit.post("/v1/placements", content=cut, headers=GZ)
    assert r.status_code == 422 and "gzip" in r.json()["detail"], r.text
    r = small_limit.post("/v1/placements", content=b"x", headers={**GZ, "content-encoding": "br"})
    assert r.status_code == 415 and r.headers["accept-encoding"] == "gzip"


def test_the_default_limit_takes_a_20000_workload_request_indented(client: TestClient) -> None:
    doc = _bench_request(20_000)
    body = json.dumps(doc, indent=4).encode()
    assert len(body) > 5_000_000  # what the old default refused
    assert Settings(database_url="sqlite://").max_body_bytes >= 2 * len(body)  # headroom
    # read and validated, not refused for its size (an invalid name keeps the solver out of it)
    doc["name"] = ""
    plain = {"content-type": "application/json"}
    r = client.post("/v1/placements", content=json.dumps(doc, indent=4).encode(), headers=plain)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "name"], r.text[:500]
    r = client.post("/v1/placements", content=gzip.compress(json.dumps(doc, indent=4).encode()), headers=GZ)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "name"], r.text[:500]
