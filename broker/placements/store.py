"""Stored placements in the database: domain placements in, domain placements out.

The only module that queries the placement rows for whole placements; the rows'
own from_domain/to_domain do the mapping.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from broker.core.placement import Placement, PlacementSummary
from broker.db.placement_models import PlacementRow, load_placements
from broker.errors import NotFound

_CHUNK = 500


class PlacementStore:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    @staticmethod
    def add(session: Session, placement: Placement) -> None:
        """Write a stored placement (its header and child rows) in the caller's transaction."""
        session.add(PlacementRow.from_domain(placement))

    def get(self, placement_id: str, *, tenant: str | None) -> Placement:
        """The placement, if it exists and belongs to `tenant` (else NotFound: no probing other tenants).

        `tenant=None`: of any tenant, for the operator only (the CLI, the API without a key)."""
        where = [PlacementRow.id == placement_id] + ([] if tenant is None else [PlacementRow.tenant == tenant])
        with self._sessions() as s:
            found = load_placements(s, *where)
        if not found:
            raise NotFound(f"placement {placement_id!r} does not exist")
        return found[0]

    def tenant_of(self, placement_id: str) -> str | None:
        with self._sessions() as s:
            return s.scalar(select(PlacementRow.tenant).where(PlacementRow.id == placement_id))

    def page(
        self, *, tenant: str, limit: int = 50, offset: int = 0, name: str | None = None
    ) -> tuple[list[PlacementSummary], int]:
        """A page of the tenant's placements, newest first, and how many there are."""
        header = PlacementRow.__table__
        with self._sessions() as s:
            q = select(header).where(header.c.tenant == tenant)
            if name:
                q = q.where(header.c.name == name)
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = s.execute(q.order_by(header.c.created_at.desc(), header.c.id.desc()).limit(limit).offset(offset))
            return [PlacementRow.summary(r) for r in rows], int(total)

    def by_ids(self, ids: Sequence[str]) -> list[Placement]:
        """Whole placements in the order of `ids` (ids that do not exist are left out)."""
        found: dict[str, Placement] = {}
        with self._sessions() as s:
            for i in range(0, len(ids), _CHUNK):
                for p in load_placements(s, PlacementRow.id.in_(list(ids[i : i + _CHUNK]))):
                    found[str(p.id)] = p
        return [found[i] for i in ids if i in found]

    def latest_by_name(self, *, tenant: str, limit: int = 500) -> list[Placement]:
        """The newest stored placement of each name among the tenant's `limit` newest: what is meant to run."""
        with self._sessions() as s:
            rows = s.execute(
                select(PlacementRow.id, PlacementRow.name)
                .where(PlacementRow.tenant == tenant)
                .order_by(PlacementRow.created_at.desc(), PlacementRow.id.desc())
                .limit(limit)
            ).all()
        newest: dict[str, str] = {}
        for pid, name in rows:
            newest.setdefault(name, pid)
        return self.by_ids(list(newest.values()))
