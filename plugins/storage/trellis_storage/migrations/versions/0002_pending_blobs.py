"""storage: the journal of blobs that may have no record (uploads in progress, deleted files)

Revision ID: storage_0002
Revises: storage_0001
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "storage_0002"
down_revision = "storage_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "storage_pending_blobs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(8), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("location", sa.String(255), nullable=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_pending_blobs")),
    )
    op.create_index(op.f("ix_storage_pending_blobs_created_at"), "storage_pending_blobs", ["created_at"])


def downgrade() -> None:
    op.drop_table("storage_pending_blobs")
