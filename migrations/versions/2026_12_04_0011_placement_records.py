"""placement records: a stored placement as rows, not as its response document

Until now `placements.result` held the API's response document and finops and
dispatch read it back, so renaming a response field would have broken stored
data. The placement becomes a header row (its figures, price snapshot header,
right-sizing figures) plus one row per provisioned pool, assignment, budget
figure and sized workload/resource. The upgrade reads every stored document and
writes those rows, then drops `result`; the downgrade writes the documents back
from the rows, so the previous release reads the placements it wrote.

The mapping below is this migration's own (documents of the v1 contract <->
these columns): later code may rename its classes, a migration must not change.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 14:30:00
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_BATCH = 500

# header columns added to `placements`; NOT NULL ones are tightened once every row has a value
_REQUIRED = (
    ("objective_value", sa.Float()),
    ("lower_bound_per_hour", sa.Float()),
    ("gap_pct", sa.Float()),
    ("baseline_policy", sa.String(length=80)),
    ("solve_ms", sa.Integer()),
    ("egress_cost_per_hour", sa.Float()),
    ("storage_cost_per_hour", sa.Float()),
    ("latency_quantile", sa.String(length=8)),
    ("rejected", sa.JSON()),
    ("warnings", sa.JSON()),
    ("price_as_of", sa.JSON()),
)
_OPTIONAL = (
    ("catalog_version", sa.String(length=64)),
    ("price_stale_after_days", sa.Float()),
    ("sizing_declared_cost_per_hour", sa.Float()),
    ("sizing_cost_per_hour", sa.Float()),
    ("sizing_savings_per_hour", sa.Float()),
    ("sizing_savings_pct", sa.Float()),
)
_METRICS = ("cpu", "memory_gib")


def _placements(*extra: sa.ColumnClause[Any]) -> sa.TableClause:
    return sa.table(
        "placements",
        sa.column("id", sa.String()),
        sa.column("status", sa.String()),
        sa.column("cost_per_hour", sa.Float()),
        sa.column("baseline_cost_per_hour", sa.Float()),
        sa.column("savings_pct", sa.Float()),
        *extra,
    )


_HEADER = _placements(
    sa.column("result", sa.JSON()),
    *(sa.column(name, type_) for name, type_ in _REQUIRED + _OPTIONAL),
)
_POOLS = sa.table(
    "placement_pools",
    *(sa.column(c) for c in ("placement_id", "line", "pool", "count", "cost_per_hour")),
    *(sa.column(c) for c in ("price_per_hour", "price_source", "price_as_of")),
    sa.column("price_stale", sa.Boolean()),
)
_ASSIGNMENTS = sa.table(
    "placement_assignments",
    *(sa.column(c) for c in ("placement_id", "line", "workload", "pool", "site", "replicas", "cost_per_hour")),
    *(sa.column(c) for c in ("next_best", "next_best_extra_per_hour")),
    *(sa.column(c, sa.JSON()) for c in ("latency_ms", "latency_slo_margin_ms", "binding", "cost_breakdown")),
)
_BUDGETS = sa.table(
    "placement_budgets",
    *(sa.column(c) for c in ("placement_id", "line", "team", "monthly_usd", "used", "this_placement")),
    *(sa.column(c) for c in ("projected", "remaining")),
    sa.column("over", sa.Boolean()),
)
_SIZING = sa.table(
    "placement_sizing",
    *(sa.column(c) for c in ("placement_id", "line", "workload", "source", "model_version")),
    *(sa.column(c) for c in ("horizon_hours", "headroom_pct")),
    sa.column("warnings", sa.JSON()),
)
_RESOURCES = sa.table(
    "placement_sizing_resources",
    *(sa.column(c) for c in ("placement_id", "line", "metric", "declared", "forecast", "p50_peak")),
    *(sa.column(c) for c in ("p95_peak", "change_pct", "method")),
)
_CHILDREN = (_POOLS, _ASSIGNMENTS, _BUDGETS, _SIZING, _RESOURCES)


def _create_tables() -> None:
    parent = sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE")
    op.create_table(
        "placement_pools",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=300), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("price_per_hour", sa.Float(), nullable=True),
        sa.Column("price_source", sa.String(length=40), nullable=True),
        sa.Column("price_as_of", sa.String(length=40), nullable=True),
        sa.Column("price_stale", sa.Boolean(), nullable=True),
        parent,
        sa.PrimaryKeyConstraint("placement_id", "line"),
    )
    op.create_table(
        "placement_assignments",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("pool", sa.String(length=300), nullable=False),
        sa.Column("site", sa.String(length=200), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.JSON(), nullable=False),
        sa.Column("latency_slo_margin_ms", sa.JSON(), nullable=False),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("binding", sa.JSON(), nullable=False),
        sa.Column("next_best", sa.Text(), nullable=True),
        sa.Column("next_best_extra_per_hour", sa.Float(), nullable=True),
        sa.Column("cost_breakdown", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("placement_id", "line"),
    )
    op.create_index("ix_placement_assignments_site", "placement_assignments", ["site"])
    op.create_table(
        "placement_budgets",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(length=200), nullable=True),
        sa.Column("monthly_usd", sa.Float(), nullable=False),
        sa.Column("used", sa.Float(), nullable=False),
        sa.Column("this_placement", sa.Float(), nullable=False),
        sa.Column("projected", sa.Float(), nullable=False),
        sa.Column("remaining", sa.Float(), nullable=False),
        sa.Column("over", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("placement_id", "line"),
    )
    op.create_table(
        "placement_sizing",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=300), nullable=False),
        sa.Column("model_version", sa.Integer(), nullable=True),
        sa.Column("horizon_hours", sa.Float(), nullable=False),
        sa.Column("headroom_pct", sa.Float(), nullable=False),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("placement_id", "line"),
    )
    op.create_table(
        "placement_sizing_resources",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=20), nullable=False),
        sa.Column("declared", sa.Float(), nullable=False),
        sa.Column("forecast", sa.Float(), nullable=False),
        sa.Column("p50_peak", sa.Float(), nullable=False),
        sa.Column("p95_peak", sa.Float(), nullable=False),
        sa.Column("change_pct", sa.Float(), nullable=False),
        sa.Column("method", sa.String(length=80), nullable=False),
        sa.ForeignKeyConstraint(
            ["placement_id", "line"],
            ["placement_sizing.placement_id", "placement_sizing.line"],
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("placement_id", "line", "metric"),
    )


def _batches(conn: sa.Connection, query: sa.Select[Any], key: sa.ColumnClause[Any]) -> Iterator[list[sa.Row[Any]]]:
    """Rows in batches, keyset-paginated by `key`: a database of any size in bounded memory."""
    last = ""
    while True:
        rows = conn.execute(query.where(key > last).order_by(key).limit(_BATCH)).all()
        if not rows:
            return
        yield list(rows)
        last = rows[-1].id


# ---- upgrade: documents -> rows -----------------------------------------------------------


def _rows_of(pid: str, doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(header values, child rows by table) of one stored response document."""
    snap = doc.get("price_snapshot")
    priced: dict[str, Any] = dict((snap or {}).get("pools") or {})
    stale = set((snap or {}).get("stale_pools") or ())
    nodes = list(doc.get("nodes") or ())
    unpriced = sorted(set(priced) - {str(n["pool"]) for n in nodes})
    if unpriced:  # the release that wrote these priced exactly the provisioned pools
        raise RuntimeError(f"placement {pid}: price snapshot of pools it does not provision: {unpriced}")
    sizing = doc.get("rightsizing")
    baseline = doc.get("baseline") or {}
    header = {
        "status": doc["status"],
        "cost_per_hour": doc["cost_per_hour"],
        "baseline_cost_per_hour": baseline.get("cost_per_hour"),
        "savings_pct": doc.get("savings_pct"),
        "objective_value": doc["objective_value"],
        "lower_bound_per_hour": doc["lower_bound_per_hour"],
        "gap_pct": doc["gap_pct"],
        "baseline_policy": baseline.get("policy", ""),
        "solve_ms": doc["solve_ms"],
        "egress_cost_per_hour": doc.get("egress_cost_per_hour", 0.0),
        "storage_cost_per_hour": doc.get("storage_cost_per_hour", 0.0),
        "latency_quantile": doc.get("latency_quantile") or "p50",  # documents before it were all p50
        "rejected": doc.get("rejected") or {},
        "warnings": doc.get("warnings") or [],
        "price_as_of": doc.get("price_as_of") or {},
        "catalog_version": snap.get("catalog_version") if snap else None,
        "price_stale_after_days": snap.get("stale_after_days") if snap else None,
        "sizing_declared_cost_per_hour": sizing.get("declared_cost_per_hour") if sizing else None,
        "sizing_cost_per_hour": sizing.get("cost_per_hour") if sizing else None,
        "sizing_savings_per_hour": sizing.get("savings_per_hour") if sizing else None,
        "sizing_savings_pct": sizing.get("savings_pct") if sizing else None,
    }
    children: dict[str, list[dict[str, Any]]] = {t.name: [] for t in _CHILDREN}
    for i, n in enumerate(nodes):
        price = priced.get(str(n["pool"]))
        children["placement_pools"].append(
            {
                "placement_id": pid,
                "line": i,
                "pool": n["pool"],
                "count": n["count"],
                "cost_per_hour": n["cost_per_hour"],
                "price_per_hour": price["price_per_hour"] if price else None,
                "price_source": price["price_source"] if price else None,
                "price_as_of": price["price_as_of"] if price else None,
                "price_stale": (n["pool"] in stale) if price else None,
            }
        )
    for i, a in enumerate(doc.get("assignments") or ()):
        ex = a.get("explanation") or {}
        children["placement_assignments"].append(
            {
                "placement_id": pid,
                "line": i,
                "workload": a["workload"],
                "pool": a["pool"],
                "site": a["site"],
                "replicas": a["replicas"],
                "latency_ms": a.get("latency_ms") or {},
                "latency_slo_margin_ms": a.get("latency_slo_margin_ms") or {},
                "cost_per_hour": ex.get("cost_per_hour", 0.0),
                "binding": ex.get("binding") or [],
                "next_best": ex.get("next_best"),
                "next_best_extra_per_hour": ex.get("next_best_extra_per_hour"),
                "cost_breakdown": ex.get("cost_breakdown") or {},
            }
        )
    for i, b in enumerate(doc.get("budget") or ()):
        children["placement_budgets"].append({"placement_id": pid, "line": i, **{k: b[k] for k in _BUDGET_KEYS}})
    for i, w in enumerate((sizing or {}).get("workloads") or ()):
        children["placement_sizing"].append(
            {
                "placement_id": pid,
                "line": i,
                "workload": w["workload"],
                "source": w["source"],
                "model_version": w.get("model_version"),
                "horizon_hours": w["horizon_hours"],
                "headroom_pct": w["headroom_pct"],
                "warnings": w.get("warnings") or [],
            }
        )
        for metric in _METRICS:
            r = w.get(metric)
            if r:
                children["placement_sizing_resources"].append(
                    {"placement_id": pid, "line": i, "metric": metric, **{k: r[k] for k in _RESOURCE_KEYS}}
                )
    return header, children


