"""Mail and SMS for the account lifecycle, through the Email and SMS modules' service functions. Both
modules are optional (the module `uses` them): a route that would send through one that is not installed
or not active answers 400 naming it (:func:`require_module`), before it writes anything.

The templates are created in the Email module when missing (at start and before a send), so an
administrator can edit them; each uses the variable ``link`` (``TeamInvite`` also ``teamName`` and
``role``). Mail is queued in the transaction of the token it carries and sent by the Email module's
background senders (``trellis_email.outbox``): no request waits for a mail server, and an answer means
the mail is stored. Every route that sends is rate limited
per client IP and per target address (``rateLimits.sendPerIp`` / ``sendPerAddress``).
"""

from __future__ import annotations

import logging

from flask import Flask, current_app
from sqlalchemy.exc import SQLAlchemyError

from trellis import db, public_url
from trellis.errors import APIError, bad_request, provider_error
from trellis.module_config import get as get_config
from trellis.ratelimit import check as rate_limit
from trellis.ratelimit import client_ip

from .tokens import digest

log = logging.getLogger(__name__)

MODULE = "authentication"
HOOK = "/hook/authentication"  # where mailed links and providers' redirects come back

TEMPLATES: dict[str, tuple[str, str]] = {
    "EmailVerification": (
        "Confirm your email address",
        '<p>Please confirm your email address by opening this link:</p><p><a href="{{link}}">{{link}}</a></p>'
        "<p>The link is valid for 24 hours.</p>",
    ),
    "ForgotPassword": (
        "Reset your password",
        "<p>Someone asked to reset the password of your account. To choose a new one, open this link:</p>"
        '<p><a href="{{link}}">{{link}}</a></p><p>The link is valid for one hour. '
        "If you did not ask for it, ignore this message.</p>",
    ),
    "ChangeEmailVerification": (
        "Confirm your new email address",
        '<p>To make this the email address of your account, open this link:</p><p><a href="{{link}}">{{link}}</a></p>'
        "<p>The link is valid for 24 hours.</p>",
    ),
    "MagicLink": (
        "Your sign-in link",
        '<p>Open this link to sign in:</p><p><a href="{{link}}">{{link}}</a></p>'
        "<p>The link is valid for 15 minutes and works once.</p>",
    ),
    "TeamInvite": (
        "You are invited to join {{teamName}}",
        "<p>You are invited to join the team {{teamName}} as {{role}}. To accept, open this link and sign in there:</p>"
        '<p><a href="{{link}}">{{link}}</a></p><p>The invitation is valid for 7 days.</p>',
    ),
}


def ensure_templates(commit: bool = True) -> None:
    from trellis_email.service import ensure_template  # the Email module's service API (see require_module)

    for name, (subject, body) in TEMPLATES.items():
        ensure_template(name, subject, body, commit=commit)


# How long start-up may wait for another transaction that holds the rows or the database (SQLite).
_START_WAIT = {
    "postgresql": ("SET lock_timeout = '2s'", "RESET lock_timeout"),
    "sqlite": ("PRAGMA busy_timeout = 2000", "PRAGMA busy_timeout = 30000"),
}


def create_templates_on_start(app: Flask) -> None:
    """Create missing templates when the database is ready. A database not migrated yet, or busy with
    another transaction that writes them, is left alone (the first send creates them). Without the Email
    module there is nothing to create."""
    if app.extensions["trellis"].module("email") is None:
        return
    with app.app_context():
        limit, restore = _START_WAIT.get(db.engine().dialect.name, (None, None))
        try:
            if limit:
                db.session.connection().exec_driver_sql(limit)
            ensure_templates()
        except SQLAlchemyError as exc:
            db.session.rollback()
            log.info("email templates not created at start (%s); the first send will", exc.__class__.__name__)
        finally:
            if restore:
                try:
                    db.session.connection().exec_driver_sql(restore)
                    db.session.commit()
                except SQLAlchemyError:
                    db.session.rollback()
            db.session.remove()


def require_module(name: str) -> None:
    """400 naming the module when a route needs Email or SMS and it is switched off."""
    trellis = current_app.extensions["trellis"]
    if trellis.module(name) is None or not trellis.configs.is_active(name):
        raise bad_request(
            f"The {name} module is not active; this action needs it", {"module": [f"{name} is not active"]}
        )


def limit_sends(address: str) -> None:
    """Count a send against the caller's IP and the target (kept as a digest: no addresses in Redis)."""
    limits = get_config(MODULE)["rateLimits"]
    rate_limit("auth-send-ip", client_ip(), limits["sendPerIp"])
    rate_limit("auth-send-address", digest(address.lower()), limits["sendPerAddress"])


def host_url() -> str:
    """The base of mailed links: ``hostUrl`` from the config, else the server's public base URL
    (``TRELLIS_PUBLIC_URL``, or the request's own when its host is trusted; 400 for any other host)."""
    return (get_config(MODULE)["hostUrl"] or public_url.base_url()).rstrip("/")


def queue_mail(to: str, template: str, link: str, **variables: str) -> None:
    """Queue the mail in the current transaction (the caller commits it with the token the link carries):
    the Email module's senders send it in the background, with retries. The link shows as hidden in the
    Email module's outbox listing and is deleted once the mail is sent; ``variables`` are the template's
    others (``TeamInvite``: ``teamName``, ``role``)."""
    from trellis_email.outbox import queue_template

    values = {**variables, "link": link}
    try:
        queue_template(to, template, values, secret=("link",))
    except APIError as exc:
        if exc.status != 404:
            raise
        # Deleted by an administrator, or never created: the default comes back with the token and its mail.
        ensure_templates(commit=False)
        queue_template(to, template, values, secret=("link",))


def rehearse_mail(to: str, template: str, link: str) -> None:
    """For an unknown address: the work of :func:`queue_mail`, queueing nothing (the caller commits), so the
    answer takes as long as for a known one."""
    from trellis_email.outbox import rehearse_template

    rehearse_template(to, template, {"link": link}, secret=("link",))


def send_sms(number: str, text: str) -> None:
    """One SMS; a provider failure is a 500 PROVIDER_ERROR (the code would never arrive)."""
    from trellis_sms.service import send  # the SMS module's service API (see require_module)

    record = send([number], text)[0]
    if record.status == "failed":
        raise provider_error(f"SMS not sent: {record.error}")
