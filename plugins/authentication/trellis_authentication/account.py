"""Accounts: registration, verification, forgotten and changed passwords, changed email, magic link, and
the administrator's changes to a user (create, block, delete, PATCH; README, "Account
lifecycle").

Mail is queued in the transaction of the token it carries (``delivery.queue_mail``) and sent by the Email
module's background senders, so no answer waits for a mail server. Routes that must not reveal whether an
address has an account (resend-verification, forgot-password, magic-link) do the same before answering for
known and unknown addresses (one indexed read and the rate limits), then for a known one write the token
and its queued mail in one transaction.
"""

from __future__ import annotations

import functools
import logging
import secrets
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from trellis import audit, connections, db
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found, unauthorized
from trellis.hooks import call as hooks
from trellis.passwords import hash_password, verify_password
from trellis.ratelimit import check as rate_limit
from trellis.ratelimit import client_ip

from . import delivery, teams, tokens
from .delivery import HOOK
from .models import User
from .sessions import drop_connections, revoke_sessions, sessions_ended, start_session
from .signin import finish_sign_in
from .users import (
    check_password_rules,
    config,
    get_user,
    new_user,
    normalise_email,
    record_user_event,
    release_connection,
    require_active,
    taken,
    user_dict,
)

log = logging.getLogger(__name__)


def _taken(field: str = "email") -> APIError:
    return conflict("A user with this email already exists", {field: ["Already registered."]})


def _active_user_by_email(email: str) -> Any:
    return db.session.execute(
        select(User.id, User.email, User.is_active, User.is_verified).where(User.email == normalise_email(email))
    ).one_or_none()


def _rehearse(email: str, template: str, link_base: str) -> None:
    """An unknown address: the known one's work (a token, its mail rendered, a commit that waits for the
    disk), writing nothing, so the answer does not tell them apart."""
    delivery.rehearse_mail(normalise_email(email), template, link_base + secrets.token_urlsafe(32))
    db.session.commit()


# --- registration ------------------------------------------------------------------------------------


def create_user(email: str, password: str, verified: bool = False, signing_up: bool = False) -> User:
    """A new active user (409 when the email is taken, 400 when the password breaks the rules); unverified
    unless ``verified`` (an account an administrator creates counts as verified: the administrator vouches
    for the address). ``signing_up``: the user signs up, which other modules may refuse or follow
    (``trellis_user_signing_up``, ``trellis_user_signed_up``)."""
    email = normalise_email(email)
    check_password_rules(password)
    # Checked first so a duplicate costs no argon2 hash; the unique index still decides races.
    if taken(User.email, email):
        raise _taken()
    if signing_up:
        hooks().trellis_user_signing_up(user={"email": email})
    release_connection()
    password_hash = hash_password(password)
    try:
        user = new_user(email=email, password_hash=password_hash, is_verified=verified)
        audit.record("authentication", "user.create", user.id, {"email": email})  # only when an admin creates
        if signing_up:
            hooks().trellis_user_signed_up(user=user_dict(user))
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise _taken() from None
    log.info("user %s registered", user.id)
    return user


def register(email: str, password: str) -> dict[str, Any]:
    """Self-registration: honours ``registrationOpen`` and the per-IP limit; sends ``EmailVerification``
    when ``local.verification.sendEmail`` (the Email module must then be active: checked first). The
    answer is ``{user}``, with the token pair of a new session when ``local.signInOnRegister`` is on and
    verification is not required (an unverified user could not sign in anyway)."""
    settings = config()
    if not settings["registrationOpen"]:
        raise forbidden("Registration is closed")
    rate_limit("auth-register-ip", client_ip(), settings["rateLimits"]["registerPerIp"])
    send = settings["local"]["verification"]["sendEmail"]
    if send:
        delivery.require_module("email")
        delivery.host_url()  # an untrusted Host is refused before the account exists
        delivery.limit_sends(normalise_email(email))
    user = create_user(email, password, signing_up=True)
    if send:
        try:
            send_verification(user.id, normalise_email(email))
        except APIError as exc:  # e.g. the Email module's sender address does not validate
            # The account exists either way; resend-verification sends the link once mail works.
            db.session.rollback()
            log.warning("verification mail for user %s not sent: %s", user.id, exc.message)
    answer: dict[str, Any] = {"user": user_dict(user)}
    local = settings["local"]
    if local["signInOnRegister"] and not local["verification"]["required"]:
        answer.update(start_session(user.id, settings))
    return answer


# --- verification ------------------------------------------------------------------------------------


def send_verification(user_id: str, email: str) -> None:
    """Queue ``EmailVerification`` (the caller checked the Email module and the limits)."""
    link = f"{delivery.host_url()}{HOOK}/verify-email/{tokens.issue(tokens.VERIFY_EMAIL, user_id)}"
    delivery.queue_mail(email, "EmailVerification", link)
    db.session.commit()


