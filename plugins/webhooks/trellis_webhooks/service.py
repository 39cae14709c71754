"""Webhooks services: the administration of webhooks, their delivery log, ping and manual retry."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from trellis import audit, db
from trellis.errors import bad_request, not_found
from trellis.http import paginate
from trellis.module_config import get as get_config
from trellis.redact import MASK

from . import deliveries
from .dispatcher import ACTIVE
from .models import Webhook, WebhookDelivery
from .schemas import WebhookCreateSchema
from .signing import new_secret
from .targets import host_problem


def webhook_dict(webhook: Webhook, *, show_secret: bool = False) -> dict[str, Any]:
    """A webhook as the API shows it; the secret only in the answer that created or replaced it."""
    return {
        "_id": webhook.id,
        "url": webhook.url,
        "events": webhook.events,
        "secret": webhook.secret if show_secret else MASK,
        "active": webhook.active,
        "description": webhook.description,
        "createdAt": db.isoformat(webhook.created_at),
        "updatedAt": db.isoformat(webhook.updated_at),
    }


def get_webhook(webhook_id: str) -> Webhook:
    webhook = db.session.get(Webhook, webhook_id)
    if webhook is None:
        raise not_found(f"No webhook with id {webhook_id!r}")
    return webhook


def list_webhooks(skip: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    rows, total = paginate(select(Webhook), skip, limit, order_by=(Webhook.created_at, Webhook.id))
    return [webhook_dict(row) for row in rows], total


def _check_target(url: str) -> None:
    """Refuse a URL whose host is not a public address, unless the module config allows private targets."""
    if get_config("webhooks")["allowPrivateTargets"]:
        return
    problem = host_problem(url)
    if problem is not None:
        raise bad_request(f"Refused target: {problem}", {"url": [problem]})


def create_webhook(data: dict[str, Any]) -> dict[str, Any]:
    _check_target(data["url"])
    webhook = Webhook(
        id=db.new_id(),
        url=data["url"],
        events=data["events"],
        secret=data.get("secret") or new_secret(),
        active=data["active"],
        description=data.get("description"),
        active_since=db.utcnow(),
    )
    db.session.add(webhook)
    ACTIVE.bump()  # every process's dispatcher reads the active webhooks again
    audit.record("webhooks", "webhook.create", webhook.id, data, schema=WebhookCreateSchema)
    db.session.commit()
    return webhook_dict(webhook, show_secret=True)


def update_webhook(webhook_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    webhook = get_webhook(webhook_id)
    if "url" in changes:
        _check_target(changes["url"])
    if changes.get("active") and not webhook.active:
        webhook.active_since = db.utcnow()  # the events of its inactive time are not delivered
    for key in ("url", "events", "secret", "active", "description"):
        if key in changes:
            setattr(webhook, key, changes[key])
    ACTIVE.bump()
    audit.record("webhooks", "webhook.update", webhook.id, changes, schema=WebhookCreateSchema)
    db.session.commit()
    return webhook_dict(webhook, show_secret="secret" in changes)


def delete_webhook(webhook_id: str) -> str:
    """Deletes the webhook and its delivery log (attempts in flight are dropped)."""
    webhook = get_webhook(webhook_id)
    db.session.delete(webhook)
    ACTIVE.bump()
    audit.record("webhooks", "webhook.delete", webhook.id, {"url": webhook.url})
    db.session.commit()
    return webhook_id


def list_deliveries(
    webhook_id: str, skip: int, limit: int, status: str | None = None, event: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A webhook's deliveries, newest first."""
    get_webhook(webhook_id)
    query = select(WebhookDelivery).where(WebhookDelivery.webhook_id == webhook_id)
    if status:
        query = query.where(WebhookDelivery.status == status)
    if event:
        query = query.where(WebhookDelivery.event == event)
    order = (WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
    rows, total = paginate(query, skip, limit, order_by=order)
    return [deliveries.delivery_dict(row) for row in rows], total


def _allow_private() -> bool:
    return bool(get_config("webhooks")["allowPrivateTargets"])


def _finished(delivery_id: str) -> dict[str, Any]:
    db.session.expire_all()
    delivery = db.session.get(WebhookDelivery, delivery_id)
    if delivery is None:  # its webhook was deleted while it was being sent
        raise not_found("The webhook was deleted meanwhile")
    return deliveries.delivery_dict(delivery)


def ping(webhook_id: str) -> dict[str, Any]:
    """Send the event ``ping`` now (an inactive webhook too: it tests the endpoint); the delivery as it went.
    A failed ping is retried on the usual schedule, like any delivery."""
    claimed = deliveries.queue_ping(get_webhook(webhook_id))
    deliveries.deliver(claimed, _allow_private())
    return _finished(claimed.id)


def retry(webhook_id: str, delivery_id: str) -> dict[str, Any]:
    """Attempt a delivery again now, whatever its status; the delivery as it went."""
    claimed = deliveries.claim_one(webhook_id, delivery_id)
    deliveries.deliver(claimed, _allow_private())
    return _finished(claimed.id)
