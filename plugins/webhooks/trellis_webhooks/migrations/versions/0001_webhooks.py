"""webhooks, their delivery queue and the dispatch cursor

Revision ID: webhooks_0001
Revises:
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "webhooks_0001"
down_revision = None
branch_labels = ("webhooks",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", trellis.db.JSONType, nullable=False),
        sa.Column("secret", sa.String(200), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_table(
        "webhooks_deliveries",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("webhook_id", sa.String(32), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column("event", sa.String(255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("claim", sa.String(32), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("delivered_at", trellis.db.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["webhook_id"], ["webhooks.id"], name=op.f("fk_webhooks_deliveries_webhook_id_webhooks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks_deliveries")),
        sa.UniqueConstraint("webhook_id", "event_id", name=op.f("uq_webhooks_deliveries_webhook_id")),
    )
    op.create_index("ix_webhooks_deliveries_due", "webhooks_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_webhooks_deliveries_webhook_created", "webhooks_deliveries", ["webhook_id", "created_at"])
    op.create_table(
        "webhooks_cursor",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_webhooks_cursor")),
    )


def downgrade() -> None:
    op.drop_table("webhooks_cursor")
    op.drop_index("ix_webhooks_deliveries_webhook_created", table_name="webhooks_deliveries")
    op.drop_index("ix_webhooks_deliveries_due", table_name="webhooks_deliveries")
    op.drop_table("webhooks_deliveries")
    op.drop_table("webhooks")
