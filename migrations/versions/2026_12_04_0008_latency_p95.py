"""latency: a conservative (p95) RTT beside the typical (median) one

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("latency") as batch_op:
        batch_op.add_column(sa.Column("rtt_p95_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("latency") as batch_op:
        batch_op.drop_column("rtt_p95_ms")
