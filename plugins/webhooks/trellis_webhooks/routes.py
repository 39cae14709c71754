"""Webhooks routes: ``/admin/webhooks/...`` (all need admin credentials)."""

from __future__ import annotations

from typing import Any

from trellis.credentials import admin_required
from trellis.errors import ErrorSchema
from trellis.http import Blueprint, DeletedSchema, ListArgs, deleted
from trellis.module_config import admin_config_routes

from . import service
from .config import WebhooksConfigSchema
from .schemas import (
    DeliveryListArgs,
    DeliveryListSchema,
    DeliverySchema,
    WebhookCreateSchema,
    WebhookListSchema,
    WebhookSchema,
    WebhookUpdateSchema,
)

blp = Blueprint("webhooks", __name__, description="Webhooks: signed deliveries of events to registered URLs")

_NO_WEBHOOK = "No such webhook"
_REFUSED = "Invalid fields, or a target that is not a public address (unless `allowPrivateTargets`)"


@blp.route("/admin/webhooks", methods=["GET"])
@admin_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, WebhookListSchema)
def list_webhooks(args: dict[str, Any]):
    """Webhooks, oldest first (secrets masked)."""
    webhooks, count = service.list_webhooks(args["skip"], args["limit"])
    return {"webhooks": webhooks, "count": count}


@blp.route("/admin/webhooks", methods=["POST"])
@admin_required
@blp.arguments(WebhookCreateSchema)
@blp.response(201, WebhookSchema)
@blp.alt_response(400, schema=ErrorSchema, description=_REFUSED)
def create_webhook(body: dict[str, Any]):
    """Register a webhook; the answer carries its `secret` (generated when none is given)."""
    return service.create_webhook(body)


@blp.route("/admin/webhooks/<string:webhookId>", methods=["GET"])
@admin_required
@blp.response(200, WebhookSchema)
@blp.alt_response(404, schema=ErrorSchema, description=_NO_WEBHOOK)
def get_webhook(webhookId: str):
    """One webhook (secret masked)."""
    return service.webhook_dict(service.get_webhook(webhookId))


@blp.route("/admin/webhooks/<string:webhookId>", methods=["PUT"])
@admin_required
@blp.arguments(WebhookUpdateSchema)
@blp.response(200, WebhookSchema)
@blp.alt_response(400, schema=ErrorSchema, description=_REFUSED)
@blp.alt_response(404, schema=ErrorSchema, description=_NO_WEBHOOK)
def update_webhook(body: dict[str, Any], webhookId: str):
    """Change a webhook; fields not sent are kept. A new `secret` applies to the next attempt of every delivery."""
    return service.update_webhook(webhookId, body)


@blp.route("/admin/webhooks/<string:webhookId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
@blp.alt_response(404, schema=ErrorSchema, description=_NO_WEBHOOK)
def delete_webhook(webhookId: str):
    """Delete a webhook and its delivery log."""
    return deleted(service.delete_webhook(webhookId))


@blp.route("/admin/webhooks/<string:webhookId>/deliveries", methods=["GET"])
@admin_required
@blp.arguments(DeliveryListArgs, location="query")
@blp.response(200, DeliveryListSchema)
@blp.alt_response(404, schema=ErrorSchema, description=_NO_WEBHOOK)
def list_deliveries(args: dict[str, Any], webhookId: str):
    """The webhook's deliveries, newest first; filter by `status` or `event`."""
    found, count = service.list_deliveries(
        webhookId, args["skip"], args["limit"], args.get("status"), args.get("event")
    )
    return {"deliveries": found, "count": count}


@blp.route("/admin/webhooks/<string:webhookId>/deliveries/<string:deliveryId>/retry", methods=["POST"])
@admin_required
@blp.response(200, DeliverySchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such webhook or delivery")
@blp.alt_response(409, schema=ErrorSchema, description="An attempt of this delivery is in flight")
def retry_delivery(webhookId: str, deliveryId: str):
    """Attempt a delivery again now (any status); answers how it went. A failure goes on with the retry schedule."""
    return service.retry(webhookId, deliveryId)


@blp.route("/admin/webhooks/<string:webhookId>/ping", methods=["POST"])
@admin_required
@blp.response(200, DeliverySchema)
@blp.alt_response(404, schema=ErrorSchema, description=_NO_WEBHOOK)
def ping(webhookId: str):
    """Send the event `ping` now; answers the delivery (`status`, `responseStatus`, `lastError`)."""
    return service.ping(webhookId)


admin_config_routes(blp, "webhooks", WebhooksConfigSchema, '`{"allowPrivateTargets": true}` (development only)')
