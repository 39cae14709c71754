"""Request and response bodies (validation and OpenAPI come from these)."""
from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, post_dump, validate

from trellis.http import ListArgs, list_schema

# Cap on what we hash at all; the configurable rules (passwordRules) apply on top.
PASSWORD_FIELD_MAX = 1024


class NormalisedEmail(fields.Email):
    """An email address, trimmed and lower-cased before it is validated (emails are case-insensitive here)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        return super()._deserialize(value, attr, data, **kwargs).strip().lower()


class UserCredentialsSchema(Schema):
    """``{email, password}`` to register or to create a user."""

    email = NormalisedEmail(required=True, validate=validate.Length(max=254))
    password = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))


class UserLoginSchema(Schema):
    # Any string: a malformed email is simply a wrong credential (401), like an unknown one.
    email = fields.String(required=True, validate=validate.Length(min=1, max=254))
    password = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))


class RenewTokenSchema(Schema):
    refreshToken = fields.String(
        load_only=True, validate=validate.Length(min=1, max=512),
        metadata={"description": "or send the refresh token as `Authorization: Bearer <refreshToken>`"},
    )


class UserTokensSchema(Schema):
    accessToken = fields.String(required=True, metadata={"description": "JWT; send as `Authorization: Bearer`"})
    refreshToken = fields.String(required=True, metadata={"description": "opaque; exchange at /authentication/renew"})
    userId = fields.String(required=True)


class AuthUserSchema(Schema):
    _id = fields.String(required=True)
    email = fields.String(required=True)
    isActive = fields.Boolean(required=True, metadata={"description": "false when blocked"})
    isVerified = fields.Boolean(required=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time"})
    updatedAt = fields.String(required=True, metadata={"format": "date-time"})

    @post_dump(pass_original=True)
    def _extension_fields(self, data: dict[str, Any], original: Any, **_kwargs: Any) -> dict[str, Any]:
        # Fields an administrator added to the User schema travel with the user, never over ours.
        if isinstance(original, dict):
            for key, value in original.items():
                data.setdefault(key, value)
        return data


class UserRegisteredSchema(Schema):
    user = fields.Nested(AuthUserSchema, required=True)


class UserListArgs(ListArgs):
    search = fields.String(validate=validate.Length(max=254), metadata={"description": "part of the email"})
    isActive = fields.Boolean(metadata={"description": "false lists blocked users"})


UserListSchema = list_schema("AuthUserList", "users", AuthUserSchema)
