"""instance-type facts from live feeds (processor, GPU memory, bare metal) for instance requirements

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_type_facts",
        sa.Column("provider", sa.String(20), primary_key=True),
        sa.Column("instance_type", sa.String(120), primary_key=True),
        sa.Column("processor", sa.String(200), nullable=True),
        sa.Column("gpu_memory_gib", sa.Float(), nullable=True),
        sa.Column("bare_metal", sa.Boolean(), nullable=True),
        sa.Column("as_of", sa.String(40), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("instance_type_facts")
