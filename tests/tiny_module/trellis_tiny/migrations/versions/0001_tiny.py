"""tiny notes

Revision ID: tiny_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

revision = "tiny_0001"
down_revision = None
branch_labels = ("tiny",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "tiny_notes",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("text", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tiny_notes")),
    )


def downgrade() -> None:
    op.drop_table("tiny_notes")
