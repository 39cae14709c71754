"""Sign-in sessions and their tokens.

The access token is a flask-jwt-extended JWT with ``kind="user"`` (so it never passes as an admin token)
and ``sid`` (the session). The refresh token is opaque random text; only its sha256 is stored. Renew
rotates it; a rotated token presented again revokes its session (reuse detection).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from flask import has_request_context, request
from flask_jwt_extended import create_access_token
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy import delete as sql_delete

from trellis import connections, db, reads, statements
from trellis.cache import Remembered
from trellis.errors import forbidden, unauthorized
from trellis.hooks import call as hooks
from trellis.ratelimit import client_ip

from .models import RotatedToken, Session, User
from .tokens import digest
from .users import USER_COLUMNS, config, user_dict

log = logging.getLogger(__name__)


# Longer user agents are cut: the column is for telling sessions apart, not for forensics.
USER_AGENT_MAX = 512


def _note_client(session: Session) -> None:
    """Where the session is used from: the client address (``client_ip``, proxies as configured) and user
    agent of the request that signs in or renews, when there is one (the CLI has none)."""
    if has_request_context():
        session.ip = client_ip()
        session.user_agent = (request.headers.get("User-Agent") or "")[:USER_AGENT_MAX] or None


def _issue(user_id: str, session: Session, settings: dict[str, Any], now: datetime) -> dict[str, str]:
    """A fresh refresh token for ``session`` and an access token bound to it (the caller commits)."""
    _note_client(session)
    refresh_token = secrets.token_urlsafe(32)
    session.refresh_hash = digest(refresh_token)
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


def renew(refresh_token: str) -> dict[str, str]:
    """Exchange a refresh token for a new pair; the presented one is retired for good."""
    settings = config()
    token_hash = digest(refresh_token)
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
        user_id = db.session.execute(
            update(Session).where(Session.id == rotated.session_id).values(revoked=True).returning(Session.user_id)
        ).scalar_one_or_none()
        sessions_ended()
        db.session.commit()
        log.warning("refresh token reuse on session %s; session revoked", rotated.session_id)
        if user_id is not None:
            drop_connections(user_id)  # what the stolen pair had opened closes too
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
    """End the session; its user's live connections close, as when a session is ended from the list."""
    user_id = db.session.execute(
        update(Session).where(Session.id == session_id).values(revoked=True).returning(Session.user_id)
    ).scalar_one_or_none()
    sessions_ended()
    db.session.commit()
    if user_id is not None:
        drop_connections(user_id)


def revoke_sessions(user_id: str, keep: str | None = None) -> None:
    """End every session of the user but ``keep`` (the caller commits, then calls drop_connections)."""
    query = update(Session).where(Session.user_id == user_id, Session.revoked.is_(False))
    if keep is not None:
        query = query.where(Session.id != keep)
    db.session.execute(query.values(revoked=True))
    sessions_ended()


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


def purge_sessions() -> int:
    """Delete ended and expired sessions (their rotated tokens go with them); returns how many."""
    result = db.session.execute(
        sql_delete(Session).where(or_(Session.revoked.is_(True), Session.expires_at <= db.utcnow()))
    )
    db.session.commit()
    return db.rowcount(result)


# Built once, and prepared on the server (PostgreSQL): every user request runs it.
_USER_OF_SESSION = (
    select(*USER_COLUMNS, Session.revoked, Session.expires_at)
    .join(Session, Session.user_id == User.id)
    .where(Session.id == bindparam("session_id"), User.id == bindparam("user_id"))
    .execution_options(**statements.PREPARE)
)


def user_from_claims(claims: dict[str, Any]) -> Mapping[str, Any]:
    """The user of a verified access token. Each process remembers the sessions it found valid (until
    their end, beside the ``authentication-sessions`` generation that ending a session, blocking or
    deleting a user bumps: :func:`sessions_ended`), so a request of a known session reads nothing here;
    its user's other fields are read when a route asks for them (:class:`SessionUser`). The lookup was
    a second round trip on every user request (``bench/results/modules.md#known-sessions``)."""
    user_id, session_id = claims.get("sub"), claims.get("sid")
    if not isinstance(user_id, str) or not isinstance(session_id, str):
        raise unauthorized("Invalid token")
    now = db.utcnow()
    read: list[dict[str, Any]] = []

    def check() -> datetime:
        row = reads.read_one(_USER_OF_SESSION, session_id=session_id, user_id=user_id)
        if row is None:
            raise unauthorized("The session of this token no longer exists")
        # Blocked before revoked: blocking also revokes sessions, and the caller should learn why.
        if not row.is_active:
            raise forbidden("This user is blocked")
        if row.revoked or row.expires_at <= now:
            raise unauthorized("The session of this token has ended; sign in again")
        read.append(user_dict(row))
        return row.expires_at

    # A remembered end that has passed is read again: a renew moves a session's end later.
    VALID_SESSIONS.get((session_id, user_id), check, usable=lambda ends: ends > now)
    return read[0] if read else SessionUser(user_id)


class SessionUser(Mapping[str, Any]):
    """The user of a session this process remembers as valid: its id at once, the rest read when a route
    first asks (``current_user()``); most routes need only the id."""

    def __init__(self, user_id: str) -> None:
        self._id = user_id
        self._user: dict[str, Any] | None = None

    def _loaded(self) -> dict[str, Any]:
        if self._user is None:
            row = reads.read_one(_USER, user_id=self._id)
            if row is None:  # deleted since: its sessions went with it
                raise unauthorized("The session of this token no longer exists")
            self._user = user_dict(row)
        return self._user

    def __getitem__(self, key: str) -> Any:
        return self._id if key == "_id" else self._loaded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


_USER = select(*USER_COLUMNS).where(User.id == bindparam("user_id")).execution_options(**statements.PREPARE)
VALID_SESSIONS = Remembered("authentication-sessions")


def sessions_ended() -> None:
    """In the transaction that ends sessions (revoked, or their user blocked or deleted): no process
    takes them for valid from its memory after the commit."""
    VALID_SESSIONS.bump()


def session_of(claims: dict[str, Any]) -> str:
    session_id = claims.get("sid")
    if not isinstance(session_id, str):
        raise unauthorized("Invalid token")
    return session_id
