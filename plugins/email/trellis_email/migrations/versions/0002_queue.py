"""email_messages as a durable queue: attempts, due time, claim, and the secret content to send

Revision ID: email_0002
Revises: email_0001
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "email_0002"
down_revision = "email_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("email_messages") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("next_attempt_at", trellis.db.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("claim", sa.String(32), nullable=True))
        batch.add_column(sa.Column("secret_content", trellis.db.JSONType, nullable=True))
    op.create_index("ix_email_messages_due", "email_messages", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_email_messages_due", table_name="email_messages")
    with op.batch_alter_table("email_messages") as batch:
        batch.drop_column("secret_content")
        batch.drop_column("claim")
        batch.drop_column("next_attempt_at")
        batch.drop_column("attempts")
