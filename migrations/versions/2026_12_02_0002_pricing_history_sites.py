"""pricing: price history, list prices, discount rules, refresh jobs, site definitions, site storage

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 12:30:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('price_history',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('pool_id', sa.String(length=300), nullable=False),
    sa.Column('price_per_hour', sa.Float(), nullable=False),
    sa.Column('list_price_per_hour', sa.Float(), nullable=False),
    sa.Column('source', sa.String(length=40), nullable=False),
    sa.Column('effective_at', sa.String(length=40), nullable=False),
    sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('refresh_id', sa.String(length=40), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('price_history', schema=None) as batch_op:
        batch_op.create_index('ix_price_history_pool_recorded', ['pool_id', 'recorded_at'], unique=False)

    op.create_table('list_prices',
    sa.Column('pool_id', sa.String(length=300), nullable=False),
    sa.Column('price_per_hour', sa.Float(), nullable=False),
    sa.Column('source', sa.String(length=40), nullable=False),
    sa.Column('as_of', sa.String(length=40), nullable=False),
    sa.PrimaryKeyConstraint('pool_id')
    )
    op.create_table('discount_rules',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('provider', sa.String(length=40), nullable=False),
    sa.Column('family', sa.String(length=80), nullable=False),
    sa.Column('region', sa.String(length=120), nullable=False),
    sa.Column('capacity_types', sa.JSON(), nullable=False),
    sa.Column('discount_pct', sa.Float(), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('pricing_jobs',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('site_definitions',
    sa.Column('site_id', sa.String(length=200), nullable=False),
    sa.Column('document', sa.JSON(), nullable=False),
    sa.Column('imported_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('site_id')
    )
    op.create_table('site_storage_prices',
    sa.Column('site', sa.String(length=200), nullable=False),
    sa.Column('tier', sa.String(length=20), nullable=False),
    sa.Column('usd_per_gb_month', sa.Float(), nullable=False),
    sa.Column('product', sa.String(length=80), nullable=False),
    sa.Column('source', sa.String(length=40), nullable=False),
    sa.Column('as_of', sa.String(length=40), nullable=False),
    sa.PrimaryKeyConstraint('site', 'tier')
    )


def downgrade() -> None:
    op.drop_table('site_storage_prices')
    op.drop_table('site_definitions')
    op.drop_table('pricing_jobs')
    op.drop_table('discount_rules')
    op.drop_table('list_prices')
    with op.batch_alter_table('price_history', schema=None) as batch_op:
        batch_op.drop_index('ix_price_history_pool_recorded')
    op.drop_table('price_history')
