"""Webhooks tables: the registered endpoints, the delivery queue (which is also the log).
The dispatch cursor is a durable consumer of the core (``trellis.events.consumer``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


class Webhook(Base):
    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    url: Mapped[str] = mapped_column(String(2048))
    # Event patterns such as "database.*.create" (see patterns.py).
    events: Mapped[list[str]] = mapped_column(JSONType, default=list)
    secret: Mapped[str] = mapped_column(String(200))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    description: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    # Its creation or its last reactivation: a webhook gets the events recorded from then on, none of the
    # time it was inactive.
    active_since: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class WebhookDelivery(Base):
    """One event for one webhook. ``pending`` rows whose ``next_attempt_at`` has passed are due; a worker
    claims one by moving ``next_attempt_at`` a lease ahead and setting ``claim``, so a crashed worker's
    delivery becomes due again when the lease runs out (at-least-once)."""

    __tablename__ = "webhooks_deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id"),  # an event is queued once per webhook (ping: NULL)
        Index("ix_webhooks_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhooks_deliveries_webhook_created", "webhook_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    webhook_id: Mapped[str] = mapped_column(String(32), ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    event: Mapped[str] = mapped_column(String(255))
    # The JSON body, serialised once: every attempt sends (and signs) the same bytes.
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(10), default=PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
