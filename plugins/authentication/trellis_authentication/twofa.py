"""Two-factor sign-in: TOTP (RFC 6238 with pyotp: 30 s steps, 6 digits, one step either side) or codes
by SMS, and ten single-use recovery codes.

``twoFa/enable`` starts the set-up (a TOTP secret, or an SMS code to the given number) and
``twoFa/verify`` confirms it with a first code, which switches two-factor on and hands out the recovery
codes. From then on a right password yields a ``twoFaToken`` (10 minutes, 5 wrong codes) instead of
tokens, and ``twoFa/authorize`` exchanges it with a code for the token pair. Users who enrolled keep
their second factor if the administrator later switches ``twoFa.enabled`` off; only enrolling stops.

Every route that takes a code counts it against the user (``tokens.count_code_try``, in the database so
it holds across processes): after ``MAX_CODE_TRIES`` codes without a right one, 429 with ``Retry-After``
until ``CODE_LOCKOUT`` has passed. A TOTP code is accepted once: its step is claimed for the user, and the
same code again within its window is 401.
"""

from __future__ import annotations

import hmac
import logging
import math
import secrets
import time
from typing import Any

import pyotp
from sqlalchemy.exc import IntegrityError

from trellis import db
from trellis.errors import APIError, bad_request, conflict, forbidden, unauthorized

from . import delivery, tokens
from .models import AuthToken, User
from .sessions import start_session
from .users import config, get_user, require_active, taken

log = logging.getLogger(__name__)

AUTHENTICATOR, PHONE = "authenticator", "phone"
ISSUER = "Trellis"
RECOVERY_CODES = 10


def _require_feature() -> None:
    if not config()["twoFa"]["enabled"]:
        raise forbidden("Two-factor sign-in is not enabled (config twoFa.enabled)")


def _sms_code(number: str, kind: str, user_id: str, data: dict[str, Any] | None = None) -> str:
    """Issue a code of ``kind`` for the user and text it to ``number``; returns the token (committed)."""
    delivery.require_module("sms")
    delivery.limit_sends(number)
    code = tokens.new_code()
    tokens.retire(kind, user_id)
    token = tokens.issue(kind, user_id, data, code=code)
    db.session.commit()
    delivery.send_sms(number, f"Your verification code is {code}. It is valid for 10 minutes.")
    return token


def enable(user_id: str, method: str, phone_number: str | None) -> dict[str, Any]:
    _require_feature()
    user = get_user(user_id)
    if user.two_fa_enabled:
        raise conflict("Two-factor sign-in is already on; disable it first to change the method")
    if method == AUTHENTICATOR:
        secret = pyotp.random_base32()  # 160 bits, as RFC 4226 recommends
        user.two_fa_method, user.two_fa_secret = AUTHENTICATOR, secret
        db.session.commit()
        label = user.email or user.phone_number or user.id
        return {"secret": secret, "otpauthUrl": pyotp.TOTP(secret).provisioning_uri(name=label, issuer_name=ISSUER)}
    if phone_number is None:
        raise bad_request("The phone method needs a phoneNumber", {"phoneNumber": ["Required when method is phone."]})
    if taken(User.phone_number, phone_number, user_id):
        raise conflict("Another user has this phone number", {"phoneNumber": ["Already taken."]})
    user.two_fa_method, user.two_fa_secret = PHONE, None
    _sms_code(phone_number, tokens.TWO_FA_SETUP, user_id, {"phoneNumber": phone_number})
    return {"message": "A code was sent by SMS; confirm it at /authentication/twoFa/verify"}


def _normalise_recovery(code: str) -> str:
    return code.strip().replace("-", "").replace(" ", "").lower()


def _new_recovery_codes(user_id: str) -> list[str]:
    """Ten fresh codes (50 bits each), replacing any earlier ones. Stored hashed with the user's id, so
    equal codes of two users never meet in the unique index."""
    tokens.retire(tokens.RECOVERY_CODE, user_id)
    codes = []
    for _ in range(RECOVERY_CODES):
        raw = secrets.token_hex(5)
        tokens.issue(tokens.RECOVERY_CODE, user_id, token=f"{user_id}:{raw}")
        codes.append(f"{raw[:5]}-{raw[5:]}")
    return codes


def _use_recovery_code(user_id: str, code: str) -> bool:
    row = tokens.find(tokens.RECOVERY_CODE, f"{user_id}:{_normalise_recovery(code)}")
    return row is not None and tokens.consume(row)


def limit_code_tries(subject: str, user_id: str | None) -> None:
    """Count a code about to be checked for ``subject`` (a user id, a phone number); 429 when over the
    limit. Call it before the code is checked and before any write of the request (it commits)."""
    wait = tokens.count_code_try(subject, user_id)
    if wait is not None:
        seconds = math.ceil(wait)
        raise APIError(429, f"Too many wrong codes; try again in {seconds} s", headers={"Retry-After": str(seconds)})


def _totp_step(user: User, code: str) -> int | None:
    """The 30 s step whose code ``code`` is: this one, or the previous or next one (clock drift, typing
    time); None when it is none of them."""
    if not user.two_fa_secret:
        return None
    totp = pyotp.TOTP(user.two_fa_secret)
    current = totp.timecode(time.time())
    given = code.strip().encode()  # bytes: compare_digest refuses str with other than ASCII letters
    for step in (current - 1, current, current + 1):
        if hmac.compare_digest(totp.generate_otp(step).encode(), given):
            return step
    return None


