"""The module configuration (``GET/PUT /config/authentication``)."""

from __future__ import annotations

from typing import Any

from limits import parse_many
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from trellis.fields import BoundedList, JsonBoolean
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
    requireLetter = JsonBoolean(load_default=False)
    requireDigit = JsonBoolean(load_default=False)
    requireUppercase = JsonBoolean(load_default=False)
    requireSymbol = JsonBoolean(load_default=False)

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
        require_tld=False,
        schemes={"http", "https"},
        allow_none=True,
        load_default=None,
        validate=validate.Length(max=2000),
        metadata={"description": description},
    )


class Verification(Schema):
    required = JsonBoolean(load_default=False, metadata={"description": "unverified users cannot sign in (403)"})
    sendEmail = JsonBoolean(load_default=True, metadata={"description": "send EmailVerification on register"})
    redirectUri = _link("where the verification link sends the browser (302) instead of a JSON answer")


class LocalSettings(Schema):
    verification = fields.Nested(Verification, load_default=lambda: Verification().load({}))
    signInOnRegister = JsonBoolean(
        load_default=True,
        metadata={
            "description": "registering also signs in (the answer carries accessToken and refreshToken) "
            "unless verification.required"
        },
    )
    forgotPasswordRedirectUri = _link(
        "page of your app that takes ?reset_token=; default {hostUrl}/authentication/reset"
    )


class MagicLinkSettings(Schema):
    enabled = JsonBoolean(load_default=False)
    redirectUri = _link("where the magic link sends the browser (302, tokens in the URL fragment)")


class Switch(Schema):
    enabled = JsonBoolean(load_default=False)


class TeamInvites(Schema):
    enabled = JsonBoolean(load_default=True, metadata={"description": "false: the invite routes answer 403"})


class TeamsSettings(Schema):
    enabled = JsonBoolean(load_default=False, metadata={"description": "false: every team route answers 403"})
    invites = fields.Nested(TeamInvites, load_default=lambda: TeamInvites().load({}))
    allowAddWithoutInvite = JsonBoolean(
        load_default=False,
        metadata={"description": "owners may add a user directly (POST /authentication/teams/{teamId}/add)"},
    )


# --- sign-in with external providers (README, "Sign-in with external providers") ---

# What a provider may be called: it is a path segment of /authentication/{provider} and of the hook.
PROVIDER_NAME = r"^[a-z][a-z0-9-]{0,31}$"
PRESETS = ("google", "github", "microsoft")
# First path segments of the module's own routes under /authentication/ (and of the reset page and
# the generic-provider list): a provider of that name would be hidden by them. A test keeps this
# list in step with the app's routes.
RESERVED_NAMES = frozenset(
    {
        "local",
        "phone",
        "renew",
        "logout",
        "user",
        "users",
        "twofa",
        "forgot-password",
        "reset-password",
        "magic-link",
        "reset",
        "init",
        "oidc",
        "verify-email",
        "verify-change-email",
        "teams",
        "sessions",
        "account",
        "pages",
    }
)


def _endpoint(description: str) -> fields.Url:
    """An endpoint address of a named provider; null: the provider's own (given in the description)."""
    return fields.Url(
        require_tld=False,
        schemes={"http", "https"},
        allow_none=True,
        load_default=None,
        validate=validate.Length(max=2000),
        metadata={"description": description},
    )


def _client_fields() -> dict[str, fields.Field]:
    """What every provider has: the app registration at the provider and where the browser ends."""
    return {
        "clientId": fields.String(
            allow_none=True,
            load_default=None,
            validate=validate.Length(min=1, max=512),
            metadata={"description": "the OAuth client id of your app at the provider"},
        ),
        "clientSecret": fields.String(
            allow_none=True,
            load_default=None,
            validate=validate.Length(min=1, max=1024),
            metadata={"secret": True, "description": "the OAuth client secret of your app at the provider"},
        ),
        "redirectUri": _link(
            "page of your app the browser is sent to after sign-in, the tokens in the URL fragment; "
            "null: the hook answers with JSON"
        ),
        "scopes": BoundedList(
            fields.String(validate=validate.Length(min=1, max=200)),
            allow_none=True,
            load_default=None,
            max_items=50,
            metadata={"description": "null: the provider's usual sign-in scopes"},
        ),
    }


class _Provider(Schema):
    enabled = JsonBoolean(load_default=False)

    @validates_schema
    def _registered(self, data: dict[str, Any], **_kwargs: Any) -> None:
        if data.get("enabled") and not data.get("clientId"):
            raise ValidationError("Required when the provider is enabled.", "clientId")


class _OidcPreset(_Provider):
    """Google and Microsoft: OpenID Connect with known endpoints (each overridable)."""

    audiences = BoundedList(
        fields.String(validate=validate.Length(min=1, max=512)),
        load_default=list,
        max_items=20,
        metadata={
            "description": "client ids of your other apps (Android, iOS) whose ID tokens the native sign-in accepts"
        },
    )


