"""Every SMS the module sends (or tried to send) is one row: the outbox and the send log at once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, UTCDateTime, new_id, utcnow

SENT = "sent"
FAILED = "failed"


class SmsMessage(Base):
    __tablename__ = "sms_messages"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    to: Mapped[str] = mapped_column(String(20))  # E.164: at most 15 digits and the +
    message: Mapped[str] = mapped_column(Text)
    provider: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    provider_message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        Index("ix_sms_messages_created_at", "created_at"),
        Index("ix_sms_messages_to", "to"),
    )
