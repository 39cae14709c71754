"""core: the project apply counter (trellis.project): one row, moved by every apply

Revision ID: core_0008
Revises: core_0007
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from trellis.db import UTCDateTime

revision = "core_0008"
down_revision = "core_0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "core_project_revision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("applied_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_core_project_revision")),
    )
    op.bulk_insert(table, [{"id": 1, "revision": 0, "applied_at": None}])


def downgrade() -> None:
    op.drop_table("core_project_revision")