def resend_verification(email: str) -> None:
    """Always the same answer; a new link only for an existing, active, unverified account."""
    delivery.require_module("email")
    link_base = f"{delivery.host_url()}{HOOK}/verify-email/"  # refused or not, the same for every address
    delivery.limit_sends(normalise_email(email))
    user = _active_user_by_email(email)
    db.session.rollback()
    if user is None or not user.is_active or user.is_verified:
        return _rehearse(email, "EmailVerification", link_base)
    tokens.retire(tokens.VERIFY_EMAIL, user.id)  # only the newest link works
    token = tokens.issue(tokens.VERIFY_EMAIL, user.id)
    delivery.queue_mail(user.email, "EmailVerification", link_base + token)
    db.session.commit()


def verify_email(token: str) -> str | None:
    """Mark the user verified; returns the redirect address when one is configured. 404 for a bad token."""
    row = tokens.find(tokens.VERIFY_EMAIL, token)
    if row is None or not tokens.consume(row):
        db.session.rollback()
        raise not_found("This verification link is unknown, used or expired")
    db.session.execute(update(User).where(User.id == row.user_id).values(is_verified=True, updated_at=db.utcnow()))
    db.session.commit()
    log.info("user %s verified their email", row.user_id)
    return config()["local"]["verification"]["redirectUri"]


# --- forgotten password ------------------------------------------------------------------------------


def forgot_password(email: str) -> None:
    delivery.require_module("email")
    # Before the lookup: the link's base is made (or refused) alike for known and unknown addresses.
    base = config()["local"]["forgotPasswordRedirectUri"] or f"{delivery.host_url()}/authentication/reset"
    delivery.limit_sends(normalise_email(email))
    user = _active_user_by_email(email)
    db.session.rollback()
    separator = "&" if "?" in base else "?"
    if user is None or not user.is_active:
        return _rehearse(email, "ForgotPassword", f"{base}{separator}reset_token=")
    token = tokens.issue(tokens.RESET_PASSWORD, user.id)
    delivery.queue_mail(user.email, "ForgotPassword", f"{base}{separator}reset_token={token}")
    db.session.commit()


def reset_password(token: str, password: str) -> None:
    """New password, every session and every other reset, magic-link and change-email link ended. A bad
    token or password changes nothing (the old one works)."""
    check_password_rules(password)
    row = tokens.find(tokens.RESET_PASSWORD, token)
    if row is None:
        raise bad_request("This password reset token is unknown, used or expired", {"passwordResetToken": ["Invalid."]})
    user_id = tokens.user_of(row)
    db.session.rollback()  # no transaction held while argon2 runs
    new_hash = hash_password(password)
    row = tokens.find(tokens.RESET_PASSWORD, token)
    # One transaction: the token is used, the password set and the sessions ended together, or nothing.
    if row is None or not tokens.consume(row):
        db.session.rollback()
        raise bad_request("This password reset token is unknown, used or expired", {"passwordResetToken": ["Invalid."]})
    db.session.execute(update(User).where(User.id == user_id).values(password_hash=new_hash, updated_at=db.utcnow()))
    tokens.retire(tokens.PASSWORD_BOUND, user_id)  # link B of two resets, a magic link … end with it
    revoke_sessions(user_id)
    db.session.commit()
    log.info("user %s reset their password; every session ended", user_id)
    drop_connections(user_id)


# --- signed-in changes -------------------------------------------------------------------------------


def _require_password(user_id: str, password: str, message: str) -> User:
    user = get_user(user_id)
    stored = user.password_hash
    db.session.rollback()
    if not verify_password(stored, password):
        raise unauthorized(message)
    return user


def change_password(user_id: str, session_id: str, old_password: str, new_password: str) -> None:
    """401 for a wrong old password; the other sessions and every reset, magic-link and change-email link
    end, this session stays."""
    check_password_rules(new_password, "newPassword")
    _require_password(user_id, old_password, "The old password is wrong")
    new_hash = hash_password(new_password)
    db.session.execute(update(User).where(User.id == user_id).values(password_hash=new_hash, updated_at=db.utcnow()))
    tokens.retire(tokens.PASSWORD_BOUND, user_id)  # a reset link mailed before still set a password
    revoke_sessions(user_id, keep=session_id)
    db.session.commit()
    log.info("user %s changed their password; other sessions ended", user_id)
    drop_connections(user_id)


def change_email(user_id: str, new_email: str, password: str) -> dict[str, Any]:
    """Change at once, or (verification required) send ``ChangeEmailVerification`` to the new address."""
    new_email = normalise_email(new_email)
    _require_password(user_id, password, "The password is wrong")
    if taken(User.email, new_email):
        raise _taken("newEmail")
    if not config()["local"]["verification"]["required"]:
        _set_email(user_id, new_email, verified=False)
        return {"message": "Email changed", "verificationRequired": False}
    delivery.require_module("email")
    link_base = f"{delivery.host_url()}{HOOK}/verify-change-email/"
    delivery.limit_sends(new_email)
    tokens.retire(tokens.CHANGE_EMAIL, user_id)
    token = tokens.issue(tokens.CHANGE_EMAIL, user_id, {"email": new_email})
    delivery.queue_mail(new_email, "ChangeEmailVerification", link_base + token)
    db.session.commit()
    return {"message": "Open the link sent to the new address to complete the change", "verificationRequired": True}