_BUDGET_KEYS = ("team", "monthly_usd", "used", "this_placement", "projected", "remaining", "over")
_RESOURCE_KEYS = ("declared", "forecast", "p50_peak", "p95_peak", "change_pct", "method")


def upgrade() -> None:
    _create_tables()
    with op.batch_alter_table("placements") as batch:
        for name, type_ in _REQUIRED + _OPTIONAL:
            batch.add_column(sa.Column(name, type_, nullable=True))
    conn = op.get_bind()
    copied = ("status", "cost_per_hour", "baseline_cost_per_hour", "savings_pct")
    set_header = (
        sa.update(_HEADER)
        .where(_HEADER.c.id == sa.bindparam("b_id"))
        .values({c: sa.bindparam(f"b_{c}") for c in copied})
        .values({name: sa.bindparam(f"b_{name}", type_=type_) for name, type_ in _REQUIRED + _OPTIONAL})
    )
    for rows in _batches(conn, sa.select(_HEADER.c.id, _HEADER.c.result), _HEADER.c.id):
        headers: list[dict[str, Any]] = []
        children: dict[str, list[dict[str, Any]]] = {t.name: [] for t in _CHILDREN}
        for r in rows:
            header, child = _rows_of(r.id, dict(r.result))
            headers.append({"b_id": r.id, **{f"b_{k}": v for k, v in header.items()}})
            for name, more in child.items():
                children[name] += more
        conn.execute(set_header, headers)
        for table in _CHILDREN:  # parents first: the sizing resources reference the sizing rows
            if children[table.name]:
                conn.execute(sa.insert(table), children[table.name])
    with op.batch_alter_table("placements") as batch:
        for name, type_ in _REQUIRED:
            batch.alter_column(name, existing_type=type_, nullable=False)
        batch.drop_column("result")


