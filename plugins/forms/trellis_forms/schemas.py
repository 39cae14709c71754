"""Request and response bodies of the Forms routes."""

from __future__ import annotations

from typing import Any

from email_validator import EmailNotValidError, validate_email
from marshmallow import Schema, ValidationError, fields, post_load, validate, validates_schema

from trellis.fields import BoundedList, JsonBoolean
from trellis.http import FreeFormSchema, ListArgs, list_schema

from .validation import FIELD_TYPES

FIELD_NAME = validate.Regexp(
    r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$", error="Use letters, digits, '_' and '-' (starting with a letter or '_')."
)
FORM_NAME = [validate.Length(min=1, max=200), validate.Regexp(r"^[^\r\n]*$", error="Must be a single line.")]


def _forward_address(value: str | None) -> None:
    if value is None:
        return
    try:
        validate_email(value, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValidationError(str(exc)) from None


class FormFieldSchema(Schema):
    name = fields.String(required=True, validate=FIELD_NAME)
    type = fields.String(required=True, validate=validate.OneOf(FIELD_TYPES))
    required = JsonBoolean(load_default=False)


def _unique_names(form_fields: list[dict[str, Any]]) -> None:
    names = [field["name"] for field in form_fields]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValidationError(f"Field names must be unique: {', '.join(duplicates)}.")


_FORWARD_DOC = {"description": "e-mail address that receives each submission (needs the Email module, active)"}


class _FormBodySchema(Schema):
    @post_load
    def _normalise(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if data.get("forwardTo"):
            data["forwardTo"] = validate_email(data["forwardTo"], check_deliverability=False).normalized
        return data


class FormCreateSchema(_FormBodySchema):
    name = fields.String(required=True, validate=FORM_NAME)
    # data_key/attribute: a class attribute named `fields` would hide marshmallow's `fields` module below it.
    form_fields = BoundedList(
        fields.Nested(FormFieldSchema),
        required=True,
        data_key="fields",
        attribute="fields",
        min_items=1,
        max_items=100,
        validate=_unique_names,
    )
    enabled = JsonBoolean(load_default=True)
    forwardTo = fields.String(allow_none=True, validate=_forward_address, metadata=_FORWARD_DOC)


class FormUpdateSchema(_FormBodySchema):
    name = fields.String(validate=FORM_NAME)
    form_fields = BoundedList(
        fields.Nested(FormFieldSchema),
        data_key="fields",
        attribute="fields",
        min_items=1,
        max_items=100,
        validate=_unique_names,
    )
    enabled = JsonBoolean()
    forwardTo = fields.String(allow_none=True, validate=_forward_address, metadata=_FORWARD_DOC)

    @validates_schema
    def _not_empty(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise ValidationError("Give at least one of name, fields, enabled, forwardTo.")


class FormSchema(Schema):
    _id = fields.String(required=True)
    name = fields.String(required=True)
    form_fields = fields.List(fields.Nested(FormFieldSchema), required=True, data_key="fields", attribute="fields")
    enabled = JsonBoolean(required=True)
    forwardTo = fields.String(allow_none=True)
    createdAt = fields.String(metadata={"format": "date-time"})
    updatedAt = fields.String(metadata={"format": "date-time"})


class FormSubmissionSchema(Schema):
    _id = fields.String(required=True)
    form = fields.String(required=True, metadata={"description": "id of the form"})
    data = fields.Dict(required=True, metadata={"description": "the submitted values, as validated"})
    forwardStatus = fields.String(
        allow_none=True,
        metadata={"description": "null (no forwardTo), sent, failed, or skipped (Email module absent or inactive)"},
    )
    forwardError = fields.String(allow_none=True, metadata={"description": "why forwarding failed or was skipped"})
    forwardMessageId = fields.String(allow_none=True, metadata={"description": "the Email module's send record"})
    createdAt = fields.String(metadata={"format": "date-time"})


class FormSubmitSchema(FreeFormSchema):
    """Any JSON object: checked against the form's own fields by the route."""


class FormSubmitResultSchema(Schema):
    message = fields.String(required=True)
    submissionId = fields.String(required=True)


class FormListArgs(ListArgs):
    search = fields.String(metadata={"description": "case-insensitive part of the name"})


FormListSchema = list_schema("FormList", "forms", FormSchema)
FormSubmissionListSchema = list_schema("FormSubmissionList", "submissions", FormSubmissionSchema)
