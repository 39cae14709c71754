"""core: backups (trellis.backups): the archives' records and the restore lock (the latest restore's record)

Revision ID: core_0005
Revises: core_0004
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

from trellis.db import UTCDateTime

revision = "core_0005"
down_revision = "core_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "core_backups",
        sa.Column("name", sa.String(160), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("scheduled", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("store", sa.String(10), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_core_backups")),
    )
    op.create_table(
        "core_backup_locks",
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=False),
        sa.Column("backup", sa.String(160), nullable=True),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_core_backup_locks")),
    )


def downgrade() -> None:
    op.drop_table("core_backup_locks")
    op.drop_table("core_backups")
