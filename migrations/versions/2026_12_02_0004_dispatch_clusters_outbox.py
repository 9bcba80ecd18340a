"""dispatch: target clusters, dispatches with their outbox, replans

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-02 12:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dispatch_clusters",
        sa.Column("tenant", sa.String(length=80), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("site", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("kubeconfig", sa.Text(), nullable=True),
        sa.Column("context", sa.String(length=200), nullable=True),
        sa.Column("gitops_dir", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name"),
    )
    op.create_index("ix_dispatch_clusters_site", "dispatch_clusters", ["site"])
    op.create_table(
        "dispatches",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=80), nullable=False),
        sa.Column("placement_id", sa.String(length=40), nullable=False),
        sa.Column("app", sa.String(length=63), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["placement_id"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("placement_id", "fingerprint", name="uq_dispatch_placement_fp"),
    )
    op.create_index("ix_dispatches_tenant", "dispatches", ["tenant"])
    op.create_index("ix_dispatches_placement_id", "dispatches", ["placement_id"])
    op.create_index("ix_dispatches_app", "dispatches", ["app"])
    op.create_index("ix_dispatches_created_at", "dispatches", ["created_at"])
    op.create_table(
        "dispatch_outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dispatch_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dispatch_id"], ["dispatches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("dispatch_id", "cluster", name="uq_outbox_dispatch_cluster"),
    )
    op.create_index("ix_dispatch_outbox_dispatch_id", "dispatch_outbox", ["dispatch_id"])
    op.create_table(
        "replans",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=80), nullable=False),
        sa.Column("from_placement", sa.String(length=40), nullable=False),
        sa.Column("to_placement", sa.String(length=40), nullable=True),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("decision", sa.String(length=20), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["from_placement"], ["placements.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_replans_tenant", "replans", ["tenant"])
    op.create_index("ix_replans_from_placement", "replans", ["from_placement"])
    op.create_index("ix_replans_created_at", "replans", ["created_at"])


def downgrade() -> None:
    op.drop_table("replans")
    op.drop_table("dispatch_outbox")
    op.drop_table("dispatches")
    op.drop_table("dispatch_clusters")
