"""a dispatch may apply one cluster several times, once per migration wave: rows unique by seq

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dispatch_outbox") as batch:
        batch.drop_constraint("uq_outbox_dispatch_cluster", type_="unique")
        batch.create_unique_constraint("uq_outbox_dispatch_seq", ["dispatch_id", "seq"])


def downgrade() -> None:
    # only possible while no dispatch has two rows for one cluster (no migration waves applied)
    with op.batch_alter_table("dispatch_outbox") as batch:
        batch.drop_constraint("uq_outbox_dispatch_seq", type_="unique")
        batch.create_unique_constraint("uq_outbox_dispatch_cluster", ["dispatch_id", "cluster"])