# Links mailed to the old address that would vouch for whatever address the account has when opened.
_ADDRESS_BOUND = (tokens.VERIFY_EMAIL, tokens.MAGIC_LINK)


def _set_email(user_id: str, email: str, verified: bool) -> None:
    db.session.execute(
        update(User).where(User.id == user_id).values(email=email, is_verified=verified, updated_at=db.utcnow())
    )
    # A verification or magic link mailed to the old address must not verify the new one.
    tokens.retire(_ADDRESS_BOUND, user_id)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise _taken("newEmail") from None


def verify_change_email(token: str) -> str | None:
    row = tokens.find(tokens.CHANGE_EMAIL, token)
    if row is None or not tokens.consume(row):
        db.session.rollback()
        raise not_found("This link is unknown, used or expired")
    _set_email(tokens.user_of(row), row.data["email"], verified=True)  # the link proved the new address
    log.info("user %s changed their email", row.user_id)
    return config()["local"]["verification"]["redirectUri"]


# --- magic link --------------------------------------------------------------------------------------


def _require_magic_link() -> dict[str, Any]:
    settings = config()["magicLink"]
    if not settings["enabled"]:
        raise forbidden("Magic links are not enabled (config magicLink.enabled)")
    return settings


def send_magic_link(email: str) -> None:
    _require_magic_link()
    delivery.require_module("email")
    link_base = f"{delivery.host_url()}{HOOK}/magic-link/"  # refused or not, the same for every address
    delivery.limit_sends(normalise_email(email))
    user = _active_user_by_email(email)
    db.session.rollback()
    if user is None or not user.is_active:
        return _rehearse(email, "MagicLink", link_base)
    token = tokens.issue(tokens.MAGIC_LINK, user.id)
    delivery.queue_mail(user.email, "MagicLink", link_base + token)
    db.session.commit()


def sign_in_with_magic_link(token: str) -> tuple[dict[str, Any], str | None]:
    """The token pair (or the two-factor challenge) and the configured redirect address. 404 bad token."""
    settings = _require_magic_link()
    row = tokens.find(tokens.MAGIC_LINK, token)
    if row is None or not tokens.consume(row):
        db.session.rollback()
        raise not_found("This sign-in link is unknown, used or expired")
    user = get_user(tokens.user_of(row))
    require_active(user)
    user.is_verified = True  # the link reached the mailbox
    db.session.commit()
    return finish_sign_in(user), settings["redirectUri"]


# --- administrator -----------------------------------------------------------------------------------


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


def delete_user(user_id: str) -> None:
    user = get_user(user_id)
    record_user_event("delete", user)
    teams.forget_user(user_id, user.email)
    # In the same transaction as the delete: other modules' clean-up commits with it, or nothing does.
    hooks().trellis_user_deleted(user_id=user_id)
    db.after_commit(functools.partial(connections.of().end_user, user_id))  # the other processes: by the event
    db.session.execute(delete(User).where(User.id == user_id))  # sessions go by ON DELETE CASCADE
    sessions_ended()
    audit.record("authentication", "user.delete", user_id)
    db.session.commit()
    log.info("user %s deleted", user_id)


def admin_update(user_id: str, changes: dict[str, Any]) -> User:
    """``email``, ``isVerified``, ``phoneNumber`` (null removes it); 409 when another user has it."""
    user = get_user(user_id)
    for key, column in (("email", User.email), ("phoneNumber", User.phone_number)):
        value = changes.get(key)
        if value is not None and taken(column, value, user_id):
            raise conflict(f"Another user has this {key}", {key: ["Already taken."]})
    removes_phone = "phoneNumber" in changes and changes["phoneNumber"] is None
    if removes_phone and user.two_fa_enabled and user.two_fa_method == "phone":
        raise bad_request(
            "This number receives the user's two-factor codes", {"phoneNumber": ["Disable two-factor first."]}
        )
    email = changes.get("email", user.email)
    phone_number = changes.get("phoneNumber", user.phone_number)
    if email is None and phone_number is None:
        raise bad_request("A user needs an email or a phone number", {"email": ["Cannot remove both."]})
    user.email, user.phone_number = email, phone_number
    if "isVerified" in changes:
        user.is_verified = changes["isVerified"]
    user.updated_at = db.utcnow()
    audit.record("authentication", "user.patch", user_id, dict(changes))
    try:
        db.session.commit()
    except IntegrityError:  # taken between the check and the write
        db.session.rollback()
        raise conflict("Another user has this email or phone number") from None
    return user
