"""push notifications: devices, topic subscriptions, outbox (notifications and deliveries)

Revision ID: pushNotifications_0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

import trellis.db

revision = "pushNotifications_0001"
down_revision = None
branch_labels = ("pushNotifications",)
depends_on = "core_0001"


def upgrade() -> None:
    op.create_table(
        "push_devices",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("token", sa.String(1024), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.Column("updated_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_devices")),
    )
    op.create_index("ix_push_devices_token", "push_devices", ["token"], unique=True)
    op.create_index("ix_push_devices_user_id", "push_devices", ["user_id"])
    op.create_table(
        "push_subscriptions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("topic", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_subscriptions")),
    )
    op.create_index("ix_push_subscriptions_topic_user_id", "push_subscriptions", ["topic", "user_id"], unique=True)
    op.create_index("ix_push_subscriptions_user_id", "push_subscriptions", ["user_id"])
    op.create_table(
        "push_notifications",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("target", sa.String(16), nullable=False),
        sa.Column("topic", sa.String(256), nullable=True),
        sa.Column("user_ids", trellis.db.JSONType, nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("data", trellis.db.JSONType, nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("sent", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("created_at", trellis.db.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_notifications")),
    )
    op.create_index("ix_push_notifications_created_at", "push_notifications", ["created_at"])
    op.create_table(
        "push_deliveries",
        sa.Column("notification_id", sa.String(32), nullable=False),
        sa.Column("token", sa.String(1024), nullable=False),
        sa.Column("user_id", sa.String(32), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("provider_message_id", sa.String(255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["notification_id"],
            ["push_notifications.id"],
            name=op.f("fk_push_deliveries_notification_id_push_notifications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("notification_id", "token", name=op.f("pk_push_deliveries")),
    )
    op.create_index("ix_push_deliveries_user_id", "push_deliveries", ["user_id"])


def downgrade() -> None:
    op.drop_table("push_deliveries")
    op.drop_table("push_notifications")
    op.drop_table("push_subscriptions")
    op.drop_table("push_devices")
