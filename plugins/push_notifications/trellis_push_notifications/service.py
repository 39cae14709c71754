"""Device tokens, topics and sending. Routes call these; nothing here knows HTTP shapes.

A send is a constant number of statements whatever the audience: one SELECT of the devices, the
provider's fan-out, one INSERT of the notification, one bulk write of its deliveries (a single
unnest INSERT on PostgreSQL), one DELETE of the tokens the provider reported dead (per 1,000), one COMMIT.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from flask import current_app
from sqlalchemy import Row, Select, delete, select
from sqlalchemy.exc import IntegrityError

from trellis import db, statements
from trellis.errors import not_found, provider_error
from trellis.http import paginate
from trellis.metrics import ModuleCounter
from trellis.module_config import get as get_config
from trellis.module_config import require_active

from .models import SENT, PushDelivery, PushDevice, PushNotification, PushSubscription
from .providers import Notification, PushState, make_provider

MODULE = "pushNotifications"
log = logging.getLogger(__name__)
# Bound parameters per statement stay well under SQLite's limit (32766).
_CHUNK = 1000
DELIVERIES = ModuleCounter("trellis_push_sent_total", "Push deliveries to devices, by outcome", ("provider", "status"))


def config() -> dict[str, Any]:
    return get_config(MODULE)


def state() -> PushState:
    return current_app.extensions[MODULE]


# --- device tokens ----------------------------------------------------------------------------------


def register_token(user_id: str, token: str, platform: str) -> PushDevice:
    """Upsert by token: a token names one app install, so registering it again moves it to this user."""
    try:
        return _upsert_device(user_id, token, platform)
    except IntegrityError:
        # The same token registered at the same moment by another request: it exists now, update it.
        db.session.rollback()
        return _upsert_device(user_id, token, platform)


def _upsert_device(user_id: str, token: str, platform: str) -> PushDevice:
    device = db.session.execute(select(PushDevice).where(PushDevice.token == token)).scalar_one_or_none()
    if device is None:
        device = PushDevice(user_id=user_id, token=token, platform=platform)
        db.session.add(device)
    else:
        device.user_id, device.platform, device.updated_at = user_id, platform, db.utcnow()
    db.session.commit()
    return device


def remove_token(user_id: str, token: str) -> str:
    device = db.session.execute(
        select(PushDevice).where(PushDevice.token == token, PushDevice.user_id == user_id)
    ).scalar_one_or_none()
    if device is None:
        raise not_found("This user has no such device token")
    db.session.delete(device)
    db.session.commit()
    return device.id


def remove_all_tokens(user_id: str) -> int:
    count = db.rowcount(db.session.execute(delete(PushDevice).where(PushDevice.user_id == user_id)))
    db.session.commit()
    return count


def device_dict(device: PushDevice) -> dict[str, Any]:
    return {
        "_id": device.id,
        "userId": device.user_id,
        "token": device.token,
        "platform": device.platform,
        "createdAt": db.isoformat(device.created_at),
        "updatedAt": db.isoformat(device.updated_at),
    }


# --- topics -----------------------------------------------------------------------------------------


def subscribe(user_id: str, topic: str) -> None:
    exists = db.session.execute(
        select(PushSubscription.id).where(PushSubscription.topic == topic, PushSubscription.user_id == user_id)
    ).first()
    if exists is None:
        db.session.add(PushSubscription(topic=topic, user_id=user_id))
        db.session.commit()


def unsubscribe(user_id: str, topic: str) -> None:
    db.session.execute(
        delete(PushSubscription).where(PushSubscription.topic == topic, PushSubscription.user_id == user_id)
    )
    db.session.commit()


def forget_user(user_id: str) -> None:
    """A deleted user's devices and subscriptions go in the transaction that deletes the user."""
    db.session.execute(delete(PushDevice).where(PushDevice.user_id == user_id))
    db.session.execute(delete(PushSubscription).where(PushSubscription.user_id == user_id))


# --- sending ----------------------------------------------------------------------------------------

_DEVICE_COLUMNS = (PushDevice.id, PushDevice.user_id, PushDevice.token, PushDevice.platform)


def devices_of_users(user_ids: Sequence[str]) -> Select:
    return select(*_DEVICE_COLUMNS).where(PushDevice.user_id.in_(list(dict.fromkeys(user_ids))))


def devices_of_topic(topic: str) -> Select:
    return (
        select(*_DEVICE_COLUMNS)
        .join(PushSubscription, PushSubscription.user_id == PushDevice.user_id)
        .where(PushSubscription.topic == topic)
    )


