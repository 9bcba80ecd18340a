"""exact packing: every replica on a concrete node, stored per provisioned pool, and what packing changed

Revision ID: 0019
Revises: 0017
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("placement_pools") as batch:
        batch.add_column(sa.Column("node_replicas", sa.JSON(), nullable=True))
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("packing", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("packing")
    with op.batch_alter_table("placement_pools") as batch:
        batch.drop_column("node_replicas")
