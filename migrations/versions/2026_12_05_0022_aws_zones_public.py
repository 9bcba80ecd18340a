"""AWS Local and Wavelength Zones are public sites, as the contract's kinds mean

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05

The contract's `edge` is an owned site of fixed capacity named `edge:<name>`; the bundled
catalog called AWS's zones (`aws:us-east-1-bos-1`, bought as the region's nodes are) `edge`.
The catalog's version changes with them, so no process keeps a catalog cached with the old kinds.
"""

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# a zone's code is its parent region's and more: us-east-1-bos-1, eu-west-3-wl1-cmn1
_ZONE = "aws:%-%-%-%-%"


def _new_catalog_version() -> None:
    op.execute(
        sa.text("UPDATE catalog_meta SET value = :v WHERE key = 'version'").bindparams(v=uuid.uuid4().hex)
    )


def upgrade() -> None:
    op.execute(sa.text("UPDATE sites SET kind = 'public' WHERE provider = 'aws' AND kind = 'edge'"))
    _new_catalog_version()


def downgrade() -> None:
    op.execute(sa.text("UPDATE sites SET kind = 'edge' WHERE provider = 'aws' AND id LIKE :z").bindparams(z=_ZONE))
    _new_catalog_version()
