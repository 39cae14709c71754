"""Turning the event log into deliveries: one row per matching active webhook × event.

A durable consumer of the core (``trellis.events.consumer("webhooks")``) holds the last ``eventId`` turned
into deliveries. A pass locks it, reads the events after it (``trellis.events.read``), inserts the
deliveries and moves the cursor in the same transaction: an event is queued once, whichever process gets
there first, and a crash between two passes loses none (the next pass starts from the cursor). On PostgreSQL the row is locked with
``FOR UPDATE SKIP LOCKED`` (a process that finds it locked leaves the work to the holder); on SQLite the
first statement is a write, which takes the database's one write lock.

The deliveries a pass queues are inserted already claimed by its process, as many as its senders have room
for (``room``), and go straight to them: claiming them back from the table would cost a transaction and
a returned row per delivery (``bench/results/modules.md#webhook-deliveries``). The rest are inserted due
now, for any worker's claimer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from trellis import db, events, statements
from trellis.cache import Remembered
from trellis.module_config import get as get_config

from .deliveries import Claimed, body_text, lease
from .models import PENDING, Webhook, WebhookDelivery
from .patterns import matches_any

CURSOR = "webhooks"
# Events per transaction: a pass holds the cursor (and on SQLite the write lock) for one batch at a time.
BATCH = 500


def subscribe(wake: Callable[[], None]) -> Callable[[], None]:
    """Wake the dispatcher on every event this process hears of; returns the unsubscribe function."""
    return events.subscribe("*.*.*", lambda _event: wake())


# The dispatch position: a durable consumer of the core's log.
_CURSOR = events.consumer(CURSOR)


def _new_events() -> bool:
    """Whether a pass may find work. Without an active webhook, no. On SQLite, only when the log has moved
    past the cursor, read without a lock (and the read transaction ended): an idle pass must not take its
    write lock, or a request that read before writing fails at once. On PostgreSQL the pass's row lock
    (``SKIP LOCKED``) blocks nobody, so the pass looks itself: two statements fewer per pass."""
    if not _active_hooks():
        # Nothing to deliver: no pass, no lock, no write per event (the cursor stays behind; a webhook made
        # or reactivated later skips the events from before it, see _deliveries).
        db.session.rollback()
        return False
    if db.is_postgresql():
        return True
    cursor = _CURSOR.position()
    db.session.rollback()
    return cursor is None or events.latest() != cursor


@dataclass(frozen=True)
class _Hook:
    id: str
    patterns: list[str]
    since: str  # when it was made or reactivated, as the log writes times
    url: str
    secret: str


# The active webhooks, kept per process until a webhook is written anywhere (``service`` bumps it in the
# write's transaction). Read at every wake (each event, coalesced), the query and its rollback showed
# during live fan-out even with no webhook at all (bench/results/modules.md#webhook-deliveries).
ACTIVE = Remembered("webhooks-active")


def _active_hooks() -> list[_Hook]:
    return ACTIVE.get("active", _read_active_hooks)


def _read_active_hooks() -> list[_Hook]:
    rows = db.session.execute(
        select(Webhook.id, Webhook.events, Webhook.active_since, Webhook.url, Webhook.secret).where(
            Webhook.active.is_(True)
        )
    )
    return [
        _Hook(hook_id, patterns, db.isoformat(since), url, secret) for hook_id, patterns, since, url, secret in rows
    ]


@dataclass
class Pass:
    """What a pass did: deliveries queued, those of them claimed for this process's senders, whether it read
    a whole batch (more may follow) and whether another process held the cursor."""

    queued: int = 0
    claimed: list[Claimed] = field(default_factory=list)
    allow_private: bool = False
    full: bool = False
    busy: bool = False


def one_pass(room: int) -> Pass:
    """Queue the deliveries of up to BATCH events, the first ``room`` of them claimed for this process."""
    if not _new_events():
        return Pass()
    cursor = _CURSOR.lock()
    if cursor is None:
        db.session.rollback()
        return Pass(busy=True)
    batch = events.read(after=cursor, limit=BATCH)
    if not batch:
        latest = events.latest()
        if cursor > latest:  # the log was emptied or restored from an older backup: follow it
            _CURSOR.advance(latest)
        db.session.commit()
        return Pass()
    config = get_config("webhooks")
    done = Pass(allow_private=bool(config["allowPrivateTargets"]), full=len(batch) == BATCH)
    rows = _deliveries(batch, room, done.claimed) if config["active"] else []
    statements.insert_rows(db.session.connection(), WebhookDelivery.__table__, rows)
    _CURSOR.advance(batch[-1].id)
    db.session.commit()
    done.queued = len(rows)
    return done


def _deliveries(batch: list[events.Event], room: int, claimed: list[Claimed]) -> list[dict[str, Any]]:
    """The delivery rows of ``batch``; the first ``room`` are claimed (and appended to ``claimed``)."""
    hooks = _active_hooks()  # again, after the events were read: a webhook made since the gate gets them
    if not hooks:
        return []
    now, lease_end, token = lease()
    rows = []
    for event in batch:
        # A webhook gets the events from its creation or reactivation on (same ISO text on both sides:
        # comparable as strings).
        wanted = [hook for hook in hooks if event.created_at >= hook.since and matches_any(hook.patterns, event.topic)]
        if not wanted:
            continue
        body = body_text(event.id, event.topic, event.created_at, event.payload)
        for hook in wanted:
            row: dict[str, Any] = {
                "id": db.new_id(),
                "webhook_id": hook.id,
                "event_id": event.id,
                "event": event.topic,
                "body": body,
                "status": PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "claim": None,
                "created_at": now,
            }
            if len(claimed) < room:  # as a claim would leave it: one attempt counted, due when the lease ends
                row.update(attempts=1, next_attempt_at=lease_end, claim=token)
                claimed.append(Claimed(row["id"], hook.id, hook.url, hook.secret, event.topic, body, 1, token))
            rows.append(row)
    return rows
