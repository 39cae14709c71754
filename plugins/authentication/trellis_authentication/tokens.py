"""Single-use tokens of every kind, in one table (``auth_tokens``).

A token is 256 random bits, handed out once and stored as its sha256. A code sent by SMS (6 digits) is
stored beside the token that identifies it, hashed with the row's id, and allows ``MAX_TRIES`` wrong
guesses. Using a token is one conditional UPDATE (``… WHERE consumed_at IS NULL``): when two requests
use the same token at once, the database lets exactly one of them mark it, and the other sees 0 rows.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from sqlalchemy import case, delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from trellis import db

from .models import AuthToken

VERIFY_EMAIL = "verify-email"
RESET_PASSWORD = "reset-password"
CHANGE_EMAIL = "change-email"
MAGIC_LINK = "magic-link"
PHONE_SIGN_IN = "phone-sign-in"
TWO_FA_SIGN_IN = "two-fa-sign-in"  # between the password and the second factor
TWO_FA_SETUP = "two-fa-setup"  # the SMS code that confirms a phone as second factor
TWO_FA_DISABLE = "two-fa-disable"  # the SMS code that switches phone two-factor off
RECOVERY_CODE = "recovery-code"
OAUTH_STATE = "oauth-state"  # a provider sign-in between init and hook: its nonce and PKCE verifier
TOTP_STEP = "totp-step"  # an accepted TOTP code (user and 30 s step): the same code is not accepted again
CODE_TRIES = "code-tries"  # codes tried by one user (or phone number) since the last right one, in ``tries``

# README, "Account lifecycle"; None: valid until used (recovery codes).
LIFETIMES: dict[str, timedelta | None] = {
    VERIFY_EMAIL: timedelta(hours=24),
    RESET_PASSWORD: timedelta(hours=1),
    CHANGE_EMAIL: timedelta(hours=24),
    MAGIC_LINK: timedelta(minutes=15),
    PHONE_SIGN_IN: timedelta(minutes=10),
    TWO_FA_SIGN_IN: timedelta(minutes=10),
    TWO_FA_SETUP: timedelta(minutes=10),
    TWO_FA_DISABLE: timedelta(minutes=10),
    RECOVERY_CODE: None,
    OAUTH_STATE: timedelta(minutes=10),
    # Longer than a code is accepted (its own step and one either side: at most 90 s after it was taken).
    TOTP_STEP: timedelta(minutes=3),
}
MAX_TRIES = 5
# Codes one user may try on every route that takes one (two-factor, phone sign-in) before a lockout of
# CODE_LOCKOUT; counted in the database, so every process sees the same count.
MAX_CODE_TRIES = 5
CODE_LOCKOUT = timedelta(minutes=15)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _code_digest(row_id: str, code: str) -> str:
    return hashlib.sha256(f"{row_id}:{code}".encode()).hexdigest()


def new_code() -> str:
    return f"{secrets.randbelow(10**6):06d}"


def issue(
    kind: str,
    user_id: str | None,
    data: dict[str, Any] | None = None,
    *,
    code: str | None = None,
    token: str | None = None,
) -> str:
    """Add a token of ``kind`` (the caller commits) and return it; ``code`` is kept hashed beside it."""
    token = token or secrets.token_urlsafe(32)
    now = db.utcnow()
    lifetime = LIFETIMES[kind]
    row = AuthToken(
        id=db.new_id(),
        kind=kind,
        token_hash=digest(token),
        user_id=user_id,
        data=data or {},
        tries=0,
        created_at=now,
        expires_at=now + lifetime if lifetime else None,
    )
    if code is not None:
        row.code_hash = _code_digest(row.id, code)
    db.session.add(row)
    return token


def find(kind: str, token: str) -> AuthToken | None:
    """The unused, unexpired token of ``kind``, or None (unknown, used and expired look the same)."""
    if not isinstance(token, str) or not token or len(token) > 512:
        return None
    return db.session.execute(
        select(AuthToken).where(AuthToken.token_hash == digest(token), AuthToken.kind == kind, _usable())
    ).scalar_one_or_none()


def user_of(row: AuthToken) -> str:
    """The user a token was issued to: every kind but a phone sign-in's (whose user may not exist yet) has one."""
    if row.user_id is None:
        raise RuntimeError(f"a {row.kind} token names no user")
    return row.user_id


def latest_for_user(kind: str, user_id: str) -> AuthToken | None:
    """The newest usable token of ``kind`` of a user (codes confirmed without a token: two-factor set-up)."""
    return db.session.execute(
        select(AuthToken)
        .where(AuthToken.kind == kind, AuthToken.user_id == user_id, _usable())
        .order_by(AuthToken.created_at.desc(), AuthToken.id.desc())
        .limit(1)
    ).scalar_one_or_none()


def _usable() -> Any:
    return AuthToken.consumed_at.is_(None) & or_(AuthToken.expires_at.is_(None), AuthToken.expires_at > db.utcnow())


def consume(row: AuthToken) -> bool:
    """Mark ``row`` used, in the caller's transaction; False when another request used it first."""
    result = db.session.execute(
        update(AuthToken)
        .where(AuthToken.id == row.id, AuthToken.consumed_at.is_(None))
        .values(consumed_at=db.utcnow())
        .execution_options(synchronize_session=False)
    )
    return db.rowcount(result) == 1


def code_matches(row: AuthToken, code: str) -> bool:
    return row.code_hash is not None and hmac.compare_digest(row.code_hash, _code_digest(row.id, code))


