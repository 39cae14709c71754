"""Request and response bodies (validation and OpenAPI come from these)."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, fields, post_dump, validate
from webargs.fields import DelimitedList

from trellis.fields import JsonBoolean
from trellis.http import ListArgs, list_schema
from trellis.phones import PhoneNumber

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
        load_only=True,
        validate=validate.Length(min=1, max=512),
        metadata={"description": "or send the refresh token as `Authorization: Bearer <refreshToken>`"},
    )


class UserTokensSchema(Schema):
    accessToken = fields.String(required=True, metadata={"description": "JWT; send as `Authorization: Bearer`"})
    refreshToken = fields.String(required=True, metadata={"description": "opaque; exchange at /authentication/renew"})
    userId = fields.String(required=True)


class AuthUserSchema(Schema):
    _id = fields.String(required=True)
    email = fields.String(required=True, allow_none=True, metadata={"description": "null for a phone-only user"})
    isActive = fields.Boolean(required=True, metadata={"description": "false when blocked"})
    isVerified = fields.Boolean(required=True, metadata={"description": "the email address was confirmed"})
    phoneNumber = fields.String(required=True, allow_none=True, metadata={"description": "E.164"})
    twoFaEnabled = fields.Boolean(required=True)
    providers = fields.List(fields.String(), required=True, metadata={"description": "linked sign-in providers"})
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
    accessToken = fields.String(metadata={"description": "with local.signInOnRegister and no verification required"})
    refreshToken = fields.String(metadata={"description": "with local.signInOnRegister and no verification required"})
    userId = fields.String(metadata={"description": "with the tokens"})


class UserListArgs(ListArgs):
    search = fields.String(validate=validate.Length(max=254), metadata={"description": "part of the email"})
    ids = DelimitedList(
        fields.String(validate=validate.Length(min=1, max=64)),
        validate=validate.Length(max=100),
        metadata={"description": "only these users, comma-separated (at most 100): what the console shows for ids"},
    )
    isActive = fields.Boolean(metadata={"description": "false lists blocked users"})


UserListSchema = list_schema("AuthUserList", "users", AuthUserSchema)


class Token(fields.String):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=True, validate=validate.Length(min=1, max=512), **kwargs)


class Code(fields.String):
    def __init__(self, description: str = "6-digit code", **kwargs: Any) -> None:
        super().__init__(validate=validate.Length(min=1, max=64), metadata={"description": description}, **kwargs)


class EmailOnlySchema(Schema):
    email = NormalisedEmail(required=True, validate=validate.Length(max=254))


class ResetPasswordSchema(Schema):
    passwordResetToken = Token(metadata={"description": "the reset_token of the ForgotPassword link"})
    password = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))


class ChangePasswordSchema(Schema):
    oldPassword = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))
    newPassword = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))


class ChangeEmailSchema(Schema):
    newEmail = NormalisedEmail(required=True, validate=validate.Length(max=254))
    password = fields.String(required=True, load_only=True, validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX))


class ChangeEmailAnswerSchema(Schema):
    message = fields.String(required=True)
    verificationRequired = fields.Boolean(
        required=True, metadata={"description": "true: the change waits for the link sent to the new address"}
    )


class TwoFaChallengeSchema(Schema):
    """``POST /authentication/local`` (and the magic link, phone sign-in) for a user with two-factor on: 202."""

    twoFaRequired = fields.Boolean(required=True)
    twoFaToken = fields.String(required=True, metadata={"description": "send it with a code to twoFa/authorize"})


class TwoFaEnableSchema(Schema):
    method = fields.String(required=True, validate=validate.OneOf(["authenticator", "phone"]))
    phoneNumber = PhoneNumber(metadata={"description": "required for method phone"})


class TwoFaEnabledSchema(Schema):
    secret = fields.String(metadata={"description": "authenticator: base32 TOTP secret"})
    otpauthUrl = fields.String(metadata={"description": "authenticator: otpauth:// URL for a QR code"})
    message = fields.String(metadata={"description": "phone: where the code went"})


class CodeSchema(Schema):
    code = Code("TOTP code, SMS code or recovery code", required=True)


class OptionalCodeSchema(Schema):
    code = Code("TOTP code, SMS code or recovery code; phone method: leave out to get an SMS code first")


class RecoveryCodesSchema(Schema):
    recoveryCodes = fields.List(fields.String(), required=True, metadata={"description": "each works once"})


class TwoFaAuthorizeSchema(Schema):
    twoFaToken = Token()
    code = Code("TOTP code, SMS code or recovery code", required=True)


class TwoFaStateSchema(Schema):
    message = fields.String(required=True)
    twoFaEnabled = fields.Boolean(required=True)


class PhoneSignInSchema(Schema):
    phoneNumber = PhoneNumber(required=True)


class PhoneTokenSchema(Schema):
    token = fields.String(required=True, metadata={"description": "send it with the SMS code to phone/verify"})


class PhoneVerifySchema(Schema):
    token = Token()
    code = Code(required=True)


class AdminUserChangesSchema(Schema):
    email = NormalisedEmail(allow_none=True, validate=validate.Length(max=254))
    isVerified = JsonBoolean()
    phoneNumber = PhoneNumber(allow_none=True)


class ProviderHookArgs(Schema):
    """The query a provider sends the browser back with. Providers add their own parameters (scope,
    authuser, session_state, iss …): those are ignored."""

    class Meta:
        unknown = EXCLUDE

    code = fields.String(validate=validate.Length(min=1, max=4096), metadata={"description": "authorization code"})
    state = fields.String(validate=validate.Length(min=1, max=512), metadata={"description": "from the init redirect"})
    error = fields.String(
        validate=validate.Length(max=256), metadata={"description": "the provider's refusal (access_denied …)"}
    )
    error_description = fields.String(validate=validate.Length(max=2048))


class NativeSignInSchema(Schema):
    id_token = fields.String(
        validate=validate.Length(min=1, max=16384),
        metadata={"description": "OpenID Connect providers: the ID token the app got from the provider's SDK"},
    )
    access_token = fields.String(
        validate=validate.Length(min=1, max=4096),
        metadata={"description": "GitHub: an access token issued to this app (GitHub confirms it)"},
    )
    nonce = fields.String(
        validate=validate.Length(min=1, max=512),
        metadata={"description": "the nonce the app asked the provider to put in the ID token; checked when sent"},
    )
