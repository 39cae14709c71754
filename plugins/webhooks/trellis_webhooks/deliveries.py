"""The delivery queue: claiming due deliveries, one signed attempt, recording how it went.

Every process's workers share the queue in the database. A claim moves a due row's ``next_attempt_at``
one lease ahead and sets its ``claim`` token in one ``UPDATE … RETURNING``; on PostgreSQL the rows are
picked with ``FOR UPDATE SKIP LOCKED``, so concurrent workers take different rows without waiting for each
other; on SQLite the database allows one writer at a time and a process lock keeps this process's threads
from queueing for it. The outcome is written only while the claim token still matches, and a worker that
dies leaves a claimed row that becomes due again when its lease ends: every delivery is sent at least once,
and by one worker at a time.

Commits wait for the disk like any other. They are few: a dispatcher pass, a claim of what is left over,
one batch of outcomes per 50 ms. Turning the wait off (``SET LOCAL synchronous_commit = off``) takes one
more statement per transaction, which cost the server more CPU than the wait
(``bench/results/modules.md#webhook-deliveries``). A crash now forgets no claim or outcome.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import Flask
from sqlalchemy import and_, bindparam, not_, select, text, update

from trellis import current, db
from trellis.errors import conflict, not_found
from trellis.metrics import ModuleCounter
from trellis.work_queue import JITTER  # ±10 % on every delay: failures of one outage are not retried in one burst

from .models import DELIVERED, FAILED, PENDING, Webhook, WebhookDelivery
from .patterns import PING
from .sender import Outcome, Sender
from .settings import DEFAULTS, DeliverySettings
from .signing import signature_header

DELIVERIES = ModuleCounter(
    "trellis_webhook_deliveries_total",
    "Webhook delivery attempts by outcome: delivered, retrying (failed, tried again later), failed (gave up)",
    ("status",),
)
RETRYING = "retrying"

_sqlite_claims = threading.Lock()


@dataclass(frozen=True)
class Claimed:
    """A delivery this worker holds until ``next_attempt_at`` (the lease)."""

    id: str
    webhook_id: str
    url: str
    secret: str
    event: str
    body: str
    attempts: int
    claim: str


@dataclass
class Runtime:
    """What the module keeps per app (``app.extensions["trellis_webhooks"]``)."""

    settings: DeliverySettings
    sender: Sender


def runtime_of(app: Flask) -> Runtime:
    found = app.extensions.get("trellis_webhooks")
    if found is None:
        settings = DEFAULTS.read(app.config, "WEBHOOKS")
        found = app.extensions["trellis_webhooks"] = Runtime(settings, Sender(pool_size=settings.senders))
    return found


def runtime() -> Runtime:
    return runtime_of(current.app())


def body_text(event_id: int | None, event: str, created_at: str | None, data: Any) -> str:
    """The JSON body of a delivery, ``{id, event, createdAt, data}``; serialised once, sent byte for byte."""
    return json.dumps(
        {"id": event_id, "event": event, "createdAt": created_at, "data": data},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def delivery_dict(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "_id": delivery.id,
        "webhook": delivery.webhook_id,
        "event": delivery.event,
        "eventId": delivery.event_id,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "responseStatus": delivery.response_status,
        "lastError": delivery.last_error,
        "createdAt": db.isoformat(delivery.created_at),
        "deliveredAt": db.isoformat(delivery.delivered_at),
        "nextAttemptAt": db.isoformat(delivery.next_attempt_at) if delivery.status == PENDING else None,
    }


# --- claiming ------------------------------------------------------------------------------------------


def lease() -> tuple[datetime, datetime, str]:
    """(now, when a claim made now runs out, a new claim token)."""
    now = db.utcnow()
    return now, now + timedelta(seconds=runtime().settings.lease_seconds), db.new_id()


_due = and_(WebhookDelivery.status == PENDING, WebhookDelivery.next_attempt_at <= bindparam("now"))
_pick = (
    select(WebhookDelivery.id)
    .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
    .where(_due, Webhook.active.is_(True))
    .order_by(WebhookDelivery.next_attempt_at)
    .limit(bindparam("limit"))
)
_ANY_DUE = _pick.limit(1)


_claim = update(WebhookDelivery).values(
    attempts=WebhookDelivery.attempts + 1, next_attempt_at=bindparam("lease_end"), claim=bindparam("token")
)
# PostgreSQL: the picked rows are claimed and returned with what their attempts need, the webhook's url
# and secret included, in one ``UPDATE … FROM webhooks … RETURNING`` (a claim used to take three
# statements). SQLite's RETURNING cannot name the FROM table: its claim returns ids, read after.
# What an attempt needs, in the order of Claimed's fields.
_CLAIMED_COLUMNS = (
    WebhookDelivery.id,
    WebhookDelivery.webhook_id,
    Webhook.url,
    Webhook.secret,
    WebhookDelivery.event,
    WebhookDelivery.body,
    WebhookDelivery.attempts,
    WebhookDelivery.claim,
)
# The pick is a MATERIALIZED CTE, run once: as ``id IN (pick)`` PostgreSQL could rescan it for every
# row it updated, and each rescan found the next rows still due, so a claim of 17 took all 52 due
# (test_a_claim_takes_no_more_than_its_limit).
_picked = _pick.with_for_update(skip_locked=True, of=WebhookDelivery).cte("picked").prefix_with("MATERIALIZED")
_CLAIM_POSTGRESQL = _claim.where(
    WebhookDelivery.id == _picked.c.id,
    _due,
    Webhook.id == WebhookDelivery.webhook_id,
).returning(*_CLAIMED_COLUMNS)
_CLAIM_SQLITE = _claim.where(WebhookDelivery.id.in_(_pick), _due).returning(WebhookDelivery.id)


def claim_due(limit: int) -> list[Claimed]:
    """Claim up to ``limit`` due deliveries of active webhooks (oldest due first), in a transaction of its own."""
    now, lease_end, token = lease()
    values = {"now": now, "limit": limit, "lease_end": lease_end, "token": token}
    if db.is_postgresql():
        rows = db.session.execute(_CLAIM_POSTGRESQL, values).all()
        db.session.commit()
        return [_as_claimed(row) for row in rows]
    # An idle poll only reads, in a transaction of its own: a write statement takes SQLite's one write lock
    # even when it changes nothing, and a request that had read before writing would then fail at once
    # (SQLite does not wait to turn a reading transaction into a writing one).
    nothing_due = db.session.execute(_ANY_DUE, values).first() is None
    db.session.rollback()
    if nothing_due:
        return []
    with _sqlite_claims:
        ids = list(db.session.execute(_CLAIM_SQLITE, values).scalars())
    claimed = _claimed(ids) if ids else []
    db.session.commit()
    return claimed


def claim_one(webhook_id: str, delivery_id: str) -> Claimed:
    """Claim one delivery now, whatever its status (a manual retry); 409 while an attempt is in flight."""
    now, lease_end, token = lease()
    in_flight = and_(WebhookDelivery.claim.is_not(None), WebhookDelivery.next_attempt_at > now)
    ids = list(
        db.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id, WebhookDelivery.webhook_id == webhook_id, not_(in_flight))
            .values(status=PENDING, attempts=WebhookDelivery.attempts + 1, next_attempt_at=lease_end, claim=token)
            .returning(WebhookDelivery.id)
        ).scalars()
    )
    if not ids:
        db.session.rollback()
        found = db.session.execute(
            select(WebhookDelivery.id).where(
                WebhookDelivery.id == delivery_id, WebhookDelivery.webhook_id == webhook_id
            )
        ).scalar_one_or_none()
        if found is None:
            raise not_found(f"No delivery {delivery_id!r} of webhook {webhook_id!r}")
        raise conflict("This delivery is being attempted right now; look again in a few seconds")
    claimed = _claimed(ids)
    db.session.commit()
    return claimed[0]


def queue_ping(webhook: Webhook) -> Claimed:
    """A ``ping`` delivery for ``webhook``, created already claimed so the caller attempts it at once."""
    now, lease_end, token = lease()
    delivery = WebhookDelivery(
        id=db.new_id(),
        webhook_id=webhook.id,
        event=PING,
        body=body_text(None, PING, db.isoformat(now), {"webhookId": webhook.id, "url": webhook.url}),
        status=PENDING,
        attempts=1,
        next_attempt_at=lease_end,
        claim=token,
        created_at=now,
    )
    db.session.add(delivery)
    db.session.commit()
    return Claimed(delivery.id, webhook.id, webhook.url, webhook.secret, PING, delivery.body, 1, token)


def _claimed(ids: list[str]) -> list[Claimed]:
    rows = db.session.execute(
        select(*_CLAIMED_COLUMNS)
        .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
        .where(WebhookDelivery.id.in_(ids))
    ).all()
    return [_as_claimed(row) for row in rows]


def _as_claimed(row: Any) -> Claimed:
    delivery_id, webhook_id, url, secret, event, body, attempts, claim = row
    return Claimed(delivery_id, webhook_id, url, secret, event, body, attempts, claim or "")


# --- one attempt ---------------------------------------------------------------------------------------


def attempt(claimed: Claimed, allow_private: bool, sender: Sender) -> Outcome:
    """POST the delivery, signed now (a retry is signed with its own timestamp, over the same body)."""
    body = claimed.body.encode()
    headers = {
        "Content-Type": "application/json",
        "Trellis-Event": claimed.event,
        "Trellis-Delivery": claimed.id,
        "Trellis-Signature": signature_header(claimed.secret, body, int(time.time())),
    }
    return sender.post(claimed.url, body, headers, allow_private)


_table = WebhookDelivery.__table__
# One statement for every outcome, run as an executemany: a batch of attempts is recorded in one
# transaction (one commit, one fsync) rather than one each. Only a claim still held is written.
_RECORD = (
    update(_table)
    .where(_table.c.id == bindparam("b_id"), _table.c.claim == bindparam("b_claim"))
    .values(
        status=bindparam("b_status"),
        next_attempt_at=bindparam("b_next", type_=_table.c.next_attempt_at.type),
        delivered_at=bindparam("b_delivered", type_=_table.c.delivered_at.type),
        response_status=bindparam("b_response"),
        last_error=bindparam("b_error"),
        claim=None,
    )
)

# PostgreSQL: the whole batch in one statement over arrays. psycopg2 runs an executemany as one statement
# (one round trip) per row (bench/results/modules.md#webhook-deliveries).
_RECORD_POSTGRESQL = text(
    f"""UPDATE {_table.name} AS d
    SET status = v.status, next_attempt_at = v.next_at, delivered_at = v.delivered_at,
        response_status = v.response_status, last_error = v.last_error, claim = NULL
    FROM unnest(CAST(:b_id AS text[]), CAST(:b_claim AS text[]), CAST(:b_status AS text[]),
                CAST(:b_next AS timestamptz[]), CAST(:b_delivered AS timestamptz[]),
                CAST(:b_response AS integer[]), CAST(:b_error AS text[]))
        AS v(id, claim, status, next_at, delivered_at, response_status, last_error)
    WHERE d.id = v.id AND d.claim = v.claim"""
)


def record(results: Sequence[tuple[Claimed, Outcome]]) -> list[str]:
    """Write the outcomes of attempts, in one transaction; returns each one's status: ``delivered``,
    ``retrying`` (a failure tried again after the schedule's next delay) or ``failed`` (attempts used up).
    An outcome whose claim was lost meanwhile (the delivery deleted, or retried by an admin) is not written."""
    settings = runtime().settings
    now = db.utcnow()
    rows, statuses = [], []
    for claimed, outcome in results:
        if outcome.delivered:
            status, stored, next_at = DELIVERED, DELIVERED, now
        elif claimed.attempts < settings.max_attempts:
            delay = settings.retry_seconds[claimed.attempts - 1] * random.uniform(1 - JITTER, 1 + JITTER)
            status, stored, next_at = RETRYING, PENDING, now + timedelta(seconds=delay)
        else:
            status, stored, next_at = FAILED, FAILED, now
        statuses.append(status)
        rows.append(
            {
                "b_id": claimed.id,
                "b_claim": claimed.claim,
                "b_status": stored,
                "b_next": next_at,
                "b_delivered": now if outcome.delivered else None,
                "b_response": outcome.status,
                "b_error": outcome.error,
            }
        )
    if rows:
        if db.is_postgresql():
            db.session.execute(_RECORD_POSTGRESQL, {key: [row[key] for row in rows] for key in rows[0]})
        else:
            db.session.execute(_RECORD, rows)
        db.session.commit()
    for status, count in Counter(statuses).items():
        DELIVERIES.inc(count, status=status)
    return statuses


_RELEASE = (
    update(_table)
    .where(_table.c.id == bindparam("b_id"), _table.c.claim == bindparam("b_claim"))
    .values(
        next_attempt_at=bindparam("b_now", type_=_table.c.next_attempt_at.type),
        attempts=_table.c.attempts - 1,
        claim=None,
    )
)


def release(claims: Sequence[Claimed]) -> None:
    """Give back claims that were not attempted: due again at once, the claim's attempt not counted."""
    now = db.utcnow()
    db.session.execute(_RELEASE, [{"b_id": c.id, "b_claim": c.claim, "b_now": now} for c in claims])
    db.session.commit()


def deliver(claimed: Claimed, allow_private: bool) -> str:
    """One attempt of a claimed delivery, made now and recorded; returns its status (see :func:`record`)."""
    return record([(claimed, attempt(claimed, allow_private, runtime().sender))])[0]
