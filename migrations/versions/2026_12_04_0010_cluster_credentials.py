"""dispatch clusters: tenants' encrypted kubeconfigs and GitOps repository URLs

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 15:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("kubeconfig_sealed", sa.Text()),
    ("gitops_repo", sa.Text()),
    ("gitops_repo_sealed", sa.Text()),
    ("gitops_branch", sa.String(length=200)),
    ("gitops_path", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("dispatch_clusters") as batch:
        for name, type_ in _COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dispatch_clusters") as batch:
        for name, _type in reversed(_COLUMNS):
            batch.drop_column(name)
