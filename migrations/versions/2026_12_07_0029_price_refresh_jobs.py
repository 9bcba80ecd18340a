"""price refreshes are jobs: pricing_jobs rows move to jobs (kind "price-refresh"), the table goes

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

KIND = "price-refresh"
PROBLEM_TYPE = "https://placement-broker.dev/problems/pricing-unavailable"

pricing_jobs = sa.table(
    "pricing_jobs",
    sa.column("id", sa.String),
    sa.column("kind", sa.String),
    sa.column("status", sa.String),
    sa.column("params", sa.JSON),
    sa.column("result", sa.JSON),
    sa.column("error", sa.Text),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
)
jobs = sa.table(
    "jobs",
    sa.column("id", sa.String),
    sa.column("tenant", sa.String),
    sa.column("kind", sa.String),
    sa.column("status", sa.String),
    sa.column("request", sa.JSON),
    sa.column("result", sa.JSON),
    sa.column("error", sa.JSON),
    sa.column("attempts", sa.Integer),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("started_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
)


def _problem(detail: str, provider: object) -> dict[str, object]:
    """The failed refresh's error as the job mechanism stores errors: a problem document."""
    return {
        "type": PROBLEM_TYPE,
        "title": "Pricing unavailable",
        "status": 503,
        "detail": detail,
        "instance": "/v1/pricing/refresh",
        "provider": provider,
    }


def upgrade() -> None:
    bind = op.get_bind()
    # the timestamps copied as stored (each backend's own format), the rest read and written
    # here: the error becomes a problem document
    bind.execute(
        jobs.insert().from_select(
            ["id", "tenant", "kind", "status", "request", "attempts", "created_at", "finished_at"],
            sa.select(
                pricing_jobs.c.id,
                sa.literal("default"),
                sa.literal(KIND),
                pricing_jobs.c.status,
                pricing_jobs.c.params,
                sa.case((pricing_jobs.c.status == "queued", 0), else_=1),
                pricing_jobs.c.created_at,
                pricing_jobs.c.finished_at,
            ),
        )
    )
    rows = bind.execute(sa.select(pricing_jobs.c.id, pricing_jobs.c.params, pricing_jobs.c.result, pricing_jobs.c.error))
    for job_id, params, result, error in rows.all():
        provider = (params or {}).get("provider") if isinstance(params, dict) else None
        bind.execute(
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(result=result, error=_problem(error, provider) if error else None)
        )
    # a refresh left running by a process that stopped has no heartbeat: started long ago, so
    # the runner's abandoned-job check fails it rather than leaving it running for ever
    bind.execute(
        jobs.update()
        .where(jobs.c.kind == KIND, jobs.c.status == "running")
        .values(started_at=datetime(2000, 1, 1, tzinfo=UTC))
    )
    op.drop_table("pricing_jobs")


def downgrade() -> None:
    op.create_table(
        "pricing_jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    bind = op.get_bind()
    bind.execute(
        pricing_jobs.insert().from_select(
            ["id", "kind", "status", "params", "created_at", "finished_at"],
            sa.select(jobs.c.id, jobs.c.kind, jobs.c.status, jobs.c.request, jobs.c.created_at, jobs.c.finished_at).where(
                jobs.c.kind == KIND
            ),
        )
    )
    rows = bind.execute(sa.select(jobs.c.id, jobs.c.result, jobs.c.error).where(jobs.c.kind == KIND))
    for job_id, result, error in rows.all():
        detail = error.get("detail") if isinstance(error, dict) else error
        bind.execute(pricing_jobs.update().where(pricing_jobs.c.id == job_id).values(result=result, error=detail))
    bind.execute(jobs.delete().where(jobs.c.kind == KIND))
