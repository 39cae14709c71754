"""email templates and sent messages

Revision ID: email_0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "email_0001"
down_revision = None
branch_labels = ("email",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "email_templates",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("variables", trellis.db.JSONType, nullable=False),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("external_provider", sa.String(20), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_templates")),
        sa.UniqueConstraint("name", name=op.f("uq_email_templates_name")),
    )
    op.create_table(
        "email_messages",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("to", sa.Text(), nullable=False),
        sa.Column("sender", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("template_name", sa.String(200), nullable=True),
        sa.Column("provider", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("provider_message_id", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_messages")),
    )
    op.create_index("ix_email_messages_created_at", "email_messages", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_email_messages_created_at", table_name="email_messages")
    op.drop_table("email_messages")
    op.drop_table("email_templates")
