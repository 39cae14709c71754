"""Request and response schemas of the SMS routes (validation and OpenAPI from the same place)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from trellis.fields import BoundedList
from trellis.http import ListArgs, list_schema
from trellis.phones import PhoneNumber

from .models import FAILED, SENT

# Twilio's own ceiling for one message body (it splits longer texts into segments up to this).
MAX_MESSAGE_LENGTH = 1600
MAX_RECIPIENTS = 1000


class SmsSendSchema(Schema):
    to = PhoneNumber(required=True)
    message = fields.String(required=True, validate=validate.Length(min=1, max=MAX_MESSAGE_LENGTH))


class SmsSendManySchema(Schema):
    to = BoundedList(
        PhoneNumber(),
        required=True,
        min_items=1,
        max_items=MAX_RECIPIENTS,
        metadata={"description": "recipients; one invalid number rejects the whole request"},
    )
    message = fields.String(required=True, validate=validate.Length(min=1, max=MAX_MESSAGE_LENGTH))


class SmsSentSchema(Schema):
    message = fields.String(required=True, metadata={"example": "SMS sent"})
    messageId = fields.String(required=True, metadata={"description": "the `_id` of the outbox record"})


class SmsSendResultSchema(Schema):
    to = fields.String(required=True)
    messageId = fields.String(required=True)
    status = fields.String(required=True, metadata={"enum": [SENT, FAILED]})
    error = fields.String(metadata={"description": "why the provider did not take it (failed only)"})


class SmsSendManyResultSchema(Schema):
    results = fields.List(fields.Nested(SmsSendResultSchema), required=True)


class SmsRecordSchema(Schema):
    _id = fields.String(required=True)
    to = fields.String(required=True)
    message = fields.String(required=True)
    provider = fields.String(required=True)
    status = fields.String(required=True, metadata={"enum": [SENT, FAILED]})
    providerMessageId = fields.String(allow_none=True)
    error = fields.String(allow_none=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time"})


SmsOutboxSchema = list_schema("SmsOutbox", "messages", SmsRecordSchema)


class SmsOutboxArgs(ListArgs):
    to = PhoneNumber()
    status = fields.String(validate=validate.OneOf([SENT, FAILED]))
    provider = fields.String(validate=validate.OneOf(["outbox", "twilio"]))
