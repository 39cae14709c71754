"""Who is calling: the master key, an admin token, or a user token; and the guards built on it.

Rules (``docs/modules.md``, "Routes: schemas, errors, guards"): either ``masterkey`` or an admin Bearer is enough on every
administrative route; any credential sent must be valid (else 401); a valid user token on an admin
route is 403. Tokens are JWTs whose ``kind`` claim says who they were issued to.
"""

from __future__ import annotations

import functools
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeAlias, TypeVar

import sqlalchemy as sa
from flask import current_app, request
from flask_jwt_extended import create_access_token, decode_token
from flask_jwt_extended.config import config as jwt_config
from flask_jwt_extended.exceptions import JWTExtendedException
from jwt import PyJWTError

from . import current, reads
from .errors import ErrorSchema, forbidden, unauthorized
from .hooks import call as hooks
from .http import Blueprint
from .models import Admin

F = TypeVar("F", bound=Callable[..., Any])

# An OpenAPI security requirement list: any one of its entries lets the caller in ({}: anonymous).
Security: TypeAlias = list[dict[str, list[str]]]
ADMIN_SECURITY: Security = [{"masterkey": []}, {"bearerAuth": []}]
USER_SECURITY: Security = [{"bearerAuth": []}]


@dataclass
class Identity:
    kind: str  # "master" | "admin" | "user"
    id: str | None = None
    claims: dict[str, Any] = field(default_factory=dict)
    user: Mapping[str, Any] | None = None  # the hook's; it may read all but ``_id`` lazily

    @property
    def is_admin(self) -> bool:
        return self.kind in ("master", "admin")


@dataclass
class UserIdentity(Identity):
    """A user token's caller: it always names its user, and holds what the user hook answered."""

    id: str = ""
    user: Mapping[str, Any] = field(default_factory=dict)


def master_key_matches(candidate: str) -> bool:
    expected = current.app().config["MASTER_KEY"]
    return hmac.compare_digest(candidate.encode(), expected.encode())


def issue_admin_token(admin: Admin) -> str:
    hours = float(current_app.config["ADMIN_TOKEN_HOURS"])
    return create_access_token(
        identity=admin.id,
        additional_claims={"kind": "admin", "ver": admin.token_version},
        expires_delta=timedelta(hours=hours),
    )


def bearer_token(environ: dict[str, Any] | None = None) -> str | None:
    """The request's Bearer token (None without an Authorization header); ``environ``: the request's, when
    the caller holds it."""
    if environ is None:
        environ = current.request().environ
    header = environ.get("HTTP_AUTHORIZATION", "")  # the WSGI key: no header-map lookup
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("Authorization header must be 'Bearer <token>'")
    return token.strip()


# Tokens whose signature and claims were verified, by (signing key, token): verifying one is a pure function
# of the two, and a large share of a user's get by id (PyJWT's base64, JSON and HMAC, flask-jwt-extended's
# claim checks; bench/results/core.md#verified-tokens). Only its expiry moves with time: it is checked again
# at every use. What can revoke a token (its session, an admin's token version) is read from the database at
# every request, as before. Bounded: emptied when full.
_VERIFIED: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}
_MAX_VERIFIED = 4096


def decode(token: str) -> dict[str, Any]:
    """The verified claims of ``token`` (401 when it is not valid or has expired). Read them, never change them."""
    key = (current.app().config["JWT_SECRET_KEY"], token)
    found = _VERIFIED.get(key)
    if found is not None and time.time() < found[1]:
        return found[0]
    try:
        claims = decode_token(token)
    except (PyJWTError, JWTExtendedException, ValueError) as exc:
        message = "Token expired" if exc.__class__.__name__ == "ExpiredSignatureError" else "Invalid token"
        raise unauthorized(message) from None
    expires = claims.get("exp")
    if isinstance(expires, int | float):
        if len(_VERIFIED) >= _MAX_VERIFIED:
            _VERIFIED.clear()
        leeway = jwt_config.leeway
        _VERIFIED[key] = (claims, expires + (leeway.total_seconds() if isinstance(leeway, timedelta) else leeway))
    return claims


_ADMIN_VERSION = sa.select(Admin.id, Admin.token_version).where(Admin.id == sa.bindparam("sub"))


