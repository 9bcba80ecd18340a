"""Azure's constrained-vCPU sizes carry the vCPUs they run, not their parent's; tenants' family quotas

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07

`Standard_E16-4as_v5` runs 4 vCPUs at the memory and price of the 16-vCPU parent; the catalog
stored 16, so the solver packed 16 vCPUs of pods on a 4-vCPU VM. The bundled snapshot now stores
the active count (pricing/node_classes.py); this rewrites the pools a database already holds
(bundled or fed) and changes the catalog's version, so no process keeps a catalog cached with the
parents' counts. The downgrade restores the parents' counts from the size names.

`family_quotas`: a tenant's vCPU quota per provider quota group (AWS's on-demand/spot groups, Azure's
VM families), set by the operator; the solver keeps placements within them.
"""

import re
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# Standard_<series><cores>-<active><features>[_...]: written out here, a migration does not follow later code
_CONSTRAINED = re.compile(r"^Standard_[A-Z]+(?P<cores>\d+)-(?P<active>\d+)")


def _constrained_sizes() -> list[tuple[str, int, int]]:
    rows = op.get_bind().execute(
        sa.text("SELECT DISTINCT instance_type FROM pools WHERE site LIKE 'azure:%' AND instance_type LIKE 'Standard_%-%'")
    )
    out = []
    for (name,) in rows:
        m = _CONSTRAINED.match(str(name))
        if m and 0 < int(m["active"]) < int(m["cores"]):
            out.append((str(name), int(m["cores"]), int(m["active"])))
    return out


def _new_catalog_version() -> None:
    op.execute(
        sa.text("UPDATE catalog_meta SET value = :v WHERE key = 'version'").bindparams(v=uuid.uuid4().hex)
    )


def _set_vcpus(active: bool) -> None:
    stmt = sa.text("UPDATE pools SET vcpus = :v WHERE site LIKE 'azure:%' AND instance_type = :it")
    for name, cores, act in _constrained_sizes():
        op.get_bind().execute(stmt, {"v": float(act if active else cores), "it": name})
    _new_catalog_version()


def upgrade() -> None:
    _set_vcpus(active=True)
    op.create_table(
        "family_quotas",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("quota_group", sa.String(120), nullable=False),
        sa.Column("vcpus", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant", "quota_group", name="uq_family_quotas_tenant_group"),
    )
    op.create_index("ix_family_quotas_tenant", "family_quotas", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_family_quotas_tenant", table_name="family_quotas")
    op.drop_table("family_quotas")
    _set_vcpus(active=False)
