"""Email tables: templates and the record of every message sent or queued to be sent (the outbox)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, JSONType, UTCDateTime, new_id, utcnow

PENDING, QUEUED, SENT, FAILED = "pending", "queued", "sent", "failed"


class EmailTemplate(Base):
    __tablename__ = "email_templates"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    # Derived from the placeholders of subject and body on every write.
    variables: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # Set by upload/sync: the provider's id of this template (Mailgun: its name; SendGrid: its id).
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    external_provider: Mapped[str | None] = mapped_column(String(20), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class EmailMessage(Base):
    """One send: what was sent, through which provider, and how it went.

    A message sent now is ``pending`` while the provider is called. A queued one (``trellis_email.outbox``)
    is ``queued`` until a worker sends it: due once ``next_attempt_at`` has passed, claimed by moving that a
    lease ahead and setting ``claim``, retried with backoff, ``failed`` when the attempts are used up.
    """

    __tablename__ = "email_messages"
    __table_args__ = (
        Index("ix_email_messages_created_at", "created_at"),
        Index("ix_email_messages_due", "status", "next_attempt_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    # Text, not String(n): display names and provider ids have no length PostgreSQL should refuse.
    to: Mapped[str] = mapped_column(Text)
    sender: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    template_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    provider: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20))  # pending | queued | sent | failed
    provider_message_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # A queued message that carries a secret (a sign-in or reset link): ``subject`` and ``body`` hold it
    # hidden, for the listings, and this the ``{"subject", "body"}`` to send, only until it is sent or
    # given up. Never listed, logged or audited.
    secret_content: Mapped[dict[str, str] | None] = mapped_column(JSONType, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
