"""Sign-in with a phone number: a 6-digit code by SMS (10 minutes, 5 tries), exchanged for the token pair.

The first sign-in of a number creates its user (``phoneNumber``, no email, no password).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from trellis import db
from trellis.errors import forbidden, unauthorized

from . import delivery, tokens
from .models import User
from .signin import finish_sign_in
from .twofa import check_code, limit_code_tries
from .users import config, new_user, require_active

log = logging.getLogger(__name__)


def _require_feature() -> None:
    if not config()["phone"]["enabled"]:
        raise forbidden("Phone sign-in is not enabled (config phone.enabled)")


def start(phone_number: str) -> dict[str, str]:
    """Text a code to ``phone_number`` (E.164, validated by the route); returns the token it goes with."""
    _require_feature()
    delivery.require_module("sms")
    delivery.limit_sends(phone_number)
    user_id = db.session.execute(select(User.id).where(User.phone_number == phone_number)).scalar_one_or_none()
    code = tokens.new_code()
    token = tokens.issue(tokens.PHONE_SIGN_IN, user_id, {"phoneNumber": phone_number}, code=code)
    db.session.commit()
    delivery.send_sms(phone_number, f"Your sign-in code is {code}. It is valid for 10 minutes.")
    return {"token": token}


def verify(token: str, code: str) -> dict[str, Any]:
    """The token pair for a right code (401 wrong code or token, 403 blocked user)."""
    _require_feature()
    row = tokens.find(tokens.PHONE_SIGN_IN, token)
    if row is None:
        raise unauthorized("This token is unknown, used or expired; ask for a new code")
    number = row.data["phoneNumber"]
    limit_code_tries(number, row.user_id)  # per number: the user may not exist yet
    check_code(row, code)
    user = db.session.execute(select(User).where(User.phone_number == number)).scalar_one_or_none()
    if user is None:
        try:
            user = new_user(phone_number=number)
        except IntegrityError:  # two first sign-ins of one number at once: the other created it
            db.session.rollback()
            raise unauthorized("Signed in from elsewhere at the same moment; ask for a new code") from None
        log.info("user %s created by phone sign-in", user.id)
    else:
        require_active(user)
    tokens.clear_code_tries(number)
    db.session.commit()
    return finish_sign_in(user, by_phone_code=True)
