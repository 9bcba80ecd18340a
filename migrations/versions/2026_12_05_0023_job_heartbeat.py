"""a running job's runner writes a heartbeat; a job whose heartbeat stops is failed, not left running

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: a job is given one when it is claimed (jobs running before this revision have
    # none, and are judged by their started_at)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("heartbeat_at")
