"""finops savings ledger

Revision ID: 0006
Revises: 0001
Create Date: 2026-12-02 12:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "finops_ledger",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=80), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("baseline_cost_per_hour", sa.Float(), nullable=False),
        sa.Column("has_baseline", sa.Boolean(), nullable=False),
        sa.Column("savings_per_hour", sa.Float(), nullable=False),
        sa.Column("savings_per_month", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("placement_id"),
    )
    op.create_index("ix_finops_ledger_tenant_created", "finops_ledger", ["tenant", "created_at"])
    op.create_index("ix_finops_ledger_tenant_name", "finops_ledger", ["tenant", "name"])
    op.create_table(
        "finops_ledger_items",
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("team", sa.String(length=200), nullable=False),
        sa.Column("provider", sa.String(length=40), nullable=False),
        sa.Column("site", sa.String(length=200), nullable=True),
        sa.Column("pool", sa.String(length=300), nullable=True),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("unit_price_per_hour", sa.Float(), nullable=False),
        sa.Column("list_unit_price_per_hour", sa.Float(), nullable=False),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("baseline_cost_per_hour", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["finops_ledger.placement_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("placement_id", "line"),
    )


def downgrade() -> None:
    op.drop_table("finops_ledger_items")
    op.drop_index("ix_finops_ledger_tenant_name", table_name="finops_ledger")
    op.drop_index("ix_finops_ledger_tenant_created", table_name="finops_ledger")
    op.drop_table("finops_ledger")
