"""The module configuration (``GET/PUT /config/authentication``)."""
from __future__ import annotations

from typing import Any

from limits import parse_many
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.module_config import ModuleConfigSchema


def _rate(value: str) -> None:
    try:
        single = len(parse_many(value)) == 1
    except ValueError:
        single = False
    if not single:
        raise ValidationError('Not a rate limit; use one limit such as "10/minute" or "100 per hour"')


class PasswordRules(Schema):
    minLength = fields.Integer(load_default=8, validate=validate.Range(min=1, max=1024))
    maxLength = fields.Integer(load_default=256, validate=validate.Range(min=8, max=1024))
    requireLetter = fields.Boolean(load_default=False)
    requireDigit = fields.Boolean(load_default=False)
    requireUppercase = fields.Boolean(load_default=False)
    requireSymbol = fields.Boolean(load_default=False)

    @validates_schema
    def _ordered(self, data: dict[str, Any], **_kwargs: Any) -> None:
        if data["minLength"] > data["maxLength"]:
            raise ValidationError("must not exceed maxLength", "minLength")


class RateLimits(Schema):
    """flask-limiter notation. Generous by default: argon2 already makes each attempt costly."""

    loginPerIp = fields.String(load_default="200/minute", validate=_rate)
    loginPerEmail = fields.String(load_default="20/minute", validate=_rate)
    registerPerIp = fields.String(load_default="100/minute", validate=_rate)


class AuthenticationConfig(ModuleConfigSchema):
    accessTokenMinutes = fields.Integer(
        load_default=60, validate=validate.Range(min=1, max=60 * 24 * 30), metadata={"description": "access JWT lifetime"}
    )
    refreshTokenDays = fields.Integer(
        load_default=7,
        validate=validate.Range(min=1, max=365),
        metadata={"description": "refresh token lifetime; each renew starts it again"},
    )
    registrationOpen = fields.Boolean(
        load_default=True, metadata={"description": "false: POST /authentication/local/new answers 403"}
    )
    passwordRules = fields.Nested(PasswordRules, load_default=lambda: PasswordRules().load({}))
    rateLimits = fields.Nested(RateLimits, load_default=lambda: RateLimits().load({}))