GoogleSettings = _OidcPreset.from_dict(
    {
        **_client_fields(),
        "issuer": _endpoint("default https://accounts.google.com"),
        "authorizeUrl": _endpoint("default https://accounts.google.com/o/oauth2/v2/auth"),
        "tokenUrl": _endpoint("default https://oauth2.googleapis.com/token"),
        "userinfoUrl": _endpoint("default https://openidconnect.googleapis.com/v1/userinfo"),
        "jwksUrl": _endpoint("default https://www.googleapis.com/oauth2/v3/certs"),
    },
    name="GoogleSettings",
)

MicrosoftSettings = _OidcPreset.from_dict(
    {
        **_client_fields(),
        "tenant": fields.String(
            load_default="common",
            validate=validate.Regexp(r"^[A-Za-z0-9.-]{1,100}$"),
            metadata={"description": "common, organizations, consumers, or your directory (tenant) id"},
        ),
        "issuer": _endpoint("default https://login.microsoftonline.com/{tenantid}/v2.0 ({tenantid}: the token's tid)"),
        "authorizeUrl": _endpoint("default https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize"),
        "tokenUrl": _endpoint("default https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"),
        "userinfoUrl": _endpoint("default https://graph.microsoft.com/oidc/userinfo"),
        "jwksUrl": _endpoint("default https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys"),
    },
    name="MicrosoftSettings",
)

GithubSettings = _Provider.from_dict(
    {
        **_client_fields(),
        "authorizeUrl": _endpoint("default https://github.com/login/oauth/authorize"),
        "tokenUrl": _endpoint("default https://github.com/login/oauth/access_token"),
        "apiUrl": _endpoint("default https://api.github.com"),
    },
    name="GithubSettings",
)


class _Oidc(Schema):
    """Any OpenID Connect provider; its endpoints come from ``{issuer}/.well-known/openid-configuration``."""

    name = fields.String(
        required=True,
        validate=validate.Regexp(PROVIDER_NAME, error="Lower-case letters, digits and -, at most 32."),
        metadata={"description": "the {provider} of /authentication/init/{provider}"},
    )
    enabled = JsonBoolean(load_default=True)
    issuer = fields.Url(required=True, require_tld=False, schemes={"http", "https"}, validate=validate.Length(max=2000))
    audiences = BoundedList(
        fields.String(validate=validate.Length(min=1, max=512)),
        load_default=list,
        max_items=20,
        metadata={"description": "client ids of your other apps whose ID tokens the native sign-in accepts"},
    )

    @validates_schema
    def _usable(self, data: dict[str, Any], **_kwargs: Any) -> None:
        name = data.get("name")
        if name in PRESETS or name in RESERVED_NAMES:
            raise ValidationError(f"{name!r} is taken by a built-in provider or route.", "name")
        if not data.get("clientId"):
            raise ValidationError("Missing data for required field.", "clientId")


OidcProvider = _Oidc.from_dict(_client_fields(), name="OidcProvider")


class OAuthSettings(Schema):
    google = fields.Nested(GoogleSettings, load_default=lambda: GoogleSettings().load({}))
    github = fields.Nested(GithubSettings, load_default=lambda: GithubSettings().load({}))
    microsoft = fields.Nested(MicrosoftSettings, load_default=lambda: MicrosoftSettings().load({}))
    oidc = BoundedList(
        fields.Nested(OidcProvider),
        load_default=list,
        max_items=50,
        metadata={"description": "generic OpenID Connect providers: [{name, issuer, clientId, clientSecret, scopes?}]"},
    )
    timeoutSeconds = fields.Float(
        load_default=5.0,
        validate=validate.Range(min=0.5, max=30),
        metadata={"description": "how long a call to a provider may take before the sign-in fails (400)"},
    )

    @validates_schema
    def _distinct_names(self, data: dict[str, Any], **_kwargs: Any) -> None:
        names = [provider["name"] for provider in data.get("oidc") or []]
        if len(names) != len(set(names)):
            raise ValidationError("Each provider needs its own name.", "oidc")


class AuthenticationConfig(ModuleConfigSchema):
    accessTokenMinutes = fields.Integer(
        load_default=60,
        validate=validate.Range(min=1, max=60 * 24 * 30),
        metadata={"description": "access JWT lifetime"},
    )
    refreshTokenDays = fields.Integer(
        load_default=7,
        validate=validate.Range(min=1, max=365),
        metadata={"description": "refresh token lifetime; each renew starts it again"},
    )
    registrationOpen = JsonBoolean(
        load_default=True, metadata={"description": "false: POST /authentication/local/new answers 403"}
    )
    hostUrl = _link(
        "public base URL used in links sent by mail; default: TRELLIS_PUBLIC_URL, else the request's own base "
        "URL when its host is trusted (TRELLIS_TRUSTED_HOSTS; by default loopback names and HOST), else 400"
    )
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
    oauth = fields.Nested(
        OAuthSettings,
        load_default=lambda: OAuthSettings().load({}),
        metadata={"description": "sign-in with Google, GitHub, Microsoft and OpenID Connect providers"},
    )
    teams = fields.Nested(
        TeamsSettings,
        load_default=lambda: TeamsSettings().load({}),
        metadata={"description": "teams of users, sub-teams, members and invites"},
    )
