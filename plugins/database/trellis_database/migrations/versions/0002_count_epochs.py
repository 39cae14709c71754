"""database module: count epochs (exact list counts across a Redis outage)

Revision ID: database_0002
Revises: database_0001
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "database_0002"
down_revision = "database_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "database_count_epochs",
        sa.Column("table_name", sa.String(63), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("table_name", name=op.f("pk_database_count_epochs")),
    )


def downgrade() -> None:
    op.drop_table("database_count_epochs")
