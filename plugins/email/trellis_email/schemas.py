"""Request and response bodies of the Email routes (validation and OpenAPI from the same schemas)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList
from trellis.http import ListArgs, list_schema

STATUSES = ("pending", "queued", "sent", "failed")

_VARIABLES_DOC = "optional; derived from the placeholders (a list that disagrees with them is a 400)"


class EmailSendSchema(Schema):
    """Raw form: ``to, subject, body, from?``. Template form: ``to, templateName, variables, from?``."""

    to = fields.String(required=True, validate=validate.Length(min=3, max=320), metadata={"example": "ada@example.com"})
    subject = fields.String(validate=validate.Length(min=1, max=998))
    body = fields.String(validate=validate.Length(min=1), metadata={"description": "HTML (raw form)"})
    from_ = fields.String(data_key="from", attribute="from", validate=validate.Length(min=3, max=320))
    templateName = fields.String(validate=validate.Length(min=1, max=200))
    variables = fields.Dict(keys=fields.String(), values=fields.Raw(allow_none=True))

    @validates_schema
    def _one_form(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "templateName" in data:
            mixed = [key for key in ("subject", "body") if key in data]
            if mixed:
                raise ValidationError(
                    {key: ["Not allowed with templateName (the template gives it)."] for key in mixed}
                )
            return
        if "variables" in data:
            raise ValidationError({"variables": ["Only with templateName."]})
        missing = {key: ["Missing data for required field."] for key in ("subject", "body") if key not in data}
        if missing:
            raise ValidationError({**missing, "templateName": ["Give templateName, or subject and body."]})


class EmailSendResultSchema(Schema):
    messageId = fields.String(required=True, metadata={"description": "id of the send record (see the outbox)"})
    status = fields.String(required=True, metadata={"example": "sent"})


class EmailTemplateCreateSchema(Schema):
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    subject = fields.String(required=True, validate=validate.Length(min=1, max=998))  # RFC 5322 line limit
    body = fields.String(
        required=True,
        validate=validate.Length(min=1),
        metadata={"description": "HTML with `{{variable}}` placeholders"},
    )
    variables = BoundedList(fields.String(), metadata={"description": _VARIABLES_DOC})


class EmailTemplateUpdateSchema(Schema):
    name = fields.String(validate=validate.Length(min=1, max=200))
    subject = fields.String(validate=validate.Length(min=1, max=998))
    body = fields.String(validate=validate.Length(min=1))
    variables = BoundedList(fields.String(), metadata={"description": _VARIABLES_DOC})


class EmailTemplateSchema(Schema):
    _id = fields.String(required=True)
    name = fields.String(required=True)
    subject = fields.String(required=True)
    body = fields.String(required=True)
    variables = fields.List(fields.String(), required=True)
    externalId = fields.String(allow_none=True, metadata={"description": "the provider's id, after upload or sync"})
    externalProvider = fields.String(allow_none=True)
    createdAt = fields.String(metadata={"format": "date-time"})
    updatedAt = fields.String(metadata={"format": "date-time"})


class EmailMessageSchema(Schema):
    _id = fields.String(required=True)
    to = fields.String(required=True)
    from_ = fields.String(data_key="from", attribute="from", required=True)
    subject = fields.String(required=True)
    body = fields.String(
        required=True, metadata={"description": "the rendered HTML body; a sign-in or reset link shows as [hidden]"}
    )
    templateName = fields.String(allow_none=True)
    provider = fields.String(required=True)
    status = fields.String(
        required=True,
        metadata={"description": "pending (being sent now) | queued (waiting for a sender or a retry) | sent | failed"},
    )
    providerMessageId = fields.String(allow_none=True)
    error = fields.String(allow_none=True, metadata={"description": "why the provider failed (the last attempt)"})
    attempts = fields.Integer(metadata={"description": "attempts of a queued message so far"})
    nextAttemptAt = fields.String(
        allow_none=True, metadata={"format": "date-time", "description": "when a queued message is tried next"}
    )
    createdAt = fields.String(metadata={"format": "date-time"})


class EmailTemplateListArgs(ListArgs):
    search = fields.String(metadata={"description": "case-insensitive part of the name"})


class EmailOutboxArgs(ListArgs):
    status = fields.String(validate=validate.OneOf(STATUSES))
    provider = fields.String(validate=validate.OneOf(("outbox", "smtp", "mailgun", "sendgrid")))


class EmailSyncSkippedSchema(Schema):
    name = fields.String(required=True)
    reason = fields.String(required=True)


class EmailSyncResultSchema(Schema):
    created = fields.List(fields.String(), required=True)
    updated = fields.List(fields.String(), required=True)
    unchanged = fields.List(fields.String(), required=True)
    skipped = fields.List(fields.Nested(EmailSyncSkippedSchema), required=True)


EmailTemplateListSchema = list_schema("EmailTemplateList", "templates", EmailTemplateSchema)
EmailOutboxSchema = list_schema("EmailOutbox", "messages", EmailMessageSchema)