def identity_from_token(token: str) -> Identity:
    """Verify a token (admin or user) outside the header flow, e.g. Socket.IO connect auth. 401 if bad."""
    claims = decode(token)
    kind = claims.get("kind")
    if kind == "admin":
        # A read of its own (no session transaction): a write the request makes can still commit alone.
        admin = reads.read_one(_ADMIN_VERSION, sub=claims.get("sub"))
        if admin is None or admin.token_version != claims.get("ver"):
            raise unauthorized("Admin token is no longer valid")
        return Identity("admin", admin.id, claims)
    if kind == "user":
        user = hooks().trellis_user_from_claims(claims=claims)
        if user is None:
            raise unauthorized("User tokens are not accepted (no authentication module)")
        return UserIdentity("user", user["_id"], claims, user)
    raise unauthorized("Invalid token")


def user_from_token(token: str) -> UserIdentity:
    """:func:`identity_from_token` for a user token (an administrator's is 403, as :func:`require_user`)."""
    identity = identity_from_token(token)
    if not isinstance(identity, UserIdentity):
        raise forbidden("This needs a user token, not administrator credentials")
    return identity


def identify() -> Identity | None:
    """The caller of this request, or None when no credential was sent. Memoised per request.

    Raises 401 when a credential was sent but is not valid.
    """
    environ = current.request().environ
    memo = environ.setdefault("trellis", {})
    if "identity" in memo:
        return memo["identity"]
    identity = None
    key = environ.get("HTTP_MASTERKEY")
    token = bearer_token(environ)
    if key is not None:
        if not master_key_matches(key):
            raise unauthorized("Invalid master key")
        identity = Identity("master")
    if token is not None:
        token_identity = identity_from_token(token)
        # A master key plus a token: the token still has to be valid; the key decides admin rights.
        identity = identity if identity is not None and not token_identity.is_admin else token_identity
    memo["identity"] = identity
    return identity


def require_admin() -> Identity:
    identity = identify()
    if identity is None:
        raise unauthorized("Administrative route: send the masterkey header or an admin Bearer token")
    if not identity.is_admin:
        raise forbidden("Administrative route: a user token is not enough")
    return identity


def require_caller() -> Identity:
    """Any valid credential: a user's or an administrator's (401 without)."""
    identity = identify()
    if identity is None:
        raise unauthorized("This route needs a user Bearer token or administrator credentials")
    return identity


def require_user() -> UserIdentity:
    """A user token (admins are not users: an admin token here is 403)."""
    identity = identify()
    if identity is None:
        raise unauthorized("This route needs a user Bearer token")
    if not isinstance(identity, UserIdentity):
        raise forbidden("This route needs a user token, not administrator credentials")
    return identity


def _document(func: F, security: list[dict[str, list]], statuses: tuple[int, ...]) -> F:
    """``func`` with the guard's security and error responses in its flask-smorest doc. A guard copies
    this doc onto its wrapper (``functools.wraps``) and calls ``func`` itself: the documenting wrappers
    only carry documentation, so requests skip them."""
    for status in statuses:
        func = _GUARD_DOCS.alt_response(status, schema=ErrorSchema, description=_DESCRIPTIONS[status])(func)
    return Blueprint.doc(security=security)(func)


_DESCRIPTIONS = {401: "Missing or invalid credentials", 403: "Not allowed"}
# Only for its alt_response decorator (an instance method); never registered.
_GUARD_DOCS = Blueprint("trellis-guards", __name__)


def admin_required(func: F) -> F:
    """Guard for every administrative route: masterkey OR admin Bearer."""

    @functools.wraps(_document(func, ADMIN_SECURITY, (401, 403)))
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        require_admin()
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def master_key_required(func: F) -> F:
    """Guard for ``POST /login``: only the master key opens it."""

    @functools.wraps(_document(func, [{"masterkey": []}], (401,)))
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = request.headers.get("masterkey")
        if key is None or not master_key_matches(key):
            raise unauthorized("This route needs a valid masterkey header")
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def user_required(func: F) -> F:
    """Guard for user routes: a valid user Bearer token (401 without, 403 for admin credentials)."""

    @functools.wraps(_document(func, USER_SECURITY, (401, 403)))
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        require_user()
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def user_or_admin_required(func: F) -> F:
    """Guard for routes a user uses on their own records and an admin on anybody's: any valid credential."""

    @functools.wraps(_document(func, [{"bearerAuth": []}, {"masterkey": []}], (401,)))
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        require_caller()
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def current_user() -> dict[str, Any] | None:
    """The user of this request (a dict with ``_id``), or None for admins and anonymous callers."""
    identity = identify()
    if identity is None or identity.kind != "user" or identity.user is None:
        return None
    user = identity.user
    return user if isinstance(user, dict) else dict(user)  # one the hook reads lazily: read it now
