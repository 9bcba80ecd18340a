"""Jobs counted by status and kind at every /metrics scrape, from an index

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06

`broker_jobs_total{kind,status}` is read from the jobs table at scrape time (whichever process ran
a job); an index on (status, kind) answers the GROUP BY without reading the jobs' documents.
Nothing is dropped by the downgrade but the index.
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_status_kind", "jobs", ["status", "kind"])


def downgrade() -> None:
    op.drop_index("ix_jobs_status_kind", table_name="jobs")
