"""storage: a resumable upload keeps its Upload-Metadata header as the client sent it

Revision ID: storage_0004
Revises: storage_0003
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "storage_0004"
down_revision = "storage_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("storage_uploads") as batch:
        batch.add_column(sa.Column("metadata_header", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("storage_uploads") as batch:
        batch.drop_column("metadata_header")
