"""Request and response bodies of the Webhooks routes."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList, JsonBoolean
from trellis.http import ListArgs, list_schema

from .models import DELIVERED, FAILED, PENDING
from .patterns import problem
from .targets import url_problem

SECRET_LENGTH = validate.Length(min=16, max=200)


def _url(value: str) -> None:
    reason = url_problem(value)
    if reason is not None:
        raise ValidationError(reason)


def _patterns(values: list[str]) -> None:
    reasons = [reason for reason in map(problem, values) if reason]
    if reasons:
        raise ValidationError(reasons)
    if len(set(values)) != len(values):
        raise ValidationError("Patterns must be unique.")


_URL_DOC = {"description": "http(s) address that receives the POSTs", "example": "https://example.com/hooks/trellis"}
_EVENTS_DOC = {
    "description": "patterns of the events to deliver: `database.<Schema>.<create|update|delete>`, "
    "`authentication.user.<create|delete|block|unblock>`, `forms.submission.create`, `storage.file.<create|delete>`, "
    "`chat.message.create`, and the events other loaded modules declare; `*` stands for one segment "
    "(`database.*.*`, `*.*.create`)",
    "example": ["database.Item.*", "authentication.user.create"],
}
_SECRET_DOC = {"description": "signs every delivery (HMAC-SHA256); generated when not given", "secret": True}


class WebhookCreateSchema(Schema):
    url = fields.String(required=True, validate=_url, metadata=_URL_DOC)
    events = BoundedList(
        fields.String(validate=validate.Length(min=1, max=255)),
        required=True,
        min_items=1,
        max_items=50,
        validate=_patterns,
        metadata=_EVENTS_DOC,
    )
    secret = fields.String(validate=SECRET_LENGTH, metadata=_SECRET_DOC)
    active = JsonBoolean(load_default=True, metadata={"description": "false: nothing is queued or sent"})
    description = fields.String(allow_none=True, validate=validate.Length(max=500))


class WebhookUpdateSchema(Schema):
    url = fields.String(validate=_url, metadata=_URL_DOC)
    events = BoundedList(
        fields.String(validate=validate.Length(min=1, max=255)),
        min_items=1,
        max_items=50,
        validate=_patterns,
        metadata=_EVENTS_DOC,
    )
    secret = fields.String(validate=SECRET_LENGTH, metadata=_SECRET_DOC)
    active = JsonBoolean()
    description = fields.String(allow_none=True, validate=validate.Length(max=500))

    @validates_schema
    def _not_empty(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise ValidationError("Give at least one of url, events, secret, active, description.")


class WebhookSchema(Schema):
    _id = fields.String(required=True)
    url = fields.String(required=True)
    events = fields.List(fields.String(), required=True)
    secret = fields.String(
        required=True,
        metadata={"description": "shown when created or replaced; `********` in every other answer", "secret": True},
    )
    active = JsonBoolean(required=True)
    description = fields.String(allow_none=True)
    createdAt = fields.String(metadata={"format": "date-time"})
    updatedAt = fields.String(metadata={"format": "date-time"})


class DeliverySchema(Schema):
    _id = fields.String(required=True, metadata={"description": "also sent as the `Trellis-Delivery` header"})
    webhook = fields.String(required=True, metadata={"description": "id of the webhook"})
    event = fields.String(required=True, metadata={"example": "database.Item.create"})
    eventId = fields.Integer(allow_none=True, metadata={"description": "the event log's id; null for ping"})
    status = fields.String(required=True, metadata={"description": "pending | delivered | failed"})
    attempts = fields.Integer(required=True)
    responseStatus = fields.Integer(allow_none=True, metadata={"description": "the receiver's last HTTP status"})
    lastError = fields.String(allow_none=True, metadata={"description": "why the last attempt failed"})
    createdAt = fields.String(metadata={"format": "date-time"})
    deliveredAt = fields.String(allow_none=True, metadata={"format": "date-time"})
    nextAttemptAt = fields.String(allow_none=True, metadata={"format": "date-time", "description": "while pending"})


class DeliveryListArgs(ListArgs):
    status = fields.String(validate=validate.OneOf((PENDING, DELIVERED, FAILED)))
    event = fields.String(validate=validate.Length(min=1, max=255), metadata={"example": "ping"})


WebhookListSchema = list_schema("WebhookList", "webhooks", WebhookSchema)
DeliveryListSchema = list_schema("WebhookDeliveryList", "deliveries", DeliverySchema)
