"""latency_measurements: a tenant's own round-trip measurements

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "latency_measurements",
        sa.Column("tenant", sa.String(length=80), nullable=False),
        sa.Column("src", sa.String(length=200), nullable=False),
        sa.Column("dst", sa.String(length=200), nullable=False),
        sa.Column("statistic", sa.String(length=8), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("rtt_ms", sa.Float(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "src", "dst", "statistic", "source"),
    )


def downgrade() -> None:
    op.drop_table("latency_measurements")
