"""Turning the event log into deliveries: one row per matching active webhook × event.

A cursor row (``webhooks_cursor``) holds the last ``eventId`` turned into deliveries. A pass locks it,
reads the events after it (``trellis.events.read``), inserts the deliveries and moves the cursor in the
same transaction: an event is queued once, whichever process gets there first, and a crash between two
passes loses none (the next pass starts from the cursor). On PostgreSQL the row is locked with
``FOR UPDATE SKIP LOCKED`` (a process that finds it locked leaves the work to the holder); on SQLite the
first statement is a write, which takes the database's one write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from trellis import db, events
from trellis.module_config import get as get_config

from .deliveries import body_text, no_wait_for_disk
from .models import PENDING, Webhook, WebhookCursor, WebhookDelivery
from .patterns import matches_any

CURSOR = "events"
# Events per transaction: a pass holds the cursor (and on SQLite the write lock) for one batch at a time.
BATCH = 500


def subscribe(wake: Callable[[], None]) -> Callable[[], None]:
    """Wake the dispatcher on every event this process hears of; returns the unsubscribe function."""
    return events.subscribe("*.*.*", lambda _event: wake())


def _lock_cursor() -> int | None:
    """The locked cursor in the session's transaction, or None when another process holds it."""
    if db.is_postgresql():
        found = db.session.execute(
            select(WebhookCursor.last_event_id).where(WebhookCursor.name == CURSOR).with_for_update(skip_locked=True)
        ).scalar_one_or_none()
        if found is not None:
            return found
        if db.session.get(WebhookCursor, CURSOR) is not None:
            return None  # locked by another process
    else:
        touched = db.session.execute(
            update(WebhookCursor).where(WebhookCursor.name == CURSOR).values(last_event_id=WebhookCursor.last_event_id)
        ).rowcount
        if touched:
            return db.session.execute(
                select(WebhookCursor.last_event_id).where(WebhookCursor.name == CURSOR)
            ).scalar_one()
    # First pass ever (or after the tables were emptied): from the start of what the log keeps. Until a
    # webhook exists this only moves the cursor; starting from "now" instead could skip an event that
    # committed while the module's first pass was still to come.
    db.session.add(WebhookCursor(name=CURSOR, last_event_id=0))
    try:
        db.session.flush()
    except IntegrityError:  # another process created it first
        db.session.rollback()
        return None
    return 0


def _new_events() -> bool:
    """Whether the log has moved past the cursor, read without a lock (and the read transaction ended): an
    idle pass must not take SQLite's write lock, or a request that read before writing fails at once."""
    if not _active_hooks():
        # Nothing to deliver: no pass, no lock, no write per event (the cursor stays behind; a webhook made
        # or reactivated later skips the events from before it, see _deliveries).
        db.session.rollback()
        return False
    cursor = db.session.execute(select(WebhookCursor.last_event_id).where(WebhookCursor.name == CURSOR)).scalar()
    db.session.rollback()
    return cursor is None or events.latest() != cursor


def _active_hooks() -> list[tuple[str, list[str], str]]:
    """(id, patterns, since when active as the log writes times) of the active webhooks."""
    rows = db.session.execute(select(Webhook.id, Webhook.events, Webhook.active_since).where(Webhook.active.is_(True)))
    return [(hook_id, patterns, db.isoformat(since)) for hook_id, patterns, since in rows]


def _one_batch() -> tuple[int, int, bool]:
    """Queue the deliveries of up to BATCH events; (deliveries queued, events read, cursor busy)."""
    if not _new_events():
        return 0, 0, False
    no_wait_for_disk()  # a lost pass is done again from the cursor, which is lost with it
    cursor = _lock_cursor()
    if cursor is None:
        db.session.rollback()
        return 0, 0, True
    batch = events.read(after=cursor, limit=BATCH)
    if not batch:
        latest = events.latest()
        if cursor > latest:  # the log was emptied or restored from an older backup: follow it
            db.session.execute(update(WebhookCursor).where(WebhookCursor.name == CURSOR).values(last_event_id=latest))
        db.session.commit()
        return 0, 0, False
    rows = _deliveries(batch) if get_config("webhooks")["active"] else []
    if rows:
        db.session.execute(insert(WebhookDelivery), rows)
    db.session.execute(update(WebhookCursor).where(WebhookCursor.name == CURSOR).values(last_event_id=batch[-1].id))
    db.session.commit()
    return len(rows), len(batch), False


def _deliveries(batch: list[events.Event]) -> list[dict[str, Any]]:
    hooks = _active_hooks()
    if not hooks:
        return []
    now = db.utcnow()
    rows = []
    for event in batch:
        # A webhook gets the events from its creation or reactivation on (same ISO text on both sides:
        # comparable as strings).
        wanted = [
            hook_id
            for hook_id, patterns, since in hooks
            if event.created_at >= since and matches_any(patterns, event.topic)
        ]
        if not wanted:
            continue
        body = body_text(event.id, event.topic, event.created_at, event.payload)
        rows += [
            {
                "id": db.new_id(),
                "webhook_id": hook_id,
                "event_id": event.id,
                "event": event.topic,
                "body": body,
                "status": PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for hook_id in wanted
        ]
    return rows


def dispatch() -> tuple[int, bool]:
    """Queue deliveries for every event after the cursor; (deliveries queued, cursor held elsewhere)."""
    queued = 0
    while True:
        created, read, busy = _one_batch()
        queued += created
        if busy or read < BATCH:
            return queued, busy
