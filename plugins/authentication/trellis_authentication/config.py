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
    sendPerIp = fields.String(
        load_default="60/minute",
        validate=_rate,
        metadata={"description": "routes that send mail or SMS, per client IP"},
    )
    sendPerAddress = fields.String(
        load_default="5/15 minutes",
        validate=_rate,
        metadata={"description": "routes that send mail or SMS, per target email address or phone number"},
    )


def _link(description: str) -> fields.Url:
    """An absolute http(s) address set by the administrator (null: not set)."""
    return fields.Url(
        require_tld=False, schemes={"http", "https"}, allow_none=True, load_default=None,
        validate=validate.Length(max=2000), metadata={"description": description},
    )


class Verification(Schema):
    required = fields.Boolean(load_default=False, metadata={"description": "unverified users cannot sign in (403)"})
    sendEmail = fields.Boolean(load_default=True, metadata={"description": "send EmailVerification on register"})
    redirectUri = _link("where the verification link sends the browser (302) instead of a JSON answer")


class LocalSettings(Schema):
    verification = fields.Nested(Verification, load_default=lambda: Verification().load({}))
    forgotPasswordRedirectUri = _link(
        "page of your app that takes ?reset_token=; default {hostUrl}/authentication/reset"
    )


class MagicLinkSettings(Schema):
    enabled = fields.Boolean(load_default=False)
    redirectUri = _link("where the magic link sends the browser (302, tokens in the URL fragment)")


class Switch(Schema):
    enabled = fields.Boolean(load_default=False)


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
    hostUrl = _link("public base URL used in links sent by mail; default: the request's own base URL")
    local = fields.Nested(LocalSettings, load_default=lambda: LocalSettings().load({}))
    magicLink = fields.Nested(MagicLinkSettings, load_default=lambda: MagicLinkSettings().load({}))
    twoFa = fields.Nested(
        Switch, load_default=lambda: Switch().load({}), metadata={"description": "two-factor sign-in"}
    )
    phone = fields.Nested(
        Switch, load_default=lambda: Switch().load({}), metadata={"description": "sign-in with SMS codes"}
    )
    passwordRules = fields.Nested(PasswordRules, load_default=lambda: PasswordRules().load({}))
    rateLimits = fields.Nested(RateLimits, load_default=lambda: RateLimits().load({}))
