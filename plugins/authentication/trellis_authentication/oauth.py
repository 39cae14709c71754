"""Sign-in with external providers (README, "Sign-in with external providers").

Web flow: ``start`` keeps the sign-in's state (random, 256 bits, stored hashed), nonce and PKCE verifier in
the single-use token table (``tokens.OAUTH_STATE``, 10 minutes), so whichever process receives the
provider's redirect can finish it; ``finish`` uses the state up first (one conditional UPDATE: a state
works once, even when two requests race), then exchanges the code. Native flow: ``sign_in_native`` checks
an ID token (or a GitHub access token) the app obtained itself.

Then the user: the one already linked to the provider's subject, else the user whose email the provider
vouches for (verified), else a new one (``isVerified`` as the provider says). Linking an account whose
owner never verified the address also removes its password and ends its sessions: whoever registered it
did not prove they own the address, the provider's user just did. Provider calls happen with no database
transaction open, and the user, the identity and ``providers`` are written in one transaction, so a
failure leaves nothing half-made.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import g
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError

from trellis import db
from trellis.errors import APIError, bad_request, conflict, forbidden
from trellis.ratelimit import check as rate_limit
from trellis.ratelimit import client_ip

from . import delivery, providers, tokens
from .delivery import HOOK
from .models import Identity, User
from .providers import GITHUB, Profile, Provider, ProviderError
from .sessions import drop_connections, revoke_sessions
from .signin import finish_sign_in
from .users import config, new_user, require_active, taken

log = logging.getLogger(__name__)


def _provider(name: str) -> Provider:
    """The enabled provider (404 otherwise). Ends the read transaction the config lookup may have opened:
    no database connection is held while a provider takes up to ``oauth.timeoutSeconds`` to answer."""
    provider = providers.configured(config()["oauth"], name)
    db.session.rollback()
    return provider


def _limit() -> None:
    """Each call starts work at a provider (and init writes a row): the sign-in limit per client address."""
    rate_limit("auth-login-ip", client_ip(), config()["rateLimits"]["loginPerIp"])


def _refused(name: str, exc: ProviderError) -> APIError:
    # The request id is in the answer too, so an answer can be matched to this line (also when the log
    # goes to a handler without the core's request-id format).
    log.warning("sign-in with %s refused (request %s): %s", name, g.get("request_id", "-"), exc)
    return bad_request(f"Sign-in with {name} failed: {exc}")


def callback_url(name: str) -> str:
    """The redirect URI to register at the provider: ``{hostUrl}/hook/authentication/{name}``."""
    return f"{delivery.host_url()}{HOOK}/{name}"


# --- web flow ----------------------------------------------------------------------------------------


def start(name: str) -> str:
    """The provider's authorization URL for a new sign-in (state, nonce and PKCE stored here)."""
    provider = _provider(name)
    _limit()
    try:
        provider = providers.resolve(provider)
    except ProviderError as exc:
        raise _refused(name, exc) from None
    secrets = providers.new_secrets()
    callback = callback_url(name)
    state = tokens.issue(tokens.OAUTH_STATE, None, {"provider": name, "callback": callback, **secrets})
    db.session.commit()
    return providers.authorization_url(provider, callback, state, secrets["nonce"], secrets["verifier"])


