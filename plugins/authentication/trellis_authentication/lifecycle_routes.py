"""HTTP routes of the account lifecycle (README, "Account lifecycle"), on the
module's blueprint: verification, password reset and change, email change, magic link, two-factor,
phone sign-in, and the administrator's PATCH of a user."""

from __future__ import annotations

from typing import Any

from flask import redirect

from trellis.credentials import admin_required, require_user, user_required
from trellis.errors import ErrorSchema
from trellis.http import MessageSchema

from . import account, pages, phone, twofa
from .routes import blp, tokens_or_challenge
from .schemas import (
    AdminUserChangesSchema,
    AuthUserSchema,
    ChangeEmailAnswerSchema,
    ChangeEmailSchema,
    ChangePasswordSchema,
    CodeSchema,
    EmailOnlySchema,
    OptionalCodeSchema,
    PhoneSignInSchema,
    PhoneTokenSchema,
    PhoneVerifySchema,
    RecoveryCodesSchema,
    ResetPasswordSchema,
    TwoFaAuthorizeSchema,
    TwoFaChallengeSchema,
    TwoFaEnabledSchema,
    TwoFaEnableSchema,
    TwoFaStateSchema,
    UserTokensSchema,
)
from .sessions import session_of
from .users import user_dict

NOT_ACTIVE = "The Email (or SMS) module is not active: the message names it"
LIMITED = "Too many messages from this address or to this target (rateLimits.sendPerIp, sendPerAddress)"


def message_or_redirect(message: str, redirect_uri: str | None) -> Any:
    return redirect(redirect_uri, 302) if redirect_uri else {"message": message}


# --- verification ------------------------------------------------------------------------------------


@blp.route("/authentication/local/resend-verification", methods=["POST"])
@blp.arguments(EmailOnlySchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description=NOT_ACTIVE)
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def resend_verification(body: dict[str, Any]):
    """Send a new verification link. The same answer whether or not the address has an account."""
    account.resend_verification(body["email"])
    return {"message": "If an unverified account has this address, a new verification link is on its way"}


@blp.route("/hook/authentication/verify-email/<string:token>", methods=["GET"])
@blp.response(200, MessageSchema)
@blp.alt_response(302, description="Verified; to `local.verification.redirectUri`")
@blp.alt_response(404, schema=ErrorSchema, description="Unknown, used or expired link")
def verify_email(token: str):
    """The link of the EmailVerification mail: the user's address is verified. A browser (`Accept:
    text/html` first) gets a page saying so."""
    if pages.wants_html():
        return pages.verify_email_page(token)
    return message_or_redirect("Email address verified", account.verify_email(token))


# --- passwords ---------------------------------------------------------------------------------------


@blp.route("/authentication/forgot-password", methods=["POST"])
@blp.arguments(EmailOnlySchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description=NOT_ACTIVE)
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def forgot_password(body: dict[str, Any]):
    """Mail a password reset link (ForgotPassword). The same answer whether or not the address has an account."""
    account.forgot_password(body["email"])
    return {"message": "If an account has this address, a password reset link is on its way"}


