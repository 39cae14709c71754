"""Signing in: what follows a passed first factor, whichever it was (password, magic link, phone code,
provider), and the first factor of local sign-in, the password."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, select, update

from trellis import db
from trellis.errors import forbidden, unauthorized
from trellis.passwords import hash_password, needs_rehash, verify_password
from trellis.ratelimit import check as rate_limit
from trellis.ratelimit import client_ip

from . import twofa
from .models import User
from .sessions import start_session
from .tokens import digest
from .users import config, normalise_email, release_connection, require_active


def finish_sign_in(
    user: User | Row[*tuple[Any, ...]], *, by_phone_code: bool = False, settings: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The first factor passed: the token pair, or for a user enrolled in two-factor the challenge
    ``{twoFaRequired, twoFaToken}``. Enrolled users keep their second factor even if an administrator
    switches the feature off later. ``by_phone_code``: the first factor was an SMS code, which already is
    the second one of a user whose method is phone."""
    if user.two_fa_enabled and not (by_phone_code and user.two_fa_method == twofa.PHONE):
        return twofa.second_factor_challenge(user.id)
    return start_session(user.id, settings)


def login(email: str, password: str) -> dict[str, Any]:
    """Check the password; 401 for a wrong pair, 403 for a blocked user (only after a right password) or an
    unverified one when verification is required. With two-factor on: ``{twoFaRequired, twoFaToken}``."""
    settings = config()
    email = normalise_email(email)
    limits = settings["rateLimits"]
    rate_limit("auth-login-ip", client_ip(), limits["loginPerIp"])
    # Keyed by a digest so the limiter store (Redis) holds no email addresses.
    rate_limit("auth-login-email", digest(email), limits["loginPerEmail"])
    user = db.session.execute(
        select(User.id, User.password_hash, User.is_active, User.is_verified, User.two_fa_enabled).where(
            User.email == email
        )
    ).one_or_none()
    release_connection()
    # An unknown email still costs one argon2 verify, so timing does not tell which emails exist.
    if not verify_password(user.password_hash if user else None, password) or user is None:
        raise unauthorized("Wrong email or password")
    require_active(user)
    if settings["local"]["verification"]["required"] and not user.is_verified:
        raise forbidden("Verify your email address first (see the link we sent; resend-verification sends it again)")
    if needs_rehash(user.password_hash):
        new_hash = hash_password(password)
        db.session.execute(update(User).where(User.id == user.id).values(password_hash=new_hash))
    return finish_sign_in(user, settings=settings)
