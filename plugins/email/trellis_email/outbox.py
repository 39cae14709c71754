"""Mail queued in the caller's transaction and sent by background workers, with retries: the durable outbox.

A module that sends mail on behalf of a request (a reset link, a sign-in link) queues it with
:func:`queue_template` or :func:`queue_email` in the transaction that writes what the mail is about (the
token it carries) and answers; it never waits for the provider. The message is a row of ``email_messages``
(status ``queued``), so an answer means the mail is stored; a failed transaction queues nothing.

Every serving process runs ``senders`` worker threads (``Module.background``) that claim due messages
through the core's :class:`trellis.work_queue.LeaseQueue` (``SKIP LOCKED`` on PostgreSQL: once across
processes), send them through the configured provider and record how it went: ``sent``, or due again after
the next delay of ``TRELLIS_EMAIL_RETRY_SECONDS`` (±10 %), or ``failed`` once those are used up. A process
killed mid-send leaves its claim, which ends after the lease: another process sends the message then.

A message that carries a secret (``secret=("link",)``) is stored twice: with the secret replaced by
``[hidden]`` in ``subject`` and ``body``, which the outbox listing shows and keeps, and as sent in
``secret_content``, which is deleted once the message is sent or given up, and never listed or logged.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from flask import Flask, current_app
from sqlalchemy import bindparam, false, insert, select, text

from trellis import current, db, statements
from trellis.background import PollingWorker
from trellis.errors import APIError, bad_request, not_found
from trellis.module_config import get as get_config
from trellis.work_queue import LeaseQueue, QueueSettings, retry_at

from .addresses import parse_recipient, parse_sender
from .models import FAILED, QUEUED, SENT, EmailMessage, EmailTemplate
from .providers import Outgoing, ProviderFailure, for_config
from .rendering import render

log = logging.getLogger(__name__)

HIDDEN = "[hidden]"
OUTBOX = "outbox"  # the provider that delivers into the listing
# About 10 s, 30 s, 2 min, 10 min, 30 min, 1 h: seven attempts over ~1.7 h (a reset link lives one hour).
RETRY_SECONDS = (10.0, 30.0, 120.0, 600.0, 1800.0, 3600.0)
# A claimed message is due again after this long (or six provider timeouts, if longer): a process that
# died mid-send loses nothing, and a slow send (each SMTP step has its own timeout) is not sent twice.
LEASE_SECONDS = 120.0
SENDERS = 4  # messages in flight at once per process: a slow mail server holds up one, not the others
POLL_SECONDS = 1.0
# Process settings, not module config: they shape each process's senders, and tests shorten them.
DEFAULTS = QueueSettings(RETRY_SECONDS, LEASE_SECONDS, SENDERS, POLL_SECONDS)
SETTINGS = DEFAULTS.declare(
    "EMAIL",
    retry="delays before the 2nd, 3rd … attempt (7 attempts over ~1.7 h)",
    lease="how long a claim holds a message (at least 6 × the provider's `timeout`)",
    senders="messages in flight at once per process (a slow server holds up one sender)",
    poll="how often an idle process looks for due messages (one sender polls)",
)

_table = EmailMessage.__table__
QUEUE = LeaseQueue(
    _table,
    _table.c.status == QUEUED,
    [_table.c[name] for name in ("id", "to", "sender", "subject", "body", "secret_content", "attempts", "claim")],
)


def settings_of(app: Flask) -> QueueSettings:
    found = app.extensions.get("trellis_email_queue")
    if found is None:
        found = app.extensions["trellis_email_queue"] = DEFAULTS.read(app.config, "EMAIL")
    return found


# --- queueing ----------------------------------------------------------------------------------------


def queue_email(
    to: str,
    subject: str,
    html: str,
    from_: str | None = None,
    *,
    template_name: str | None = None,
    shown: tuple[str, str] | None = None,
) -> str:
    """Queue one HTML message in the current transaction (the caller commits) and return its id.

    ``shown``: ``(subject, html)`` with the secrets hidden, for the listings, when the message carries any.
    Bad addresses or subject raise 400 and queue nothing.
    """
    row = _message_row(to, subject, html, from_, template_name, shown)
    # One core INSERT: the ORM's unit of work cost a request more CPU than the statement itself.
    statements.insert_rows(db.session.connection(), _table, [row])
    worker = current_app.extensions.get("trellis_email_worker")
    if worker is not None:  # this process's senders start on it once the transaction commits
        db.after_commit(worker.wake, key=worker)
    return row["id"]


def queue_template(
    to: str, template_name: str, variables: dict[str, Any], from_: str | None = None, *, secret: Collection[str] = ()
) -> str:
    """Render a stored template and queue it (404 unknown template, 400 missing variable); the variables
    named in ``secret`` are hidden in what the outbox listing shows."""
    template = db.session.execute(select(EmailTemplate).where(EmailTemplate.name == template_name)).scalar_one_or_none()
    if template is None:
        raise not_found(f"No email template named {template_name!r}")
    subject, body, shown = _render(template, variables, secret)
    return queue_email(to, subject, body, from_, template_name=template.name, shown=shown)


def rehearse_template(to: str, template_name: str, variables: dict[str, Any], *, secret: Collection[str] = ()) -> None:
    """What :func:`queue_template` costs, queueing nothing, for a route that must not tell by its timing
    whether it queued (forgot-password for an unknown address): the same read, renders and checks, and on
    PostgreSQL as many statements as the known address's token and mail (an empty transactional WAL
    message, so the caller's commit waits for the disk as one that wrote rows does, and an INSERT of none).
    A transaction id alone (``txid_current()``) was not enough: a commit that wrote no WAL does not wait."""
    if db.is_postgresql():
        db.session.execute(_WAL_AT_COMMIT)
    template = db.session.execute(select(EmailTemplate).where(EmailTemplate.name == template_name)).scalar_one_or_none()
    if template is not None:
        subject, body, shown = _render(template, variables, secret)
        try:
            row = _message_row(to, subject, body, None, template.name, shown)
        except APIError:
            return  # the known address's mail would be refused the same way
        if db.is_postgresql():
            db.session.execute(_INSERT_NOTHING, {"id": row["id"]})


_WAL_AT_COMMIT = text("SELECT pg_logical_emit_message(true, 'trellis', '')")
_INSERT_NOTHING = insert(_table).from_select(["id"], select(bindparam("id", type_=_table.c.id.type)).where(false()))


def _render(
    template: EmailTemplate, variables: dict[str, Any], secret: Collection[str]
) -> tuple[str, str, tuple[str, str] | None]:
    subject, body = render(template.subject, template.body, variables)
    shown = None
    if secret:
        shown = render(template.subject, template.body, {**variables, **dict.fromkeys(secret, HIDDEN)})
    return subject, body, shown


def _message_row(
    to: str, subject: str, html: str, from_: str | None, template_name: str | None, shown: tuple[str, str] | None
) -> dict[str, Any]:
    config = get_config("email")
    errors: dict[str, list[str]] = {}
    recipient = sender = None
    try:
        recipient = parse_recipient(to)
    except ValueError as exc:
        errors["to"] = [str(exc)]
    try:
        sender = parse_sender(from_ or config["from"])
    except ValueError as exc:
        errors["from" if from_ else "config.from"] = [str(exc)]
    if errors:
        raise bad_request("Invalid e-mail address", errors)
    if "\r" in subject or "\n" in subject:
        raise bad_request("The subject must not contain line breaks", {"subject": ["Line breaks are not allowed."]})
    secret = shown is not None and shown != (subject, html)
    now = db.utcnow()
    return {
        "id": db.new_id(),
        "to": str(recipient),
        "sender": str(sender),
        "subject": shown[0] if secret else subject,  # type: ignore[index]
        "body": shown[1] if secret else html,  # type: ignore[index]
        "secret_content": {"subject": subject, "body": html} if secret else None,
        "template_name": template_name,
        "provider": config["provider"],
        "status": QUEUED,
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
    }


# --- sending -----------------------------------------------------------------------------------------


def send_due(limit: int = 1) -> int:
    """Claim up to ``limit`` due messages, send each and record how it went; how many were claimed."""
    from .service import SENT as SENT_COUNTER

    app = current.app()
    settings = settings_of(app)
    config = get_config("email")
    provider = for_config(config)
    timeout = float(config[config["provider"]].get("timeout", 0))
    rows = QUEUE.claim(db.session, limit, max(settings.lease_seconds, 6 * timeout))
    for row in rows:
        content = row.secret_content or {"subject": row.subject, "body": row.body}
        values: dict[str, Any] = {"provider": provider.name}
        try:
            message = Outgoing(parse_recipient(row.to), parse_sender(row.sender), content["subject"], content["body"])
            values.update(status=SENT, provider_message_id=provider.send(message), error=None)
        except ProviderFailure as exc:
            values["error"] = str(exc)
        except Exception:  # never the message in the log: it may carry a secret link
            log.exception("email %s could not be sent", row.id)
            values["error"] = "Internal error while sending (see the server log)"
        if values.get("status") == SENT and provider.name == OUTBOX and row.secret_content:
            # The outbox provider delivers into the listing itself: there the message is its only mailbox,
            # so it shows what was sent (a development set-up; a real provider keeps the secret hidden).
            values.update(subject=content["subject"], body=content["body"])
        again = None if values.get("status") == SENT else retry_at(settings.retry_seconds, row.attempts)
        if again is not None:
            values.update(status=QUEUED, next_attempt_at=again)
        else:  # sent or given up: the secret is kept no longer than needed
            values.setdefault("status", FAILED)
            values.update(secret_content=None, next_attempt_at=None)
        if values["status"] != SENT:
            log.warning(
                "email %s through %s failed (attempt %s): %s", row.id, provider.name, row.attempts, values["error"]
            )
        QUEUE.settle(db.session, row.id, row.claim, updated_at=db.utcnow(), **values)
        db.session.commit()
        SENT_COUNTER.inc(provider=provider.name, status="retrying" if again else values["status"])
    return len(rows)


def send_queued() -> int:
    """Send every message due now, in this thread (what the background senders do; for tests); how many."""
    total = 0
    while count := send_due(10):
        total += count
    return total


def start(app: Flask) -> None:
    """``Module.background``: this process's senders."""
    settings = settings_of(app)
    worker = PollingWorker(
        app,
        "email-senders",
        lambda: send_due(1) > 0,
        threads=settings.senders,
        poll_seconds=settings.poll_seconds,
        logger=log,
    )
    app.extensions["trellis_email_worker"] = worker
    worker.start()
