"""savings against what the user would otherwise run: every baseline of a placement, and the
ledger's headline baseline apart from the greedy one

Placements gain `baselines` (every baseline priced, the headline first). Stored placements keep
their one baseline, the greedy per-workload scheduler, in the header: `baselines` stays NULL.

The ledger's `baseline_cost_per_hour` held the greedy figure. It moves to `greedy_cost_per_hour`
(the same figure, copied: nothing recomputed), and the headline baseline of those rows is "not
computed": the home cloud's Kubernetes packer needs the catalog of the day the placement was
solved, which is not stored, so it cannot be recomputed honestly. Those rows get
`baseline_policy` NULL, `has_baseline` false and their own cost as baseline, so no savings are
claimed for them (the ledger's rule for an unknown baseline). The downgrade puts the greedy
figure back where it was.

Revision ID: 0018
Revises: 0014
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0014"
branch_labels = None
depends_on = None

LEDGER = sa.table(
    "finops_ledger",
    sa.column("cost_per_hour", sa.Float()),
    sa.column("baseline_cost_per_hour", sa.Float()),
    sa.column("has_baseline", sa.Boolean()),
    sa.column("baseline_policy", sa.String()),
    sa.column("greedy_cost_per_hour", sa.Float()),
    sa.column("savings_per_hour", sa.Float()),
    sa.column("savings_per_month", sa.Float()),
)
ITEMS = sa.table(
    "finops_ledger_items",
    sa.column("cost_per_hour", sa.Float()),
    sa.column("baseline_cost_per_hour", sa.Float()),
    sa.column("greedy_cost_per_hour", sa.Float()),
)


def upgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("baselines", sa.JSON(), nullable=True))
    with op.batch_alter_table("finops_ledger") as batch:
        batch.add_column(sa.Column("baseline_policy", sa.String(80), nullable=True))
        batch.add_column(sa.Column("greedy_cost_per_hour", sa.Float(), nullable=True))
    with op.batch_alter_table("finops_ledger_items") as batch:
        batch.add_column(sa.Column("greedy_cost_per_hour", sa.Float(), nullable=True))
    # the old baseline was greedy's (or the row's own cost where greedy found none)
    op.execute(
        LEDGER.update().values(
            greedy_cost_per_hour=sa.case((LEDGER.c.has_baseline, LEDGER.c.baseline_cost_per_hour), else_=None),
            baseline_cost_per_hour=LEDGER.c.cost_per_hour,
            has_baseline=False,
            baseline_policy=None,
            savings_per_hour=0.0,
            savings_per_month=0.0,
        )
    )
    op.execute(
        ITEMS.update().values(
            greedy_cost_per_hour=ITEMS.c.baseline_cost_per_hour, baseline_cost_per_hour=ITEMS.c.cost_per_hour
        )
    )


def downgrade() -> None:
    # back to one baseline, the greedy one; rows recorded since 0018 keep their headline where
    # greedy is unknown
    op.execute(
        LEDGER.update()
        .where(LEDGER.c.greedy_cost_per_hour.is_not(None))
        .values(
            baseline_cost_per_hour=LEDGER.c.greedy_cost_per_hour,
            has_baseline=True,
            savings_per_hour=LEDGER.c.greedy_cost_per_hour - LEDGER.c.cost_per_hour,
            savings_per_month=(LEDGER.c.greedy_cost_per_hour - LEDGER.c.cost_per_hour) * 730.0,
        )
    )
    op.execute(
        ITEMS.update()
        .where(ITEMS.c.greedy_cost_per_hour.is_not(None))
        .values(baseline_cost_per_hour=ITEMS.c.greedy_cost_per_hour)
    )
    with op.batch_alter_table("finops_ledger_items") as batch:
        batch.drop_column("greedy_cost_per_hour")
    with op.batch_alter_table("finops_ledger") as batch:
        batch.drop_column("greedy_cost_per_hour")
        batch.drop_column("baseline_policy")
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("baselines")
