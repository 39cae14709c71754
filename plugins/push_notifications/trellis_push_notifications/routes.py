"""Push Notifications routes: users register device tokens and topics; admins send and configure."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE

from trellis.credentials import admin_required, require_user, user_required
from trellis.errors import ErrorSchema
from trellis.http import Blueprint
from trellis.module_config import admin_config_routes

from . import service
from .config import PushConfig
from .providers import Notification
from .schemas import (
    PushDeliveriesArgs,
    PushDeliveriesSchema,
    PushDeviceSchema,
    PushOutboxArgs,
    PushOutboxSchema,
    PushSendManySchema,
    PushSendResultSchema,
    PushSendSchema,
    PushSendToTopicSchema,
    PushSubscriptionSchema,
    PushTokenRefSchema,
    PushTokenSchema,
    PushTokensDeletedSchema,
    PushTopicSchema,
)

blp = Blueprint(
    "pushNotifications",
    __name__,
    description="Device tokens, topic subscriptions, and notifications to users or topics (outbox or FCM)",
)

_PROVIDER_FAILED = "The provider could not be reached or refused our credentials (reason in `message`)"


def _notification(body: dict[str, Any]) -> Notification:
    return Notification(title=body["title"], body=body["body"], data=body["data"])


@blp.route("/pushNotifications/token", methods=["POST"])
@user_required
@blp.arguments(PushTokenSchema)
@blp.response(201, PushDeviceSchema)
def register_token(body: dict[str, Any]):
    """Register the caller's device token (again: it is updated, and moves to the caller if another user had it)."""
    return service.device_dict(service.register_token(require_user().id, body["token"], body["platform"]))


@blp.route("/pushNotifications/token", methods=["DELETE"])
@user_required
# Unknown query parameters are an error here: a misspelt `token` must not remove every token.
@blp.arguments(PushTokenRefSchema, location="query", arg_name="in_query", unknown=RAISE)
@blp.arguments(PushTokenRefSchema, location="json", required=False, arg_name="in_body")
@blp.response(200, PushTokensDeletedSchema)
@blp.alt_response(404, schema=ErrorSchema, description="The named token is not one of the caller's")
def unregister_token(in_query: dict[str, Any], in_body: dict[str, Any]):
    """Unregister the caller's device token named by `token` (query or body), or all of them without it."""
    token = in_query.get("token") or in_body.get("token")
    if token:
        return {"_id": service.remove_token(require_user().id, token), "deleted": True, "count": 1}
    return {"deleted": True, "count": service.remove_all_tokens(require_user().id)}


@blp.route("/pushNotifications/subscribe", methods=["POST"])
@user_required
@blp.arguments(PushTopicSchema)
@blp.response(200, PushSubscriptionSchema)
def subscribe(body: dict[str, Any]):
    """Subscribe the caller to a topic (idempotent); topic sends reach all the caller's devices."""
    service.subscribe(require_user().id, body["topic"])
    return {"topic": body["topic"], "subscribed": True}


@blp.route("/pushNotifications/unsubscribe", methods=["POST"])
@user_required
@blp.arguments(PushTopicSchema)
@blp.response(200, PushSubscriptionSchema)
def unsubscribe(body: dict[str, Any]):
    """Unsubscribe the caller from a topic (idempotent)."""
    service.unsubscribe(require_user().id, body["topic"])
    return {"topic": body["topic"], "subscribed": False}


@blp.route("/admin/pushNotifications/send", methods=["POST"])
@admin_required
@blp.arguments(PushSendSchema)
@blp.response(200, PushSendResultSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No user with this id")
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_FAILED)
def send(body: dict[str, Any]):
    """Send a notification to every device of one user."""
    from trellis_authentication.service import get_user  # the module this one requires

    get_user(body["userId"])
    user_ids = [body["userId"]]
    return service.send(service.devices_of_users(user_ids), _notification(body), "user", user_ids=user_ids)


@blp.route("/admin/pushNotifications/sendMany", methods=["POST"])
@admin_required
@blp.arguments(PushSendManySchema)
@blp.response(200, PushSendResultSchema)
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_FAILED)
def send_many(body: dict[str, Any]):
    """Send a notification to every device of several users (ids without devices count for nothing)."""
    user_ids = body["userIds"]
    return service.send(service.devices_of_users(user_ids), _notification(body), "users", user_ids=user_ids)


@blp.route("/admin/pushNotifications/sendToTopic", methods=["POST"])
@admin_required
@blp.arguments(PushSendToTopicSchema)
@blp.response(200, PushSendResultSchema)
@blp.alt_response(500, schema=ErrorSchema, description=_PROVIDER_FAILED)
def send_to_topic(body: dict[str, Any]):
    """Send a notification to every device of every user subscribed to the topic."""
    return service.send(service.devices_of_topic(body["topic"]), _notification(body), "topic", topic=body["topic"])


@blp.route("/admin/pushNotifications/outbox", methods=["GET"])
@admin_required
@blp.arguments(PushOutboxArgs, location="query")
@blp.response(200, PushOutboxSchema)
def outbox(args: dict[str, Any]):
    """Every notification sent (whatever the provider), newest first, with its `sent`/`failed` counts."""
    skip, limit = args.pop("skip"), args.pop("limit")
    rows, total = service.list_notifications(skip, limit, args)
    return {"notifications": [service.notification_dict(r) for r in rows], "count": total}


@blp.route("/admin/pushNotifications/outbox/<string:notificationId>/deliveries", methods=["GET"])
@admin_required
@blp.arguments(PushDeliveriesArgs, location="query")
@blp.response(200, PushDeliveriesSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No notification with this id")
def deliveries(args: dict[str, Any], notificationId: str):
    """The devices one notification went to, with each one's status (and the provider's error)."""
    skip, limit = args.pop("skip"), args.pop("limit")
    rows, total = service.list_deliveries(notificationId, skip, limit, args)
    return {"deliveries": [service.delivery_dict(r) for r in rows], "count": total}


admin_config_routes(
    blp, service.MODULE, PushConfig, '`{"provider": "firebase", "firebase": {projectId, clientEmail, privateKey}}`'
)