def finish(name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The provider sent the browser back: the token pair (or a two-factor challenge) and where to send it."""
    provider = _provider(name)  # no transaction open now: tokens.take writes first in its own
    row = tokens.take(tokens.OAUTH_STATE, args.get("state") or "")
    started = dict(row.data) if row is not None else {}
    db.session.commit()  # the state is used up whatever happens next (also at another provider's hook)
    if started.get("provider") != name:
        raise bad_request("This sign-in is unknown, used or expired (state); start it again", {"state": ["Invalid."]})
    if args.get("error"):
        code = providers.error_code(args["error"])
        raise _refused(name, ProviderError(f"the provider did not sign the user in ({code})"))
    if not args.get("code"):
        raise bad_request("The provider sent no code", {"code": ["Missing."]})
    try:
        provider = providers.resolve(provider)
        profile = providers.profile_from_code(
            provider, args["code"], started["callback"], started["nonce"], started["verifier"]
        )
    except ProviderError as exc:
        raise _refused(name, exc) from None
    return sign_in(name, profile), provider.redirect_uri


# --- native flow -------------------------------------------------------------------------------------


def sign_in_native(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """An ID token (OpenID Connect providers) or a GitHub access token obtained by the app itself."""
    provider = _provider(name)
    _limit()
    if provider.kind == GITHUB:
        if not body.get("access_token"):
            raise bad_request("Sign-in with GitHub takes an access_token", {"access_token": ["Required for github."]})
    elif not body.get("id_token"):
        raise bad_request(f"Sign-in with {name} takes an id_token", {"id_token": [f"Required for {name}."]})
    try:
        provider = providers.resolve(provider)
        if provider.kind == GITHUB:
            profile = providers.profile_from_github_token(provider, body["access_token"])
        else:
            profile = providers.profile_from_id_token(provider, body["id_token"], body.get("nonce"))
    except ProviderError as exc:
        raise _refused(name, exc) from None
    return sign_in(name, profile)


# --- the user ----------------------------------------------------------------------------------------


def sign_in(name: str, profile: Profile) -> dict[str, Any]:
    return finish_sign_in(_user_for(name, profile))  # the provider is the first factor


def _user_for(name: str, profile: Profile) -> User:
    """The linked, linked-now or new user (committed). A race with another first sign-in of the same
    account (unique index on provider and subject, or on email) is settled by looking again; so is, on
    SQLite, another process writing between our read and our write (WAL refuses that write at once)."""
    for attempt in range(3):
        db.session.rollback()
        try:
            return _find_link_or_create(name, profile)
        except IntegrityError:
            db.session.rollback()
        except OperationalError as exc:
            db.session.rollback()
            if db.is_postgresql() or "locked" not in str(exc.orig):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise conflict("This account was being signed in from elsewhere at the same moment; try again")


def _find_link_or_create(name: str, profile: Profile) -> User:
    found = db.session.execute(
        select(User, Identity)
        .join(Identity, Identity.user_id == User.id)
        .where(Identity.provider == name, Identity.subject == profile.subject)
    ).one_or_none()
    if found is not None:
        user, identity = found
        require_active(user)
        if profile.email and identity.email != profile.email:
            identity.email = profile.email
        db.session.commit()
        return user
    existing = None
    if profile.email and profile.email_verified:
        existing = db.session.execute(select(User).where(User.email == profile.email)).scalar_one_or_none()
    if existing is not None:
        return _link(existing, name, profile)
    return _create(name, profile)


def _identity(user_id: str, name: str, profile: Profile) -> Identity:
    return Identity(
        id=db.new_id(),
        provider=name,
        subject=profile.subject,
        user_id=user_id,
        email=profile.email,
        created_at=db.utcnow(),
    )


def _link(user: User, name: str, profile: Profile) -> User:
    """Link the provider account to the user who has its verified email."""
    require_active(user)
    unproven = not user.is_verified and user.password_hash is not None
    if unproven:
        user.password_hash = None
        revoke_sessions(user.id)
    user.is_verified = True
    user.providers = sorted({*(user.providers or []), name})
    user.updated_at = db.utcnow()
    db.session.add(_identity(user.id, name, profile))
    db.session.commit()
    if unproven:
        log.warning(
            "user %s: unverified account linked to %s by its verified email; password removed, sessions ended",
            user.id,
            name,
        )
        drop_connections(user.id)
    else:
        log.info("user %s linked to %s by verified email", user.id, name)
    return user


def _create(name: str, profile: Profile) -> User:
    if not config()["registrationOpen"]:
        db.session.rollback()
        raise forbidden("Registration is closed")
    if profile.email and taken(User.email, profile.email):
        db.session.rollback()
        # The provider does not vouch for the address, so it proves nothing about that account.
        raise conflict(
            f"A user with this email exists and {name} has not verified the address; sign in another way",
            {"email": ["Already registered."]},
        )
    user = new_user(email=profile.email, is_verified=profile.email_verified, providers=[name])
    db.session.add(_identity(user.id, name, profile))
    db.session.commit()
    log.info("user %s created by sign-in with %s", user.id, name)
    return user
