"""A workload's team is its labels.team, else the request's team: budgets and the ledger agree

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06

Budgets counted a placement under the request's `team`, the savings ledger under each workload's
`labels.team` (`(unlabelled)` without one). Both now use one rule (a workload's `labels.team`, else
the request's `team`): a budget commitment keeps its cost per team (`team_costs`), and ledger items
recorded `(unlabelled)` of a placement whose request names a team are that team's. A commitment
stored before keeps counting whole under the request's team until its name is placed again.
The downgrade drops `team_costs`; the ledger's teams stay as corrected.
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

NO_TEAM = "(unlabelled)"


def upgrade() -> None:
    with op.batch_alter_table("budget_commitments") as batch:
        batch.add_column(sa.Column("team_costs", sa.JSON(), nullable=True))
    conn = op.get_bind()
    commitments = sa.table(
        "budget_commitments",
        sa.column("tenant", sa.String),
        sa.column("name", sa.String),
        sa.column("team", sa.String),
        sa.column("cost_per_month", sa.Float),
        sa.column("team_costs", sa.JSON),
    )
    for tenant, name, team, cost in conn.execute(
        sa.select(commitments.c.tenant, commitments.c.name, commitments.c.team, commitments.c.cost_per_month)
    ).all():
        conn.execute(
            commitments.update()
            .where(commitments.c.tenant == tenant, commitments.c.name == name)
            .values(team_costs={team: cost} if team else {})
        )
    with op.batch_alter_table("budget_commitments") as batch:
        batch.alter_column("team_costs", existing_type=sa.JSON(), nullable=False)

    placements = sa.table("placements", sa.column("id", sa.String), sa.column("request", sa.JSON))
    items = sa.table("finops_ledger_items", sa.column("placement_id", sa.String), sa.column("team", sa.String))
    unlabelled = sa.select(items.c.placement_id).where(items.c.team == NO_TEAM).distinct()
    for pid, request in conn.execute(
        sa.select(placements.c.id, placements.c.request).where(placements.c.id.in_(unlabelled))
    ).all():
        team = (request or {}).get("team")
        if team:
            conn.execute(
                items.update().where(items.c.placement_id == pid, items.c.team == NO_TEAM).values(team=str(team))
            )


def downgrade() -> None:
    with op.batch_alter_table("budget_commitments") as batch:
        batch.drop_column("team_costs")
