"""sms messages

Revision ID: sms_0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "sms_0001"
down_revision = None
branch_labels = ("sms",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "sms_messages",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("to", sa.String(20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("provider_message_id", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sms_messages")),
    )
    op.create_index("ix_sms_messages_created_at", "sms_messages", ["created_at"])
    op.create_index("ix_sms_messages_to", "sms_messages", ["to"])


def downgrade() -> None:
    op.drop_index("ix_sms_messages_to", table_name="sms_messages")
    op.drop_index("ix_sms_messages_created_at", table_name="sms_messages")
    op.drop_table("sms_messages")
