"""storage: tus concatenation (partial uploads and the final upload made of them)

Revision ID: storage_0005
Revises: storage_0004
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "storage_0005"
down_revision = "storage_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("storage_uploads") as batch:
        batch.add_column(sa.Column("concat", sa.String(8), nullable=True))
        batch.add_column(sa.Column("concat_parts", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("concat_into", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("storage_uploads") as batch:
        batch.drop_column("concat_into")
        batch.drop_column("concat_parts")
        batch.drop_column("concat")
