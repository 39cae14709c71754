"""The ``Trellis-Signature`` header: HMAC-SHA256 of ``"<t>.<raw body>"`` with the webhook's secret.

The timestamp is signed with the body so a receiver can refuse replays older than its tolerance window;
``v1`` names the scheme so another can be added beside it later (as Stripe's ``Stripe-Signature`` does).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A webhook secret: 256 random bits, URL-safe text."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature_header(secret: str, body: bytes, timestamp: int) -> str:
    """``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"
