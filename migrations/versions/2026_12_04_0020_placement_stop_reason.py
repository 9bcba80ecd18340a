"""stored placements say the solver's time limit and why it stopped (issue 26)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: placements stored before this revision were not asked why their solver stopped
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("time_limit_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("stop_reason")
        batch.drop_column("time_limit_s")
