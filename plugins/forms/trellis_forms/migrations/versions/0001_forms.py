"""forms and submissions

Revision ID: forms_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "forms_0001"
down_revision = None
branch_labels = ("forms",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "forms",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("fields", trellis.db.JSONType, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("forward_to", sa.String(320), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forms")),
        sa.UniqueConstraint("name", name=op.f("uq_forms_name")),
    )
    op.create_table(
        "forms_submissions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("form_id", sa.String(32), nullable=False),
        sa.Column("data", trellis.db.JSONType, nullable=False),
        sa.Column("forward_status", sa.String(20), nullable=True),
        sa.Column("forward_error", sa.Text(), nullable=True),
        sa.Column("forward_message_id", sa.String(32), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["form_id"], ["forms.id"], name=op.f("fk_forms_submissions_form_id_forms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forms_submissions")),
    )
    op.create_index("ix_forms_submissions_form_created", "forms_submissions", ["form_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_forms_submissions_form_created", table_name="forms_submissions")
    op.drop_table("forms_submissions")
    op.drop_table("forms")