@blp.route("/authentication/reset-password", methods=["POST"])
@blp.arguments(ResetPasswordSchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Bad, used or expired token, or a password against the rules")
def reset_password(body: dict[str, Any]):
    """Set a new password with the token of the reset link; every session of the user ends."""
    account.reset_password(body["passwordResetToken"], body["password"])
    return {"message": "Password changed; sign in with the new one"}


@blp.route("/authentication/local/change-password", methods=["POST"])
@user_required
@blp.arguments(ChangePasswordSchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description="The new password breaks the password rules")
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials, or a wrong old password")
def change_password(body: dict[str, Any]):
    """Change the password; the user's other sessions end, this one stays."""
    identity = require_user()
    account.change_password(identity.id, session_of(identity.claims), body["oldPassword"], body["newPassword"])
    return {"message": "Password changed"}


@blp.route("/authentication/local/change-email", methods=["POST"])
@user_required
@blp.arguments(ChangeEmailSchema)
@blp.response(200, ChangeEmailAnswerSchema)
@blp.alt_response(400, schema=ErrorSchema, description=NOT_ACTIVE)
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials, or a wrong password")
@blp.alt_response(409, schema=ErrorSchema, description="Another user has this email")
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def change_email(body: dict[str, Any]):
    """Change the email; with verification required, only once the link sent to the new address is opened."""
    return account.change_email(require_user().id, body["newEmail"], body["password"])


@blp.route("/hook/authentication/verify-change-email/<string:token>", methods=["GET"])
@blp.response(200, MessageSchema)
@blp.alt_response(302, description="Changed; to `local.verification.redirectUri`")
@blp.alt_response(404, schema=ErrorSchema, description="Unknown, used or expired link")
@blp.alt_response(409, schema=ErrorSchema, description="Another user took the address meanwhile")
def verify_change_email(token: str):
    """The link of the ChangeEmailVerification mail: the new address becomes the user's email. A browser
    (`Accept: text/html` first) gets a page saying so."""
    if pages.wants_html():
        return pages.verify_change_email_page(token)
    return message_or_redirect("Email address changed", account.verify_change_email(token))


# --- magic link --------------------------------------------------------------------------------------


@blp.route("/authentication/magic-link", methods=["POST"])
@blp.arguments(EmailOnlySchema)
@blp.response(200, MessageSchema)
@blp.alt_response(400, schema=ErrorSchema, description=NOT_ACTIVE)
@blp.alt_response(403, schema=ErrorSchema, description="Magic links are not enabled (magicLink.enabled)")
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def magic_link(body: dict[str, Any]):
    """Mail a sign-in link (MagicLink). The same answer whether or not the address has an account."""
    account.send_magic_link(body["email"])
    return {"message": "If an account has this address, a sign-in link is on its way"}


@blp.route("/hook/authentication/magic-link/<string:token>", methods=["GET"])
@blp.response(200, UserTokensSchema)
@blp.alt_response(202, schema=TwoFaChallengeSchema, description="Two-factor is on: finish at twoFa/authorize")
@blp.alt_response(302, description="To `magicLink.redirectUri`, the answer in the URL fragment")
@blp.alt_response(403, schema=ErrorSchema, description="Magic links are not enabled, or the user is blocked")
@blp.alt_response(404, schema=ErrorSchema, description="Unknown, used or expired link")
def magic_link_sign_in(token: str):
    """The link of the MagicLink mail: a signed-in session. A browser (`Accept: text/html` first) is sent
    to the account page (or `magicLink.redirectUri`) with the answer in the URL fragment."""
    if pages.wants_html():
        return pages.magic_link_page(token)
    return tokens_or_challenge(*account.sign_in_with_magic_link(token))


# --- two-factor --------------------------------------------------------------------------------------


@blp.route("/authentication/twoFa/enable", methods=["POST"])
@user_required
@blp.arguments(TwoFaEnableSchema)
@blp.response(200, TwoFaEnabledSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Missing phoneNumber, or the SMS module is not active")
@blp.alt_response(
    403,
    schema=ErrorSchema,
    description="Not allowed (administrator credentials), or two-factor is not enabled (twoFa.enabled)",
)
@blp.alt_response(409, schema=ErrorSchema, description="Two-factor is already on, or another user has the number")
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def two_fa_enable(body: dict[str, Any]):
    """Start two-factor: an authenticator secret (`otpauthUrl` for a QR code), or an SMS code to `phoneNumber`."""
    return twofa.enable(require_user().id, body["method"], body.get("phoneNumber"))


@blp.route("/authentication/twoFa/verify", methods=["POST"])
@user_required
@blp.arguments(CodeSchema)
@blp.response(200, RecoveryCodesSchema)
@blp.alt_response(400, schema=ErrorSchema, description="No set-up pending")
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials, or a wrong code")
@blp.alt_response(
    403,
    schema=ErrorSchema,
    description="Not allowed (administrator credentials), or two-factor is not enabled (twoFa.enabled)",
)
@blp.alt_response(409, schema=ErrorSchema, description="Two-factor is already on")
def two_fa_verify(body: dict[str, Any]):
    """Confirm the set-up with a first code: two-factor is on; keep the ten recovery codes."""
    return {"recoveryCodes": twofa.verify(require_user().id, body["code"])}


@blp.route("/authentication/twoFa/authorize", methods=["POST"])
@blp.arguments(TwoFaAuthorizeSchema)
@blp.response(200, UserTokensSchema)
@blp.alt_response(401, schema=ErrorSchema, description="Wrong code, or an unknown, used or expired twoFaToken")
@blp.alt_response(403, schema=ErrorSchema, description="The user is blocked")
def two_fa_authorize(body: dict[str, Any]):
    """Finish a sign-in: the `twoFaToken` of the 202 answer and a code (or a recovery code, once)."""
    return twofa.authorize(body["twoFaToken"], body["code"])


@blp.route("/authentication/twoFa/disable", methods=["POST"])
@user_required
@blp.arguments(OptionalCodeSchema)
@blp.response(200, TwoFaStateSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Two-factor is not on, or no code was sent")
@blp.alt_response(401, schema=ErrorSchema, description="Missing or invalid credentials, or a wrong code")
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def two_fa_disable(body: dict[str, Any]):
    """Switch two-factor off with a current code or a recovery code (phone: without `code`, one is texted)."""
    return twofa.disable(require_user().id, body.get("code"))


# --- phone sign-in -----------------------------------------------------------------------------------


@blp.route("/authentication/phone", methods=["POST"])
@blp.arguments(PhoneSignInSchema)
@blp.response(200, PhoneTokenSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Not an E.164 number, or the SMS module is not active")
@blp.alt_response(403, schema=ErrorSchema, description="Phone sign-in is not enabled (phone.enabled)")
@blp.alt_response(429, schema=ErrorSchema, description=LIMITED)
def phone_sign_in(body: dict[str, Any]):
    """Text a 6-digit sign-in code (10 minutes, 5 tries) to the number."""
    return phone.start(body["phoneNumber"])


@blp.route("/authentication/phone/verify", methods=["POST"])
@blp.arguments(PhoneVerifySchema)
@blp.response(200, UserTokensSchema)
@blp.alt_response(202, schema=TwoFaChallengeSchema, description="An authenticator is the user's second factor")
@blp.alt_response(401, schema=ErrorSchema, description="Wrong code, or an unknown, used or expired token")
@blp.alt_response(403, schema=ErrorSchema, description="Phone sign-in is not enabled, or the user is blocked")
def phone_verify(body: dict[str, Any]):
    """The token pair for the code; the first sign-in of a number creates its user."""
    return tokens_or_challenge(phone.verify(body["token"], body["code"]))


# --- administrator -----------------------------------------------------------------------------------


@blp.route("/authentication/users/<string:userId>", methods=["PATCH"])
@admin_required
@blp.arguments(AdminUserChangesSchema)
@blp.response(200, AuthUserSchema)
@blp.alt_response(400, schema=ErrorSchema, description="Bad value, or it would leave the user without email and phone")
@blp.alt_response(404, schema=ErrorSchema, description="No such user")
@blp.alt_response(409, schema=ErrorSchema, description="Another user has this email or phone number")
def update_user(body: dict[str, Any], userId: str):
    """Set a user's `email`, `isVerified` or `phoneNumber` (null removes a phone number)."""
    return user_dict(account.admin_update(userId, body))