def send(
    devices_query: Select,
    notification: Notification,
    target: str,
    topic: str | None = None,
    user_ids: Sequence[str] | None = None,
) -> dict[str, int]:
    """Deliver to every device the query selects; record the send and each delivery; ``{sent, failed}``."""
    settings = require_active(MODULE)
    devices: list[Row[Any]] = list(db.session.execute(devices_query.order_by(PushDevice.id)).all())
    # End the read transaction: a provider's fan-out can take seconds and must not hold a connection.
    db.session.commit()
    provider = make_provider(settings, state())
    outcomes = provider.deliver([d.token for d in devices], notification) if devices else []
    sent = sum(1 for outcome in outcomes if outcome.status == SENT)
    record = PushNotification(
        target=target,
        topic=topic,
        user_ids=list(dict.fromkeys(user_ids)) if user_ids is not None else None,
        title=notification.title,
        body=notification.body,
        data=notification.data,
        provider=provider.name,
        sent=sent,
        failed=len(outcomes) - sent,
    )
    db.session.add(record)
    db.session.flush()
    # One statement whatever the audience (PostgreSQL unnests a column array each: several times faster
    # than a multi-row INSERT for 10,000 rows, and unlike COPY it works on eventlet's green connections).
    statements.insert_rows(
        db.session.connection(),
        PushDelivery.__table__,
        [
            {
                "notification_id": record.id,
                "token": d.token,
                "user_id": d.user_id,
                "platform": d.platform,
                "status": o.status,
                "provider_message_id": o.provider_message_id,
                "error": o.error,
            }
            for d, o in zip(devices, outcomes)
        ],
    )
    dead = [device.id for device, outcome in zip(devices, outcomes) if outcome.token_invalid]
    for start in range(0, len(dead), _CHUNK):
        db.session.execute(delete(PushDevice).where(PushDevice.id.in_(dead[start : start + _CHUNK])))
    db.session.commit()
    DELIVERIES.inc(sent, provider=provider.name, status="sent")
    DELIVERIES.inc(len(outcomes) - sent, provider=provider.name, status="failed")
    if dead:
        log.info("removed %d device tokens the provider reported invalid", len(dead))
    if outcomes and sent == 0 and not any(outcome.reached for outcome in outcomes):
        # Nothing got through to the provider at all (unreachable, or it refused our credentials).
        raise provider_error(f"Push notification not sent: {outcomes[0].error}")
    return {"sent": sent, "failed": len(outcomes) - sent}


def notification_dict(row: PushNotification) -> dict[str, Any]:
    return {
        "_id": row.id,
        "target": row.target,
        "topic": row.topic,
        "userIds": row.user_ids,
        "title": row.title,
        "body": row.body,
        "data": row.data or {},
        "provider": row.provider,
        "sent": row.sent,
        "failed": row.failed,
        "createdAt": db.isoformat(row.created_at),
    }


def delivery_dict(row: PushDelivery) -> dict[str, Any]:
    return {
        "userId": row.user_id,
        "token": row.token,
        "platform": row.platform,
        "status": row.status,
        "providerMessageId": row.provider_message_id,
        "error": row.error,
    }


def list_notifications(skip: int, limit: int, filters: dict[str, str]) -> tuple[list[PushNotification], int]:
    query = select(PushNotification)
    for name, column in (
        ("topic", PushNotification.topic),
        ("provider", PushNotification.provider),
        ("target", PushNotification.target),
    ):
        if filters.get(name):
            query = query.where(column == filters[name])
    if filters.get("userId"):
        reached = select(PushDelivery.notification_id).where(PushDelivery.user_id == filters["userId"])
        query = query.where(PushNotification.id.in_(reached))
    return paginate(query, skip, limit, (PushNotification.created_at.desc(), PushNotification.id.desc()))


def list_deliveries(
    notification_id: str, skip: int, limit: int, filters: dict[str, str]
) -> tuple[list[PushDelivery], int]:
    if db.session.get(PushNotification, notification_id) is None:
        raise not_found("No notification with this id")
    query = select(PushDelivery).where(PushDelivery.notification_id == notification_id)
    for name, column in (("userId", PushDelivery.user_id), ("status", PushDelivery.status)):
        if filters.get(name):
            query = query.where(column == filters[name])
    return paginate(query, skip, limit, (PushDelivery.user_id, PushDelivery.token))
