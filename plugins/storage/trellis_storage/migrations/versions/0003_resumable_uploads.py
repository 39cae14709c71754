"""storage: resumable (tus) uploads

Revision ID: storage_0003
Revises: storage_0002
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "storage_0003"
down_revision = "storage_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "storage_uploads",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(32), nullable=False),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("folder_id", sa.String(32), nullable=True),
        sa.Column("is_public", sa.Boolean(), nullable=True),
        sa.Column("content_type", sa.String(255), nullable=True),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("location", sa.String(255), nullable=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("s3_upload_id", sa.String(1024), nullable=True),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.Column("tail_key", sa.String(255), nullable=True),
        sa.Column("tail_size", sa.BigInteger(), nullable=False),
        sa.Column("file_id", sa.String(32), nullable=True),
        sa.Column("writer", sa.String(32), nullable=True),
        sa.Column("writer_until", trellis.db.UTCDateTime(), nullable=True),
        sa.Column("expires_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("claim", sa.String(32), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_uploads")),
    )
    op.create_index(op.f("ix_storage_uploads_owner"), "storage_uploads", ["owner"])
    op.create_index(op.f("ix_storage_uploads_next_attempt_at"), "storage_uploads", ["next_attempt_at"])


def downgrade() -> None:
    op.drop_table("storage_uploads")
