"""HTTP routes of the Authentication module (README, "Routes")."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from flask import jsonify, redirect

from trellis.credentials import admin_required, bearer_token, current_user, require_user, user_required
from trellis.errors import ErrorSchema, unauthorized
from trellis.http import Blueprint, DeletedSchema, MessageSchema, deleted

from . import account, sessions, signin
from .schemas import (
    AuthUserSchema,
    RenewTokenSchema,
    TwoFaChallengeSchema,
    UserCredentialsSchema,
    UserListArgs,
    UserListSchema,
    UserLoginSchema,
    UserRegisteredSchema,
    UserTokensSchema,
)
from .users import list_users as find_users
from .users import user_dict

blp = Blueprint("authentication", __name__, description="Users, sign-in, tokens, blocking, account lifecycle")


def tokens_or_challenge(result: dict[str, Any], redirect_uri: str | None = None) -> Any:
    """200 with the token pair, 202 with a two-factor challenge, or 302 to ``redirect_uri`` with either
    in the URL fragment (never in the query: it would reach server logs)."""
    if redirect_uri:
        return redirect(f"{redirect_uri}#{urlencode(result)}", 302)
    if result.get("twoFaRequired"):
        return jsonify(result), 202
    return result


@blp.route("/authentication/local/new", methods=["POST"])
@blp.arguments(UserCredentialsSchema)
@blp.response(201, UserRegisteredSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Password rules, or verification on and the Email module off")
@blp.alt_response(403, schema=ErrorSchema, description="Registration is closed (module config)")
@blp.alt_response(409, schema=ErrorSchema, description="The email is already registered")
@blp.alt_response(429, schema=ErrorSchema, description="Too many registrations from this address")
def register(body: dict[str, Any]):
    """Register with email and password (the password rules are in the module config); sends the
    EmailVerification mail unless `local.verification.sendEmail` is false. With `local.signInOnRegister`
    (default) and no verification required, the answer also holds the token pair of a new session."""
    return account.register(body["email"], body["password"])


@blp.route("/authentication/local", methods=["POST"])
@blp.arguments(UserLoginSchema)
@blp.response(200, UserTokensSchema)
@blp.alt_response(202, schema=TwoFaChallengeSchema, description="Two-factor is on: finish at twoFa/authorize")
@blp.alt_response(400, schema=ErrorSchema, description="Two-factor by SMS and the SMS module is not active")
@blp.alt_response(401, schema=ErrorSchema, description="Wrong email or password")
@blp.alt_response(403, schema=ErrorSchema, description="The user is blocked, or unverified while verification is on")
@blp.alt_response(429, schema=ErrorSchema, description="Too many attempts (per address or per email)")
def login(body: dict[str, Any]):
    """Sign in: an access token (JWT) and a refresh token, or a two-factor challenge (202)."""
    return tokens_or_challenge(signin.login(body["email"], body["password"]))


@blp.route("/authentication/renew", methods=["POST"])
@blp.arguments(RenewTokenSchema)
@blp.response(200, UserTokensSchema)
@blp.alt_response(401, schema=ErrorSchema, description="Unknown, expired, revoked or already used refresh token")
@blp.alt_response(403, schema=ErrorSchema, description="The user is blocked")
def renew(body: dict[str, Any]):
    """Exchange a refresh token (body or Bearer) for a new pair; the old refresh token stops working."""
    token = body.get("refreshToken") or bearer_token()
    if not token:
        raise unauthorized("Send the refresh token in the body (refreshToken) or as the Bearer token")
    return sessions.renew(token)


@blp.route("/authentication/logout", methods=["POST"])
@user_required
@blp.response(200, MessageSchema)
def logout():
    """End this session: its access and refresh tokens stop working at once."""
    sessions.logout(sessions.session_of(require_user().claims))
    return {"message": "Logged out"}


@blp.route("/authentication/user", methods=["GET"])
@user_required
@blp.response(200, AuthUserSchema)
def me():
    """The signed-in user."""
    return current_user()


@blp.route("/authentication/users", methods=["GET"])
@admin_required
@blp.arguments(UserListArgs, location="query")
@blp.response(200, UserListSchema)
def list_users(args: dict[str, Any]):
    """Users, newest first; `search` matches part of the email, `isActive=false` lists blocked users, `ids`
    picks users by id."""
    users, count = find_users(args["skip"], args["limit"], args.get("search"), args.get("isActive"), args.get("ids"))
    return {"users": [user_dict(u) for u in users], "count": count}


@blp.route("/authentication/users", methods=["POST"])
@admin_required
@blp.arguments(UserCredentialsSchema)
@blp.response(201, AuthUserSchema)
@blp.alt_response(409, schema=ErrorSchema, description="The email is already registered")
def create_user(body: dict[str, Any]):
    """Create a user (works whether or not self-registration is open); it counts as verified."""
    return user_dict(account.create_user(body["email"], body["password"], verified=True))


@blp.route("/authentication/users/<string:userId>/block", methods=["PUT"])
@admin_required
@blp.response(200, AuthUserSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such user")
def block(userId: str):
    """Block a user: sign-in is refused and every session ends (open sockets are dropped)."""
    return user_dict(account.set_active(userId, False))


@blp.route("/authentication/users/<string:userId>/unblock", methods=["PUT"])
@admin_required
@blp.response(200, AuthUserSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such user")
def unblock(userId: str):
    """Unblock a user (they sign in again; sessions ended by the block stay ended)."""
    return user_dict(account.set_active(userId, True))


@blp.route("/authentication/users/<string:userId>", methods=["DELETE"])
@admin_required
@blp.response(200, DeletedSchema)
@blp.alt_response(404, schema=ErrorSchema, description="No such user")
def delete_user(userId: str):
    """Delete a user and their sessions; other modules drop what belonged only to them."""
    account.delete_user(userId)
    return deleted(userId)
