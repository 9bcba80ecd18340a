"""forecast: usage samples and versioned forecast models

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-02 12:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('usage_samples',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('tenant', sa.String(length=80), nullable=False),
    sa.Column('series', sa.String(length=200), nullable=False),
    sa.Column('metric', sa.String(length=40), nullable=False),
    sa.Column('ts', sa.BigInteger(), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('usage_samples', schema=None) as batch_op:
        batch_op.create_index('ix_usage_samples_series_ts', ['tenant', 'series', 'metric', 'ts'], unique=False)

    op.create_table('forecast_models',
    sa.Column('version', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('metric', sa.String(length=40), nullable=False),
    sa.Column('horizon', sa.Integer(), nullable=False),
    sa.Column('step_s', sa.Integer(), nullable=False),
    sa.Column('n_series', sa.Integer(), nullable=False),
    sa.Column('train_rows', sa.Integer(), nullable=False),
    sa.Column('description', sa.JSON(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('booster', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('version')
    )


def downgrade() -> None:
    op.drop_table('forecast_models')
    with op.batch_alter_table('usage_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_usage_samples_series_ts')
    op.drop_table('usage_samples')