# ---- downgrade: rows -> documents ---------------------------------------------------------


def _by_placement(conn: sa.Connection, table: sa.TableClause, ids: list[str]) -> dict[str, list[sa.Row[Any]]]:
    out: dict[str, list[sa.Row[Any]]] = {i: [] for i in ids}
    order = [table.c.placement_id, table.c.line] + ([table.c.metric] if "metric" in table.c else [])
    for r in conn.execute(sa.select(table).where(table.c.placement_id.in_(ids)).order_by(*order)):
        out[r.placement_id].append(r)
    return out


def _document(h: sa.Row[Any], kids: dict[str, list[sa.Row[Any]]]) -> dict[str, Any]:
    """The v1 response document of one placement, key for key as the previous release stored it."""
    pools = kids["placement_pools"]
    snapshot = None
    if h.catalog_version is not None:
        priced = [p for p in pools if p.price_per_hour is not None]
        snapshot = {
            "catalog_version": h.catalog_version,
            "pools": {
                p.pool: {"price_per_hour": p.price_per_hour, "price_source": p.price_source, "price_as_of": p.price_as_of}
                for p in priced
            },
            "stale_after_days": h.price_stale_after_days,
            "stale_pools": sorted(p.pool for p in priced if p.price_stale),
        }
    sizing = None
    if h.sizing_cost_per_hour is not None:
        resources: dict[int, dict[str, Any]] = {}
        for r in kids["placement_sizing_resources"]:
            resources.setdefault(r.line, {})[r.metric] = {k: getattr(r, k) for k in _RESOURCE_KEYS}
        sizing = {
            "workloads": [
                {
                    "workload": w.workload,
                    "source": w.source,
                    "model_version": w.model_version,
                    "horizon_hours": w.horizon_hours,
                    "headroom_pct": w.headroom_pct,
                    "cpu": resources.get(w.line, {}).get("cpu"),
                    "memory_gib": resources.get(w.line, {}).get("memory_gib"),
                    "warnings": list(w.warnings),
                }
                for w in kids["placement_sizing"]
            ],
            "declared_cost_per_hour": h.sizing_declared_cost_per_hour,
            "cost_per_hour": h.sizing_cost_per_hour,
            "savings_per_hour": h.sizing_savings_per_hour,
            "savings_pct": h.sizing_savings_pct,
        }
    budgets = [{k: getattr(b, k) for k in _BUDGET_KEYS} for b in kids["placement_budgets"]]
    return {
        "id": h.id,
        "name": h.name,
        "created_at": _utc(h.created_at).isoformat(),
        "status": h.status,
        "objective_value": h.objective_value,
        "cost_per_hour": h.cost_per_hour,
        "cost_per_month": round(h.cost_per_hour * 730.0, 2),
        "lower_bound_per_hour": h.lower_bound_per_hour,
        "gap_pct": h.gap_pct,
        "baseline": {"policy": h.baseline_policy, "cost_per_hour": h.baseline_cost_per_hour},
        "savings_pct": h.savings_pct,
        "solve_ms": h.solve_ms,
        "nodes": [{"pool": p.pool, "count": p.count, "cost_per_hour": p.cost_per_hour} for p in pools],
        "assignments": [
            {
                "workload": a.workload,
                "pool": a.pool,
                "site": a.site,
                "replicas": a.replicas,
                "latency_ms": dict(a.latency_ms),
                "latency_slo_margin_ms": dict(a.latency_slo_margin_ms),
                "explanation": {
                    "cost_per_hour": a.cost_per_hour,
                    "binding": list(a.binding),
                    "next_best": a.next_best,
                    "next_best_extra_per_hour": a.next_best_extra_per_hour,
                    "cost_breakdown": dict(a.cost_breakdown),
                },
            }
            for a in kids["placement_assignments"]
        ],
        "egress_cost_per_hour": h.egress_cost_per_hour,
        "storage_cost_per_hour": h.storage_cost_per_hour,
        "latency_quantile": h.latency_quantile,
        "rejected": dict(h.rejected),
        "warnings": list(h.warnings),
        "price_as_of": dict(h.price_as_of),
        "price_snapshot": snapshot,
        "rightsizing": sizing,
        "budget": budgets or None,
    }


