"""What a signed-in user does to their own account (README, "Routes", "Tokens and sessions"): list
their sessions and end one, and delete the account with everything the modules keep for it.

It sits beside ``account`` in the module's layers (``users`` → ``sessions`` → ``twofa`` → ``signin`` →
``account``/``self_service`` → the routes) and adds no second way to do what those already do: ending a
session is the ``revoked`` flag every request already checks, and deleting runs the administrator's
:func:`account.delete_user` (the modules' ``trellis_user_deleted`` hooks in the same transaction).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select, update

from trellis import db
from trellis.errors import bad_request, not_found, unauthorized
from trellis.http import paginate
from trellis.passwords import verify_password

from . import account, twofa
from .models import Session
from .sessions import drop_connections, sessions_ended
from .users import get_user, release_connection

log = logging.getLogger(__name__)


def _open_sessions(user_id: str) -> Any:
    return select(Session).where(
        Session.user_id == user_id, Session.revoked.is_(False), Session.expires_at > db.utcnow()
    )


def session_dict(session: Session, current_id: str) -> dict[str, Any]:
    """A session as its owner sees it; ``lastUsedAt`` is its last sign-in or renew (access tokens are
    checked on every request without a write, so their use is not recorded)."""
    return {
        "_id": session.id,
        "createdAt": db.isoformat(session.created_at),
        "lastUsedAt": db.isoformat(session.renewed_at or session.created_at),
        "ip": session.ip,
        "userAgent": session.user_agent,
        "current": session.id == current_id,
    }


def list_sessions(user_id: str, current_id: str, skip: int, limit: int) -> dict[str, Any]:
    """The user's sessions that still work (not ended, not expired), the most recently used first."""
    rows, count = paginate(
        _open_sessions(user_id),
        skip,
        limit,
        order_by=(Session.renewed_at.desc().nulls_last(), Session.created_at.desc(), Session.id),
    )
    return {"sessions": [session_dict(row, current_id) for row in rows], "count": count}


def end_session(user_id: str, session_id: str) -> None:
    """End one of the user's sessions: its access and refresh tokens stop working with the next request.
    Another user's session, or one already ended, is a 404 (the same answer as an unknown id)."""
    ended = db.session.execute(
        update(Session)
        .where(Session.id == session_id, Session.user_id == user_id, Session.revoked.is_(False))
        .values(revoked=True)
        .execution_options(synchronize_session=False)
    )
    if db.rowcount(ended) != 1:
        db.session.rollback()
        raise not_found("No open session of yours has this id")
    sessions_ended()
    db.session.commit()
    log.info("user %s ended session %s", user_id, session_id)
    drop_connections(user_id)  # its sockets end; those of the user's other sessions reconnect


def delete_own_account(user_id: str, password: str | None, code: str | None) -> None:
    """Delete the account after proving it is the owner's: the password, or for a user without one (phone
    or provider sign-in) a current authenticator code or a recovery code. Nothing is deleted on a wrong
    proof (401), and what the modules keep for the user goes in the same transaction as the user."""
    user = get_user(user_id)
    stored, two_fa = user.password_hash, user.two_fa_enabled
    release_connection()  # no transaction held while argon2 runs
    if stored is not None:
        if password is None:
            raise bad_request("Send your password to delete your account", {"password": ["Required."]})
        if not verify_password(stored, password):
            raise unauthorized("The password is wrong")
    elif two_fa:
        if code is None:
            raise bad_request(
                "Send a current two-factor code (or a recovery code) to delete your account", {"code": ["Required."]}
            )
        twofa.confirm_with_code(user_id, code)
    else:
        raise bad_request(
            "This account has neither a password nor two-factor to confirm it is yours: set a password "
            "(forgot-password) or two-factor first",
            {"password": ["This account has no password."]},
        )
    account.delete_user(user_id)
    log.info("user %s deleted their own account", user_id)
