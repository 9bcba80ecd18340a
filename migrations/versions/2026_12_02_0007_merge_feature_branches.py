"""merge the feature branches (pricing, forecast, dispatch, service, finops) into one head

Revision ID: 0007
Revises: 0002, 0003, 0004, 0005, 0006
Create Date: 2026-12-02
"""

revision = "0007"
down_revision = ("0002", "0003", "0004", "0005", "0006")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
