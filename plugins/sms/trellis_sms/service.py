"""Sending and listing text messages. Routes call these; nothing here knows HTTP shapes.

Other modules text through :func:`send` and check numbers with :func:`to_e164` or the marshmallow field :class:`PhoneNumber` (Authentication does both).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from trellis import db
from trellis.http import paginate
from trellis.metrics import ModuleCounter
from trellis.module_config import get as get_config
from trellis.module_config import require_active
from trellis.phones import PhoneNumber, to_e164

from .models import SmsMessage

__all__ = ["config", "send", "to_e164", "PhoneNumber", "record_dict", "list_messages"]
from .providers import make_provider

MODULE = "sms"
SENT = ModuleCounter(
    "trellis_sms_sent_total", "Text messages handed to the provider, by outcome", ("provider", "status")
)


def config() -> dict[str, Any]:
    return get_config(MODULE)


def send(numbers: list[str], text: str) -> list[SmsMessage]:
    """Send ``text`` to each E.164 number (already validated) and record every attempt in one commit."""
    settings = require_active(MODULE)
    # End the read transaction: the provider's round trips must not hold a database connection.
    db.session.commit()
    provider = make_provider(settings)
    records = []
    try:
        for number in numbers:
            delivery = provider.send(number, text)
            records.append(
                SmsMessage(
                    id=db.new_id(),
                    to=number,
                    message=text,
                    provider=provider.name,
                    status=delivery.status,
                    provider_message_id=delivery.provider_message_id,
                    error=delivery.error,
                    created_at=db.utcnow(),
                )
            )
    finally:
        provider.close()
        # Recorded even when the provider failed, so the outbox shows what was attempted and why it failed.
        db.session.add_all(records)
        db.session.commit()
        for record in records:
            SENT.inc(provider=record.provider, status=record.status)
    return records


def record_dict(record: SmsMessage) -> dict[str, Any]:
    return {
        "_id": record.id,
        "to": record.to,
        "message": record.message,
        "provider": record.provider,
        "status": record.status,
        "providerMessageId": record.provider_message_id,
        "error": record.error,
        "createdAt": db.isoformat(record.created_at),
    }


def list_messages(skip: int, limit: int, filters: dict[str, str]) -> tuple[list[SmsMessage], int]:
    query = select(SmsMessage)
    for name, column in (("to", SmsMessage.to), ("status", SmsMessage.status), ("provider", SmsMessage.provider)):
        if filters.get(name):
            query = query.where(column == filters[name])
    return paginate(query, skip, limit, (SmsMessage.created_at.desc(), SmsMessage.id.desc()))
