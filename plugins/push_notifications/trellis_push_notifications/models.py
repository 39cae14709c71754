"""Device tokens, topic subscriptions, and the outbox: one row per send, one per device it went to.

User ids are plain strings, not foreign keys: the Authentication module's ``trellis_user_deleted``
hook removes a user's devices and subscriptions in the same transaction as the user.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow

PLATFORMS = ("android", "ios", "web")
SENT = "sent"
FAILED = "failed"
# FCM registration tokens are ~160 characters; 1024 leaves room and stays indexable everywhere.
MAX_TOKEN_LENGTH = 1024
MAX_TOPIC_LENGTH = 256


class PushDevice(Base):
    """A device token; a token identifies one app install, so it belongs to one user at a time."""

    __tablename__ = "push_devices"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(32))
    token: Mapped[str] = mapped_column(String(MAX_TOKEN_LENGTH))
    platform: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ix_push_devices_token", "token", unique=True),
        Index("ix_push_devices_user_id", "user_id"),
    )


class PushSubscription(Base):
    """A user's subscription to a topic: a topic send reaches every device of every subscriber."""

    __tablename__ = "push_subscriptions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    topic: Mapped[str] = mapped_column(String(MAX_TOPIC_LENGTH))
    user_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        # topic first: a topic send looks up its subscribers by topic.
        Index("ix_push_subscriptions_topic_user_id", "topic", "user_id", unique=True),
        Index("ix_push_subscriptions_user_id", "user_id"),
    )


class PushNotification(Base):
    """One send (to a user, several users, or a topic): what was sent, through which provider, with what result."""

    __tablename__ = "push_notifications"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    target: Mapped[str] = mapped_column(String(16))  # user | users | topic
    topic: Mapped[str | None] = mapped_column(String(MAX_TOPIC_LENGTH), nullable=True)
    user_ids: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    title: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    provider: Mapped[str] = mapped_column(String(16))
    sent: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (Index("ix_push_notifications_created_at", "created_at"),)


class PushDelivery(Base):
    """The notification to one device: written in bulk, thousands of rows per topic send, so kept narrow."""

    __tablename__ = "push_deliveries"

    notification_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("push_notifications.id", ondelete="CASCADE"), primary_key=True
    )
    token: Mapped[str] = mapped_column(String(MAX_TOKEN_LENGTH), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(32))
    platform: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    provider_message_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (Index("ix_push_deliveries_user_id", "user_id"),)
