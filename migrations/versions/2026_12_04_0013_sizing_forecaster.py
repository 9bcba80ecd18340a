"""right-sizing names its forecaster: selected forecaster, its backtest error, regime shift

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("placement_sizing_resources") as batch:
        batch.add_column(sa.Column("forecaster", sa.String(80), nullable=True))
        batch.add_column(sa.Column("backtest_mae", sa.Float(), nullable=True))
        batch.add_column(sa.Column("regime_shift", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("placement_sizing_resources") as batch:
        batch.drop_column("regime_shift")
        batch.drop_column("backtest_mae")
        batch.drop_column("forecaster")
