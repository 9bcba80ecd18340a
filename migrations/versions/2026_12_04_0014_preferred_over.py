"""explanations name the cheaper home a plan passed over, with its saving and why

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("placement_assignments") as batch:
        batch.add_column(sa.Column("preferred_over", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placement_assignments") as batch:
        batch.drop_column("preferred_over")
