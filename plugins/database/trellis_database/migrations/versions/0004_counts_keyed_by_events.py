"""database module: list counts are keyed by the event log's change number; the epochs table goes

Revision ID: database_0004
Revises: database_0003
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from trellis.db import UTCDateTime

revision = "database_0004"
down_revision = "database_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("database_count_epochs")


def downgrade() -> None:
    # Back to an empty table: the older code then treats every table as announced (counts stay exact).
    op.create_table(
        "database_count_epochs",
        sa.Column("table_name", sa.String(length=63), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("counted_until", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("table_name", name=op.f("pk_database_count_epochs")),
    )
