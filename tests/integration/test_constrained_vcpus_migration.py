"""Migration 0027: a database holding Azure's constrained-vCPU sizes at their parents' counts (as
catalogs before it stored them) gets the active counts of their names, and a new catalog version so
no cached catalog keeps the old ones."""

from __future__ import annotations

import sqlalchemy as sa

from broker.db.session import downgrade, migrate


def _vcpus(db_url: str) -> tuple[dict[str, float], str]:
    engine = sa.create_engine(db_url)
    with engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT instance_type, vcpus FROM pools WHERE site = 'azure:westeurope' AND capacity_type = 'ondemand'"
                " AND instance_type IN ('Standard_HB120-16rs_v2', 'Standard_E16-4as_v5', 'Standard_E16as_v5')"
            )
        )
        vcpus = {str(i): float(v) for i, v in rows}
        version = str(c.execute(sa.text("SELECT value FROM catalog_meta WHERE key = 'version'")).scalar_one())
    engine.dispose()
    return vcpus, version


def test_constrained_sizes_get_their_active_vcpus(db_url: str) -> None:
    loaded, _ = _vcpus(db_url)
    assert loaded == {"Standard_HB120-16rs_v2": 16, "Standard_E16-4as_v5": 4, "Standard_E16as_v5": 16}
    downgrade(db_url, "0026")
    before, old_version = _vcpus(db_url)
    assert before == {"Standard_HB120-16rs_v2": 120, "Standard_E16-4as_v5": 16, "Standard_E16as_v5": 16}
    migrate(db_url)
    after, new_version = _vcpus(db_url)
    assert after == loaded
    assert new_version != old_version
