"""Request and response schemas of the Push Notifications routes."""

from __future__ import annotations

import json
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates, validates_schema

from trellis.fields import BoundedList
from trellis.http import ListArgs, list_schema

from .models import FAILED, MAX_TOKEN_LENGTH, MAX_TOPIC_LENGTH, PLATFORMS, SENT

# FCM's topic-name alphabet; the same rule keeps our topics portable to any provider.
TOPIC = validate.Regexp(r"^[A-Za-z0-9_.~%-]+$", error="Topic names use letters, digits and - _ . ~ % only")
# FCM refuses a message whose payload is over 4096 bytes; refusing it here gives the client a 400.
MAX_PAYLOAD_BYTES = 4096
MAX_USER_IDS = 1000
TARGETS = ("user", "users", "topic")
# Keys FCM reserves in a message's data.
RESERVED_DATA_KEYS = {"from", "notification", "message_type"}


def topic_field(**kwargs: Any) -> fields.String:
    return fields.String(validate=[validate.Length(min=1, max=MAX_TOPIC_LENGTH), TOPIC], **kwargs)


class PushTokenSchema(Schema):
    token = fields.String(required=True, validate=validate.Length(min=1, max=MAX_TOKEN_LENGTH))
    platform = fields.String(required=True, validate=validate.OneOf(PLATFORMS))


class PushTokenRefSchema(Schema):
    token = fields.String(
        validate=validate.Length(min=1, max=MAX_TOKEN_LENGTH),
        metadata={"description": "the device token to remove; without it every token of the user goes"},
    )


class PushDeviceSchema(Schema):
    _id = fields.String(required=True)
    userId = fields.String(required=True)
    token = fields.String(required=True)
    platform = fields.String(required=True, metadata={"enum": list(PLATFORMS)})
    createdAt = fields.String(required=True, metadata={"format": "date-time"})
    updatedAt = fields.String(required=True, metadata={"format": "date-time"})


class PushTokensDeletedSchema(Schema):
    _id = fields.String(metadata={"description": "the removed device (when one `token` was named)"})
    deleted = fields.Boolean(required=True)
    count = fields.Integer(required=True, metadata={"description": "how many tokens were removed"})


class PushTopicSchema(Schema):
    topic = topic_field(required=True)


class PushSubscriptionSchema(Schema):
    topic = fields.String(required=True)
    subscribed = fields.Boolean(required=True)


class _PushMessageSchema(Schema):
    title = fields.String(required=True, validate=validate.Length(min=1, max=1000))
    body = fields.String(required=True, validate=validate.Length(min=1, max=MAX_PAYLOAD_BYTES))
    data = fields.Dict(
        keys=fields.String(validate=validate.Length(min=1, max=256)),
        values=fields.String(),
        load_default=dict,
        metadata={"description": "string values only (FCM's rule)"},
    )

    @validates("data")
    def no_reserved_keys(self, value: dict[str, str], **_: Any) -> None:
        bad = sorted(k for k in value if k in RESERVED_DATA_KEYS or k.startswith(("google", "gcm")))
        if bad:
            raise ValidationError(f"Reserved keys cannot be used in data: {', '.join(bad)}")

    @validates_schema
    def payload_fits(self, data: dict[str, Any], **_: Any) -> None:
        payload = {"title": data.get("title"), "body": data.get("body"), "data": data.get("data") or {}}
        if len(json.dumps(payload, ensure_ascii=False).encode()) > MAX_PAYLOAD_BYTES:
            raise ValidationError(f"title, body and data together must stay under {MAX_PAYLOAD_BYTES} bytes")


class PushSendSchema(_PushMessageSchema):
    userId = fields.String(required=True, validate=validate.Length(min=1, max=64))


class PushSendManySchema(_PushMessageSchema):
    userIds = BoundedList(
        fields.String(validate=validate.Length(min=1, max=64)),
        required=True,
        min_items=1,
        max_items=MAX_USER_IDS,
    )


class PushSendToTopicSchema(_PushMessageSchema):
    topic = topic_field(required=True)


class PushSendResultSchema(Schema):
    sent = fields.Integer(required=True, metadata={"description": "devices the provider took the notification for"})
    failed = fields.Integer(required=True, metadata={"description": "devices it refused (dead tokens are removed)"})


class PushNotificationSchema(Schema):
    _id = fields.String(required=True)
    target = fields.String(required=True, metadata={"enum": list(TARGETS)})
    topic = fields.String(allow_none=True)
    userIds = fields.List(fields.String(), allow_none=True)
    title = fields.String(required=True)
    body = fields.String(required=True)
    data = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    provider = fields.String(required=True)
    sent = fields.Integer(required=True)
    failed = fields.Integer(required=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time"})


class PushDeliverySchema(Schema):
    userId = fields.String(required=True)
    token = fields.String(required=True)
    platform = fields.String(required=True)
    status = fields.String(required=True, metadata={"enum": [SENT, FAILED]})
    providerMessageId = fields.String(allow_none=True)
    error = fields.String(allow_none=True)


PushOutboxSchema = list_schema("PushOutbox", "notifications", PushNotificationSchema)
PushDeliveriesSchema = list_schema("PushDeliveries", "deliveries", PushDeliverySchema)


class PushOutboxArgs(ListArgs):
    userId = fields.String(
        validate=validate.Length(min=1, max=64), metadata={"description": "sends that reached this user"}
    )
    topic = topic_field()
    target = fields.String(validate=validate.OneOf(TARGETS))
    provider = fields.String(validate=validate.OneOf(["outbox", "firebase"]))


class PushDeliveriesArgs(ListArgs):
    userId = fields.String(validate=validate.Length(min=1, max=64))
    status = fields.String(validate=validate.OneOf([SENT, FAILED]))
