"""forecast models belong to the tenant whose usage they learned from

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # every model stored before this revision was trained by `broker forecast train`, which read
    # the default tenant's usage only: it is the default tenant's
    with op.batch_alter_table("forecast_models") as batch:
        batch.add_column(sa.Column("tenant", sa.String(length=80), nullable=False, server_default="default"))
        batch.create_index("ix_forecast_models_tenant", ["tenant"])


def downgrade() -> None:
    with op.batch_alter_table("forecast_models") as batch:
        batch.drop_index("ix_forecast_models_tenant")
        batch.drop_column("tenant")
