"""storage: files and folders

Revision ID: storage_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "storage_0001"
down_revision = None
branch_labels = ("storage",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "storage_folders",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("parent_id", sa.String(32), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["storage_folders.id"], name=op.f("fk_storage_folders_parent_id_storage_folders")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_folders")),
    )
    op.create_index(op.f("ix_storage_folders_owner"), "storage_folders", ["owner"])
    op.create_index(op.f("ix_storage_folders_parent_id"), "storage_folders", ["parent_id"])
    op.create_table(
        "storage_files",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("folder_id", sa.String(32), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("location", sa.String(255), nullable=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["folder_id"], ["storage_folders.id"], name=op.f("fk_storage_files_folder_id_storage_folders")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_files")),
    )
    op.create_index(op.f("ix_storage_files_owner"), "storage_files", ["owner"])
    op.create_index(op.f("ix_storage_files_folder_id"), "storage_files", ["folder_id"])
    op.create_index("ix_storage_files_created_at_id", "storage_files", ["created_at", "id"])


def downgrade() -> None:
    op.drop_table("storage_files")
    op.drop_table("storage_folders")
