"""stored placements say what proves their lower bound (issue 37)

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: placements stored before this revision did not record it
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("bound_kind", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("bound_kind")