def count_wrong_try(row: AuthToken) -> int:
    """Count a wrong code (atomically) and commit; the last allowed try uses the token up. Tries left."""
    db.session.execute(
        update(AuthToken)
        .where(AuthToken.id == row.id, AuthToken.consumed_at.is_(None))
        .values(
            tries=AuthToken.tries + 1,
            consumed_at=case((AuthToken.tries + 1 >= MAX_TRIES, db.utcnow()), else_=None),
        )
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    return max(0, MAX_TRIES - (row.tries + 1))


# The links that act for whoever holds the account's password: a new password ends them all.
PASSWORD_BOUND = (RESET_PASSWORD, MAGIC_LINK, CHANGE_EMAIL)


def retire(kind: str | tuple[str, ...], user_id: str) -> None:
    """Use up every open token of ``kind`` (or of each of several kinds) of a user (a new one replaces
    them, or a new password ends them; the caller commits)."""
    kinds = (kind,) if isinstance(kind, str) else kind
    db.session.execute(
        update(AuthToken)
        .where(AuthToken.kind.in_(kinds), AuthToken.user_id == user_id, AuthToken.consumed_at.is_(None))
        .values(consumed_at=db.utcnow())
        .execution_options(synchronize_session=False)
    )


def take(kind: str, token: str) -> AuthToken | None:
    """Use up the unused, unexpired token of ``kind`` with one UPDATE and return it (the caller commits);
    None when it is unknown, used, expired, or another request took it first.

    Start a fresh transaction before calling it: on SQLite (WAL) a transaction that read first and then
    writes fails at once when another process wrote in between, while one that writes first waits for
    the lock. Two processes finishing the same sign-in then see exactly one winner on both databases.
    """
    if not isinstance(token, str) or not token or len(token) > 512:
        return None
    token_hash = digest(token)
    result = db.session.execute(
        update(AuthToken)
        .where(AuthToken.token_hash == token_hash, AuthToken.kind == kind, _usable())
        .values(consumed_at=db.utcnow())
        .execution_options(synchronize_session=False)
    )
    if db.rowcount(result) != 1:
        return None
    return db.session.execute(select(AuthToken).where(AuthToken.token_hash == token_hash)).scalar_one()


def claim(kind: str, user_id: str, token: str) -> bool:
    """Record ``token`` as used, once: False when it was recorded before (by any process). The unique index
    on the digest decides; call it in a fresh transaction (its INSERT first), and on False the transaction
    is rolled back."""
    now = db.utcnow()
    db.session.add(
        AuthToken(
            id=db.new_id(),
            kind=kind,
            token_hash=digest(token),
            user_id=user_id,
            data={},
            tries=0,
            created_at=now,
            expires_at=now + LIFETIMES[kind],  # type: ignore[operator]
            consumed_at=now,
        )
    )
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        return False
    # Earlier claims of the user that can no longer match a code go with it.
    db.session.execute(
        delete(AuthToken)
        .where(AuthToken.kind == kind, AuthToken.user_id == user_id, AuthToken.expires_at <= now)
        .execution_options(synchronize_session=False)
    )
    return True


def _tries_hash(subject: str) -> str:
    return digest(f"{CODE_TRIES}:{subject}")


def count_code_try(subject: str, user_id: str | None) -> float | None:
    """Count one code about to be checked for ``subject`` (a user id, or the phone number of a sign-in)
    and commit; the seconds until codes are taken again when this one is over the limit, else None.

    The try is counted before the code is checked, in one UPDATE, so concurrent guesses cannot slip past
    the limit; a right code clears the count (:func:`clear_code_tries`). The count starts again after
    ``CODE_LOCKOUT`` without tries; the ``MAX_CODE_TRIES``-th try starts a full lockout. Ends the current
    transaction first: the UPDATE must be the first statement of its own (SQLite then waits for the lock).
    """
    db.session.commit()
    token_hash = _tries_hash(subject)
    for _ in range(3):  # update, or insert the first try; a lost race to insert updates the winner's row
        now = db.utcnow()
        stale = AuthToken.expires_at <= now
        row = db.session.execute(
            update(AuthToken)
            .where(AuthToken.token_hash == token_hash, AuthToken.kind == CODE_TRIES)
            .values(
                tries=case((stale, 1), else_=AuthToken.tries + 1),
                expires_at=case(
                    (stale, now + CODE_LOCKOUT),
                    (AuthToken.tries + 1 == MAX_CODE_TRIES, now + CODE_LOCKOUT),
                    else_=AuthToken.expires_at,
                ),
            )
            .returning(AuthToken.tries, AuthToken.expires_at)
            .execution_options(synchronize_session=False)
        ).one_or_none()
        if row is None:
            db.session.add(
                AuthToken(
                    id=db.new_id(),
                    kind=CODE_TRIES,
                    token_hash=token_hash,
                    user_id=user_id,
                    data={},
                    tries=1,
                    created_at=now,
                    expires_at=now + CODE_LOCKOUT,
                )
            )
            try:
                db.session.commit()
            except IntegrityError:  # another request counted the first try at the same moment
                db.session.rollback()
                continue
            return None
        db.session.commit()
        tries, until = row
        assert until is not None  # the update sets it in every case
        if tries > MAX_CODE_TRIES:
            return max(1.0, (until - now).total_seconds())
        return None
    raise RuntimeError("the count of code tries was neither updated nor inserted")


def clear_code_tries(subject: str) -> None:
    """A right code: the count starts again (in the caller's transaction)."""
    db.session.execute(
        delete(AuthToken)
        .where(AuthToken.token_hash == _tries_hash(subject), AuthToken.kind == CODE_TRIES)
        .execution_options(synchronize_session=False)
    )
