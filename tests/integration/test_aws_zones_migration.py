"""Migration 0022: AWS Local and Wavelength Zones stored as `edge` sites become `public` (the
contract's `edge` is an owned site named `edge:<name>`), a private or edge site of the operator
stays what it is, and the catalog's version changes so no cached catalog keeps the old kinds."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from broker.db.session import downgrade, migrate
from tests.integration.service_support import open_broker, service_client


def _kinds(db_url: str) -> tuple[dict[str, str], str]:
    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        kinds = {str(i): str(k) for i, k in c.execute(sa.text("SELECT id, kind FROM sites"))}
        version = str(c.execute(sa.text("SELECT value FROM catalog_meta WHERE key = 'version'")).scalar_one())
    engine.dispose()
    return kinds, version


@pytest.mark.both_backends
def test_zones_stored_as_edge_become_public(db_url: str) -> None:
    downgrade(db_url, "0021")
    engine = sa.create_engine(db_url)
    with engine.begin() as c:  # as the catalog of the release before stored them, beside an owned edge site
        c.execute(
            sa.text("UPDATE sites SET kind = 'edge' WHERE id IN ('aws:us-east-1-bos-1', 'aws:eu-west-3-wl1-cmn1')")
        )
        c.execute(
            sa.text(
                "INSERT INTO sites (id, provider, kind, region, name, country, jurisdictions, lat, lon, updated_at)"
                " VALUES ('edge:store-17', 'edge', 'edge', 'store-17', 'store 17', 'DE', '[\"DE\", \"EU\"]',"
                " 48.1, 11.6, CURRENT_TIMESTAMP)"
            )
        )
    engine.dispose()
    before, old_version = _kinds(db_url)
    migrate(db_url)
    after, new_version = _kinds(db_url)
    assert before["aws:us-east-1-bos-1"] == "edge"
    assert after["aws:us-east-1-bos-1"] == after["aws:eu-west-3-wl1-cmn1"] == "public"
    assert after["edge:store-17"] == "edge" and after["aws:us-east-1"] == "public"
    assert new_version != old_version
    with service_client(open_broker(db_url)) as client:
        sites = {s["id"]: s for s in client.get("/v1/sites").json()}
    assert sites["aws:us-east-1-bos-1"]["kind"] == "public"
    assert all(s["id"].startswith(f"{s['kind']}:") for s in sites.values() if s["kind"] != "public")