def _utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def downgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("result", sa.JSON(), nullable=True))
    conn = op.get_bind()
    header = _placements(
        sa.column("name", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        *(sa.column(name, type_) for name, type_ in _REQUIRED + _OPTIONAL),
    )
    set_result = (
        sa.update(_HEADER)
        .where(_HEADER.c.id == sa.bindparam("b_id"))
        .values(result=sa.bindparam("b_result", type_=sa.JSON()))
    )
    for rows in _batches(conn, sa.select(header), header.c.id):
        ids = [r.id for r in rows]
        kids = {t.name: _by_placement(conn, t, ids) for t in _CHILDREN}
        docs = [{"b_id": h.id, "b_result": _document(h, {n: k[h.id] for n, k in kids.items()})} for h in rows]
        conn.execute(set_result, docs)
    with op.batch_alter_table("placements") as batch:
        batch.alter_column("result", existing_type=sa.JSON(), nullable=False)
        for name, _type in _REQUIRED + _OPTIONAL:
            batch.drop_column(name)
    op.drop_table("placement_sizing_resources")
    op.drop_table("placement_sizing")
    op.drop_table("placement_budgets")
    op.drop_index("ix_placement_assignments_site", table_name="placement_assignments")
    op.drop_table("placement_assignments")
    op.drop_table("placement_pools")
