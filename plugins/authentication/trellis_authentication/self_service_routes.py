"""HTTP routes of self-service (README, "Routes", "Tokens and sessions"), on the module's blueprint:
a signed-in user's sessions, and deleting one's own account."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from trellis.credentials import require_user, user_required
from trellis.errors import ErrorSchema
from trellis.http import DeletedSchema, ListArgs, MessageSchema, deleted, list_schema

from . import self_service
from .routes import blp
from .schemas import PASSWORD_FIELD_MAX
from .sessions import session_of


class SessionSchema(Schema):
    _id = fields.String(required=True)
    createdAt = fields.String(required=True, metadata={"format": "date-time", "description": "sign-in"})
    lastUsedAt = fields.String(
        required=True, metadata={"format": "date-time", "description": "the last sign-in or token renewal"}
    )
    ip = fields.String(required=True, allow_none=True, metadata={"description": "client address of that use"})
    userAgent = fields.String(required=True, allow_none=True, metadata={"description": "browser or app of that use"})
    current = fields.Boolean(required=True, metadata={"description": "the session of the token of this request"})


SessionListSchema = list_schema("AuthSessionList", "sessions", SessionSchema)


class DeleteAccountSchema(Schema):
    password = fields.String(
        load_only=True,
        validate=validate.Length(min=1, max=PASSWORD_FIELD_MAX),
        metadata={"description": "the account's password"},
    )
    code = fields.String(
        load_only=True,
        validate=validate.Length(min=1, max=64),
        metadata={"description": "for an account without a password: an authenticator or recovery code"},
    )


@blp.route("/authentication/sessions", methods=["GET"])
@user_required
@blp.arguments(ListArgs, location="query")
@blp.response(200, SessionListSchema)
def list_sessions(args: dict[str, Any]):
    """The caller's sessions that still work, the most recently used first; `current` marks this one."""
    identity = require_user()
    return self_service.list_sessions(identity.id, session_of(identity.claims), args["skip"], args["limit"])


@blp.route("/authentication/sessions/<string:sessionId>", methods=["DELETE"])
@user_required
@blp.response(200, DeletedSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No open session of the caller has this id")
def end_session(sessionId: str):
    """End one of the caller's sessions (this one too): its access and refresh tokens stop working at once."""
    self_service.end_session(require_user().id, sessionId)
    return deleted(sessionId)


@blp.route("/authentication/user", methods=["DELETE"])
@user_required
@blp.arguments(DeleteAccountSchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description="No password (or code) sent, or nothing to confirm it with")
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials, or a wrong password or code")
@blp.alt_response(429, schema=ErrorSchema, description="Too many wrong codes")
def delete_account(body: dict[str, Any]):
    """Delete the caller's account and everything the modules keep for it (files, rooms, grants …);
    every session ends. Confirmed with the password, or a two-factor code for a password-less account."""
    self_service.delete_own_account(require_user().id, body.get("password"), body.get("code"))
    return {"message": "Your account is deleted"}