def _totp_accepted(user: User, code: str) -> bool:
    """A right TOTP code, used for the first time: its step is claimed for the user (one INSERT, decided
    by a unique index, so two processes cannot both accept it). 401 for a code accepted before."""
    step = _totp_step(user, code)
    if step is None:
        return False
    if not tokens.claim(tokens.TOTP_STEP, user.id, f"{user.id}:{step}"):
        raise unauthorized("This code was already used; wait for the next one")
    return True


def verify(user_id: str, code: str) -> list[str]:
    """Confirm the set-up with a first code; two-factor is on and the recovery codes are returned."""
    _require_feature()
    user = get_user(user_id)
    if user.two_fa_enabled:
        raise conflict("Two-factor sign-in is already on")
    if user.two_fa_method == AUTHENTICATOR:
        limit_code_tries(user_id, user_id)
        if not _totp_accepted(user, code):
            raise unauthorized("Wrong code")
    elif user.two_fa_method == PHONE:
        row = tokens.latest_for_user(tokens.TWO_FA_SETUP, user_id)
        if row is None:
            raise bad_request("No code is pending (or it expired); call /authentication/twoFa/enable again")
        limit_code_tries(user_id, user_id)
        check_code(row, code)
        user.phone_number = row.data["phoneNumber"]
    else:
        raise bad_request("Start with /authentication/twoFa/enable")
    user.two_fa_enabled = True
    user.updated_at = db.utcnow()
    tokens.clear_code_tries(user_id)
    codes = _new_recovery_codes(user_id)
    try:
        db.session.commit()
    except IntegrityError:  # the phone number was taken meanwhile
        db.session.rollback()
        raise conflict("Another user has this phone number", {"phoneNumber": ["Already taken."]}) from None
    log.info("user %s turned two-factor on (%s)", user_id, user.two_fa_method)
    return codes


def check_code(row: AuthToken, code: str) -> None:
    """A right SMS code uses the token (in the caller's transaction); a wrong one counts a try (401)."""
    if not tokens.code_matches(row, code.strip()):
        left = tokens.count_wrong_try(row)
        message = f"Wrong code; {left} tries left" if left else "Wrong code; no tries left, ask for a new code"
        raise unauthorized(message)
    if not tokens.consume(row):
        db.session.rollback()
        raise unauthorized("This code was already used")


def second_factor_challenge(user_id: str) -> dict[str, Any]:
    """What a right password yields for an enrolled user: a ``twoFaToken`` (and an SMS code for phone)."""
    user = get_user(user_id)
    if user.two_fa_method == PHONE:
        token = _sms_code(user.phone_number or "", tokens.TWO_FA_SIGN_IN, user_id)
    else:
        token = tokens.issue(tokens.TWO_FA_SIGN_IN, user_id)
        db.session.commit()
    return {"twoFaRequired": True, "twoFaToken": token}


def authorize(two_fa_token: str, code: str) -> dict[str, str]:
    """The token pair for a ``twoFaToken`` and a right code (TOTP, SMS or a recovery code); 401 otherwise."""
    row = tokens.find(tokens.TWO_FA_SIGN_IN, two_fa_token)
    if row is None:
        raise unauthorized("This twoFaToken is unknown, used or expired; sign in again")
    user = get_user(tokens.user_of(row))
    require_active(user)
    limit_code_tries(user.id, user.id)
    if user.two_fa_method == AUTHENTICATOR and _totp_accepted(user, code) or _use_recovery_code(user.id, code):
        if not tokens.consume(row):
            db.session.rollback()
            raise unauthorized("This twoFaToken was already used; sign in again")
    else:
        check_code(row, code)  # the SMS code kept with the token (none for an authenticator: a wrong try)
    tokens.clear_code_tries(user.id)
    db.session.commit()
    return start_session(user.id)


def confirm_with_code(user_id: str, code: str) -> None:
    """A fresh proof of the second factor for an action that needs one (deleting a password-less
    account): a current authenticator code, accepted once, or a recovery code, used up. 401 otherwise.
    Counted like every code (``limit_code_tries``); the caller commits with its action."""
    user = get_user(user_id)
    limit_code_tries(user_id, user_id)
    if not (user.two_fa_method == AUTHENTICATOR and _totp_accepted(user, code) or _use_recovery_code(user_id, code)):
        db.session.rollback()
        raise unauthorized("Wrong code")
    tokens.clear_code_tries(user_id)


def disable(user_id: str, code: str | None) -> dict[str, Any]:
    """Switch two-factor off with a current code or a recovery code. Phone method without ``code``: an SMS
    code is sent first."""
    user = get_user(user_id)
    if not user.two_fa_enabled:
        raise bad_request("Two-factor sign-in is not on")
    if code is None:
        if user.two_fa_method != PHONE:
            raise bad_request("Send a code from the authenticator app or a recovery code", {"code": ["Required."]})
        _sms_code(user.phone_number or "", tokens.TWO_FA_DISABLE, user_id)
        return {"message": "A code was sent by SMS; send it in code to switch two-factor off", "twoFaEnabled": True}
    limit_code_tries(user_id, user_id)
    if not (user.two_fa_method == AUTHENTICATOR and _totp_accepted(user, code) or _use_recovery_code(user_id, code)):
        row = tokens.latest_for_user(tokens.TWO_FA_DISABLE, user_id) if user.two_fa_method == PHONE else None
        if row is None:
            raise unauthorized("Wrong code")
        check_code(row, code)
    user.two_fa_enabled, user.two_fa_method, user.two_fa_secret = False, None, None
    user.updated_at = db.utcnow()
    tokens.retire(tokens.RECOVERY_CODE, user_id)
    tokens.clear_code_tries(user_id)
    db.session.commit()
    log.info("user %s turned two-factor off", user_id)
    return {"message": "Two-factor sign-in is off", "twoFaEnabled": False}
