"""ledger items keep the negotiated on-demand price apart from the public list price (FOCUS 1.2)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("finops_ledger_items") as batch:
        batch.add_column(sa.Column("contracted_unit_price_per_hour", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("finops_ledger_items") as batch:
        batch.drop_column("contracted_unit_price_per_hour")
