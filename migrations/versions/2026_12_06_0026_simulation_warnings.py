"""stored simulations keep their warnings (a broker solve that ran into time_limit_s)

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: runs stored before this revision did not record their warnings
    with op.batch_alter_table("simulations") as batch:
        batch.add_column(sa.Column("warnings", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("simulations") as batch:
        batch.drop_column("warnings")
