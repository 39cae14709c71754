"""Users, sessions and tokens. Routes and the user-token hook call these; nothing here knows HTTP shapes.

Tokens: the access token is a flask-jwt-extended JWT with ``kind="user"`` (so it never passes as an
admin token) and ``sid`` (the session). The refresh token is opaque random text; only its sha256 is
stored. Renew rotates it; a rotated token presented again revokes its session (reuse detection).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import secrets
import string
from datetime import datetime, timedelta
from typing import Any

from flask_jwt_extended import create_access_token
from sqlalchemy import Row, bindparam, or_, select, update
from sqlalchemy import delete as sql_delete
from sqlalchemy.exc import IntegrityError

from trellis import audit, connections, db, events, reads
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found, unauthorized
from trellis.hooks import call as hooks
from trellis.http import paginate
from trellis.module_config import get as get_config
from trellis.passwords import hash_password, needs_rehash, verify_password
from trellis.ratelimit import check as rate_limit
from trellis.ratelimit import client_ip

from . import delivery
from .models import RotatedToken, Session, User

MODULE = "authentication"
log = logging.getLogger(__name__)

# Columns of the user as other modules see it (``current_user()``), selected without the ORM.
USER_COLUMNS = (
    User.id,
    User.email,
    User.is_active,
    User.is_verified,
    User.phone_number,
    User.two_fa_enabled,
    User.providers,
    User.created_at,
    User.updated_at,
    User.extra,
)


def config() -> dict[str, Any]:
    return get_config(MODULE)


def normalise_email(email: str) -> str:
    return email.strip().lower()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def user_dict(user: User | Row[Any]) -> dict[str, Any]:
    """The public shape of a user: extension fields first, so they can never shadow ours."""
    result: dict[str, Any] = dict(user.extra or {})
    result.update(
        _id=user.id,
        email=user.email,
        isActive=user.is_active,
        isVerified=user.is_verified,
        phoneNumber=user.phone_number,
        twoFaEnabled=user.two_fa_enabled,
        providers=list(user.providers or []),
        createdAt=db.isoformat(user.created_at),
        updatedAt=db.isoformat(user.updated_at),
    )
    return result


def record_user_event(action: str, user: User) -> None:
    """``authentication.user.<action>`` with the user as the API shows it (no secrets), in the current
    transaction: every path that creates, blocks, unblocks or deletes a user calls it before committing."""
    events.record(f"authentication.user.{action}", {"user": user_dict(user)})


def user_id_of(event: events.Event) -> str | None:
    """The user of an ``authentication.user.<action>`` event."""
    user = event.payload.get("user") if isinstance(event.payload, dict) else None
    return user.get("_id") if isinstance(user, dict) and isinstance(user.get("_id"), str) else None


def _release_connection() -> None:
    """End the read-only transaction before argon2 runs (up to seconds under load), so that a queue of
    sign-ins waiting for a hashing slot does not hold the connection pool other requests need."""
    db.session.rollback()


# --- users -------------------------------------------------------------------------------------------


def password_problems(password: str, rules: dict[str, Any]) -> list[str]:
    problems = []
    if len(password) < rules["minLength"]:
        problems.append(f"Must be at least {rules['minLength']} characters long.")
    if len(password) > rules["maxLength"]:
        problems.append(f"Must be at most {rules['maxLength']} characters long.")
    if rules["requireLetter"] and not any(c.isalpha() for c in password):
        problems.append("Must contain a letter.")
    if rules["requireUppercase"] and not any(c.isupper() for c in password):
        problems.append("Must contain an upper-case letter.")
    if rules["requireDigit"] and not any(c.isdigit() for c in password):
        problems.append("Must contain a digit.")
    if rules["requireSymbol"] and not any(c in string.punctuation or c.isspace() for c in password):
        problems.append("Must contain a symbol.")
    return problems


def create_user(email: str, password: str) -> User:
    """A new active, unverified user (409 when the email is taken, 400 when the password breaks the rules)."""
    email = normalise_email(email)
    problems = password_problems(password, config()["passwordRules"])
    if problems:
        raise bad_request("The password does not meet the password rules", {"password": problems})
    taken = conflict("A user with this email already exists", {"email": ["Already registered."]})
    # Checked first so a duplicate costs no argon2 hash; the unique index still decides races.
    if db.session.execute(select(User.id).where(User.email == email)).first() is not None:
        raise taken
    _release_connection()
    password_hash = hash_password(password)
    now = db.utcnow()
    user = User(
        id=db.new_id(),
        email=email,
        password_hash=password_hash,
        is_active=True,
        is_verified=False,
        two_fa_enabled=False,
        providers=[],
        extra={},
        created_at=now,
        updated_at=now,
    )
    db.session.add(user)
    record_user_event("create", user)
    audit.record("authentication", "user.create", user.id, {"email": email})  # only when an admin creates
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise taken from None
    log.info("user %s registered", user.id)
    return user


def register(email: str, password: str) -> User:
    """Self-registration: honours ``registrationOpen`` and the per-IP limit; sends ``EmailVerification``
    when ``local.verification.sendEmail`` (the Email module must then be active: checked first)."""
    settings = config()
    if not settings["registrationOpen"]:
        raise forbidden("Registration is closed")
    rate_limit("auth-register-ip", client_ip(), settings["rateLimits"]["registerPerIp"])
    send = settings["local"]["verification"]["sendEmail"]
    if send:
        delivery.require_module("email")
        delivery.host_url()  # an untrusted Host is refused before the account exists
        delivery.limit_sends(normalise_email(email))
    user = create_user(email, password)
    if send:
        from .account import send_verification  # account builds on this module

        try:
            send_verification(user.id, user.email)
        except APIError as exc:  # e.g. the Email module's sender address does not validate
            # The account exists either way; resend-verification sends the link once mail works.
            db.session.rollback()
            log.warning("verification mail for user %s not sent: %s", user.id, exc.message)
    return user


def get_user(user_id: str) -> User:
    user = db.session.get(User, user_id)
    if user is None:
        raise not_found("No user with this id")
    return user


def list_users(
    skip: int, limit: int, search: str | None = None, is_active: bool | None = None
) -> tuple[list[User], int]:
    query = select(User)
    if search:
        query = query.where(User.email.contains(search.strip().lower(), autoescape=True))
    if is_active is not None:
        query = query.where(User.is_active.is_(is_active))
    return paginate(query, skip, limit, order_by=(User.created_at.desc(), User.id))


def set_active(user_id: str, active: bool) -> User:
    """Block or unblock. Blocking also ends every session, so unblocking means signing in again."""
    user = get_user(user_id)
    if user.is_active != active:  # blocking a blocked user changes nothing: no event
        user.is_active = active
        record_user_event("unblock" if active else "block", user)
    if not active:
        revoke_sessions(user_id)
    audit.record("authentication", "user.unblock" if active else "user.block", user_id)
    db.session.commit()
    log.info("user %s %s", user_id, "unblocked" if active else "blocked")
    if not active:
        drop_connections(user_id)
    return user


def revoke_sessions(user_id: str, keep: str | None = None) -> None:
    """End every session of the user but ``keep`` (the caller commits, then calls drop_connections)."""
    query = update(Session).where(Session.user_id == user_id, Session.revoked.is_(False))
    if keep is not None:
        query = query.where(Session.id != keep)
    db.session.execute(query.values(revoked=True))


def drop_connections(user_id: str) -> None:
    """After a commit that blocked the user or ended sessions: the user's live connections in this process
    end (``trellis.connections``; a block's event ends them in the others), and so do the ones
    ``trellis_user_blocked`` listeners hold; the ones of a session still valid reconnect with their token."""
    connections.end_user(user_id)
    try:
        hooks().trellis_user_blocked(user_id=user_id)
    except Exception:
        # The change is stored and every request already sees it; a listener that could not drop its
        # connections must not turn that into an error for the caller.
        log.exception("a trellis_user_blocked listener failed for user %s", user_id)


def delete_user(user_id: str) -> None:
    record_user_event("delete", get_user(user_id))
    # In the same transaction as the delete: other modules' clean-up commits with it, or nothing does.
    hooks().trellis_user_deleted(user_id=user_id)
    db.after_commit(functools.partial(connections.of().end_user, user_id))  # the other processes: by the event
    db.session.execute(sql_delete(User).where(User.id == user_id))  # sessions go by ON DELETE CASCADE
    audit.record("authentication", "user.delete", user_id)
    db.session.commit()
    log.info("user %s deleted", user_id)


# --- tokens ------------------------------------------------------------------------------------------


def _issue(user_id: str, session: Session, settings: dict[str, Any], now: datetime) -> dict[str, str]:
    """A fresh refresh token for ``session`` and an access token bound to it (the caller commits)."""
    refresh_token = secrets.token_urlsafe(32)
    session.refresh_hash = hash_token(refresh_token)
    session.expires_at = now + timedelta(days=settings["refreshTokenDays"])
    access_token = create_access_token(
        identity=user_id,
        additional_claims={"kind": "user", "sid": session.id},
        expires_delta=timedelta(minutes=settings["accessTokenMinutes"]),
    )
    return {"accessToken": access_token, "refreshToken": refresh_token, "userId": user_id}


def start_session(user_id: str, settings: dict[str, Any] | None = None) -> dict[str, str]:
    """A new session of the user and its token pair (commits)."""
    now = db.utcnow()
    session = Session(id=db.new_id(), user_id=user_id, created_at=now)
    tokens = _issue(user_id, session, settings or config(), now)
    db.session.add(session)
    db.session.commit()
    return tokens


def login(email: str, password: str) -> dict[str, Any]:
    """Check the password; 401 for a wrong pair, 403 for a blocked user (only after a right password) or an
    unverified one when verification is required. With two-factor on: ``{twoFaRequired, twoFaToken}``."""
    settings = config()
    email = normalise_email(email)
    limits = settings["rateLimits"]
    rate_limit("auth-login-ip", client_ip(), limits["loginPerIp"])
    # Keyed by a digest so the limiter store (Redis) holds no email addresses.
    rate_limit("auth-login-email", hash_token(email), limits["loginPerEmail"])
    user = db.session.execute(
        select(User.id, User.password_hash, User.is_active, User.is_verified, User.two_fa_enabled).where(
            User.email == email
        )
    ).one_or_none()
    _release_connection()
    # An unknown email still costs one argon2 verify, so timing does not tell which emails exist.
    if not verify_password(user.password_hash if user else None, password) or user is None:
        raise unauthorized("Wrong email or password")
    if not user.is_active:
        raise forbidden("This user is blocked")
    if settings["local"]["verification"]["required"] and not user.is_verified:
        raise forbidden("Verify your email address first (see the link we sent; resend-verification sends it again)")
    if needs_rehash(user.password_hash):
        new_hash = hash_password(password)
        db.session.execute(update(User).where(User.id == user.id).values(password_hash=new_hash))
    # Enrolled users keep their second factor even if an administrator switches the feature off later.
    if user.two_fa_enabled:
        from .twofa import second_factor_challenge  # two-factor builds on this module

        return second_factor_challenge(user.id)
    return start_session(user.id, settings)


def renew(refresh_token: str) -> dict[str, str]:
    """Exchange a refresh token for a new pair; the presented one is retired for good."""
    settings = config()
    token_hash = hash_token(refresh_token)
    # Row lock (PostgreSQL): two renews of one token serialise, and the second sees it as reused.
    found = db.session.execute(
        select(Session, User.is_active)
        .join(User, User.id == Session.user_id)
        .where(Session.refresh_hash == token_hash)
        .with_for_update(of=Session)
    ).one_or_none()
    if found is None:
        rotated = db.session.get(RotatedToken, token_hash)
        if rotated is None:
            raise unauthorized("Invalid refresh token")
        db.session.execute(update(Session).where(Session.id == rotated.session_id).values(revoked=True))
        db.session.commit()
        log.warning("refresh token reuse on session %s; session revoked", rotated.session_id)
        raise unauthorized("This refresh token was already used; the session has been revoked")
    session, active = found
    now = db.utcnow()
    if not active:  # before "revoked", as in user_from_claims: blocking revokes sessions too
        raise forbidden("This user is blocked")
    if session.revoked:
        raise unauthorized("The session has ended; sign in again")
    if session.expires_at <= now:
        raise unauthorized("Refresh token expired; sign in again")
    db.session.add(RotatedToken(token_hash=token_hash, session_id=session.id))
    session.renewed_at = now
    tokens = _issue(session.user_id, session, settings, now)
    db.session.commit()
    return tokens


def logout(session_id: str) -> None:
    db.session.execute(update(Session).where(Session.id == session_id).values(revoked=True))
    db.session.commit()


def purge_sessions() -> int:
    """Delete ended and expired sessions (their rotated tokens go with them); returns how many."""
    result = db.session.execute(
        sql_delete(Session).where(or_(Session.revoked.is_(True), Session.expires_at <= db.utcnow()))
    )
    db.session.commit()
    return result.rowcount


# Built once: every user request runs it.
_USER_OF_SESSION = (
    select(*USER_COLUMNS, Session.revoked, Session.expires_at)
    .join(Session, Session.user_id == User.id)
    .where(Session.id == bindparam("session_id"), User.id == bindparam("user_id"))
)


def user_from_claims(claims: dict[str, Any]) -> dict[str, Any]:
    """The user of a verified access token: one primary-key lookup of the user joined to its session."""
    user_id, session_id = claims.get("sub"), claims.get("sid")
    if not isinstance(user_id, str) or not isinstance(session_id, str):
        raise unauthorized("Invalid token")
    row = reads.read_one(_USER_OF_SESSION, session_id=session_id, user_id=user_id)
    if row is None:
        raise unauthorized("The session of this token no longer exists")
    # Blocked before revoked: blocking also revokes sessions, and the caller should learn why.
    if not row.is_active:
        raise forbidden("This user is blocked")
    if row.revoked or row.expires_at <= db.utcnow():
        raise unauthorized("The session of this token has ended; sign in again")
    return user_dict(row)


def session_of(claims: dict[str, Any]) -> str:
    session_id = claims.get("sid")
    if not isinstance(session_id, str):
        raise unauthorized("Invalid token")
    return session_id
