"""Users: the lowest layer of the module (the model, its shape, creating and finding users).

The module is built in layers, each importing only the ones below it (``tests/test_import_graph.py``
keeps it so): ``models``/``tokens``/``delivery`` → ``users`` → ``sessions`` → ``twofa`` → ``signin`` →
``account``/``phone``/``oauth`` → the routes. ``service`` is what other modules call.
"""

from __future__ import annotations

import logging
import string
from typing import Any

from sqlalchemy import Row, select

from trellis import db, events, statements
from trellis.errors import bad_request, forbidden, not_found
from trellis.http import paginate
from trellis.module_config import get as get_config

from .models import User

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


def user_dict(user: User | Row[*tuple[Any, ...]]) -> dict[str, Any]:
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


def user_id_of(event: events.Event) -> str | None:
    """The user of an ``authentication.user.<action>`` event."""
    user = event.payload.get("user") if isinstance(event.payload, dict) else None
    return user.get("_id") if isinstance(user, dict) and isinstance(user.get("_id"), str) else None


def record_user_event(action: str, user: User) -> None:
    """``authentication.user.<action>`` with the user as the API shows it (no secrets), in the current
    transaction: every path that creates, blocks, unblocks or deletes a user calls it before committing."""
    events.record(f"authentication.user.{action}", {"user": user_dict(user)})


def release_connection() -> None:
    """End the read-only transaction before argon2 runs (up to seconds under load), so that a queue of
    sign-ins waiting for a hashing slot does not hold the connection pool other requests need."""
    db.session.rollback()


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


def check_password_rules(password: str, field: str = "password") -> None:
    """400 listing what ``password`` breaks of the configured rules, under ``field``."""
    problems = password_problems(password, config()["passwordRules"])
    if problems:
        raise bad_request("The password does not meet the password rules", {field: problems})


def new_user(
    *,
    email: str | None = None,
    password_hash: str | None = None,
    phone_number: str | None = None,
    is_verified: bool = False,
    providers: list[str] | None = None,
) -> User:
    """Add an active user and its ``create`` event to the current transaction (the caller commits). The row
    is flushed, so a taken email or phone number raises ``IntegrityError`` here, for the caller to answer."""
    now = db.utcnow()
    user = User(
        id=db.new_id(),
        email=email,
        password_hash=password_hash,
        is_active=True,
        is_verified=is_verified,
        phone_number=phone_number,
        two_fa_enabled=False,
        providers=providers or [],
        extra={},
        created_at=now,
        updated_at=now,
    )
    db.session.add(user)
    db.session.flush()
    record_user_event("create", user)
    return user


def get_user(user_id: str) -> User:
    user = db.session.get(User, user_id)
    if user is None:
        raise not_found("No user with this id")
    return user


def require_active(user: User | Row[*tuple[Any, ...]]) -> None:
    """403 for a blocked user; what the request wrote so far (a token it used up) is rolled back."""
    if not user.is_active:
        db.session.rollback()
        raise forbidden("This user is blocked")


def taken(column: Any, value: Any, user_id: str | None = None) -> bool:
    """Whether a user (other than ``user_id``) has ``value`` in ``column`` (``User.email``, ``User.phone_number``)."""
    query = select(User.id).where(column == value)
    if user_id is not None:
        query = query.where(User.id != user_id)
    return db.session.execute(query).first() is not None


def existing_ids(user_ids: list[str]) -> set[str]:
    """Which of ``user_ids`` are users (one query, in the session's transaction: it sees what the caller
    wrote there, flushed first as the session's own queries would)."""
    if not user_ids:
        return set()
    return statements.existing_ids(db.flushed_connection(), (User.__table__.c.id, user_ids))[0]


def public_users(user_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{id: {"_id", "email"}}`` of the ids that are users (one query): nothing else of a user is public."""
    if not user_ids:
        return {}
    rows = db.session.execute(select(User.id, User.email).where(User.id.in_(user_ids)))
    return {row.id: {"_id": row.id, "email": row.email} for row in rows}


def list_users(
    skip: int, limit: int, search: str | None = None, is_active: bool | None = None, ids: list[str] | None = None
) -> tuple[list[User], int]:
    query = select(User)
    if ids is not None:
        query = query.where(User.id.in_(ids))
    if search:
        query = query.where(User.email.contains(search.strip().lower(), autoescape=True))
    if is_active is not None:
        query = query.where(User.is_active.is_(is_active))
    return paginate(query, skip, limit, order_by=(User.created_at.desc(), User.id))
