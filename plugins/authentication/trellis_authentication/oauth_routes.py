"""HTTP routes of sign-in with external providers (README, "Sign-in with external
providers"), on the module's blueprint.

``{provider}`` uses the ``provider`` URL converter: a lower-case name that is not one of the module's
own words under ``/authentication/`` (``local``, ``phone``, ``renew`` …). Werkzeug already prefers static
rules, and the converter also keeps ``POST /authentication/user`` (a GET-only route) a 405 instead of a
sign-in with a provider named "user".
"""

from __future__ import annotations

from typing import Any

from flask import redirect
from werkzeug.routing import BaseConverter, ValidationError

from trellis.errors import ErrorSchema

from . import oauth
from .config import PROVIDER_NAME, RESERVED_NAMES
from .routes import blp, tokens_or_challenge
from .schemas import NativeSignInSchema, ProviderHookArgs, TwoFaChallengeSchema, UserTokensSchema


class ProviderConverter(BaseConverter):
    regex = PROVIDER_NAME.removeprefix("^").removesuffix("$")

    def to_python(self, value: str) -> str:
        if value in RESERVED_NAMES:
            raise ValidationError()  # not this rule: the static route of that name answers
        return value


# Before the rules below are added to the app (deferred functions run in the order they were recorded).
blp.record_once(lambda state: state.app.url_map.converters.setdefault("provider", ProviderConverter))

PROVIDER_FAILED = (
    "Unknown, used or expired state; the provider refused or failed (unreachable, timeout, HTTP error, "
    "malformed answer); the ID token does not verify (signature, iss, aud, exp, nonce)"
)
UNKNOWN = "No enabled provider of this name"
CONFLICT = "The provider does not vouch for the email and another user has it"
BLOCKED = "The user is blocked, or registration is closed and the user is new"


@blp.route("/authentication/init/<provider:provider>", methods=["GET"])
@blp.response(302, description="To the provider's sign-in page (state, nonce, PKCE S256)")
@blp.alt_response(400, schema=ErrorSchema, description="The provider's discovery document cannot be read")
@blp.alt_response(404, schema=ErrorSchema, description=UNKNOWN)
@blp.alt_response(429, schema=ErrorSchema, description="Too many sign-ins from this address (rateLimits.loginPerIp)")
def provider_init(provider: str):
    """Start a sign-in with a provider: open this in the browser (a link or a redirect, not an XHR)."""
    return redirect(oauth.start(provider), 302)


@blp.route("/hook/authentication/<provider:provider>", methods=["GET"])
@blp.arguments(ProviderHookArgs, location="query")
@blp.response(200, UserTokensSchema)
@blp.alt_response(202, schema=TwoFaChallengeSchema, description="Two-factor is on: finish at twoFa/authorize")
@blp.alt_response(302, description="To the provider's `redirectUri`, the answer in the URL fragment")
@blp.alt_response(400, schema=ErrorSchema, description=PROVIDER_FAILED)
@blp.alt_response(403, schema=ErrorSchema, description=BLOCKED)
@blp.alt_response(404, schema=ErrorSchema, description=UNKNOWN)
@blp.alt_response(409, schema=ErrorSchema, description=CONFLICT)
def provider_hook(args: dict[str, Any], provider: str):
    """Where the provider sends the browser back (the redirect URI to register at the provider)."""
    return tokens_or_challenge(*oauth.finish(provider, args))


@blp.route("/authentication/<provider:provider>", methods=["POST"])
@blp.arguments(NativeSignInSchema)
@blp.response(200, UserTokensSchema)
@blp.alt_response(202, schema=TwoFaChallengeSchema, description="Two-factor is on: finish at twoFa/authorize")
@blp.alt_response(400, schema=ErrorSchema, description=PROVIDER_FAILED.replace("Unknown, used or expired state; ", ""))
@blp.alt_response(403, schema=ErrorSchema, description=BLOCKED)
@blp.alt_response(404, schema=ErrorSchema, description=UNKNOWN)
@blp.alt_response(409, schema=ErrorSchema, description=CONFLICT)
@blp.alt_response(429, schema=ErrorSchema, description="Too many sign-ins from this address (rateLimits.loginPerIp)")
def provider_sign_in(body: dict[str, Any], provider: str):
    """Native apps: sign in with an `id_token` from the provider's SDK (GitHub: an `access_token`)."""
    return tokens_or_challenge(oauth.sign_in_native(provider, body))
