"""After-triggers: durable runs queued in the transaction of the write they follow.

A run is a row of ``functions_jobs`` inserted with the write (a rolled-back write queues nothing), claimed
by some process's runners through the core's lease queue (``trellis.work_queue``: ``SKIP LOCKED`` on
PostgreSQL, once across processes), run at least once: a process killed mid-run leaves its claim, which
ends after the lease, and another process runs it again (``ctx.attempt`` counts). One that raises is
retried after ``TRELLIS_FUNCTIONS_RETRY_SECONDS`` (10 s, 1 min, 10 min), then marked failed. The client's
answer never waits for them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Flask, current_app
from sqlalchemy import delete

from trellis import db, statements
from trellis.background import PollingWorker
from trellis.credentials import Identity
from trellis.errors import APIError
from trellis.work_queue import LeaseQueue, retry_at

from .api import Trigger
from .models import FAILED, QUEUED, FunctionJob
from .running import Ctx, actor_of, identity_for, invoke, user_of, write_log
from .settings import queue_settings
from .state import registry

log = logging.getLogger(__name__)

WORKER = "trellis_functions_worker"
_table = FunctionJob.__table__
QUEUE = LeaseQueue(
    _table,
    _table.c.status == QUEUED,
    [_table.c[name] for name in ("id", "trigger", "payload", "actor", "attempts", "claim")],
)


def queue_run(triggers: list[Trigger], payload: dict[str, Any], identity: Identity | None) -> None:
    """Queue a run of each of ``triggers`` in the current transaction (the caller commits)."""
    now = db.utcnow()
    body = json.dumps({**payload, "user": user_of(identity)})
    rows = [
        {
            "id": db.new_id(),
            "trigger": trigger.key,
            "payload": body,
            "actor": actor_of(identity),
            "user_id": identity.id if identity is not None and identity.kind == "user" else None,
            "status": QUEUED,
            "attempts": 0,
            "next_attempt_at": now,
            "claim": None,
            "last_error": None,
            "created_at": now,
        }
        for trigger in triggers
    ]
    statements.insert_rows(db.session.connection(), _table, rows)
    worker = current_app.extensions.get(WORKER)
    if worker is not None:  # this process's runners start on it once the write commits
        db.after_commit(worker.wake, key=worker)


def run_due(limit: int = 1) -> int:
    """Claim up to ``limit`` due runs and run each; how many were claimed."""
    settings = queue_settings(current_app)
    rows = QUEUE.claim(db.session, limit, settings.lease_seconds)
    for row in rows:
        error = _run(row)
        if error is None:
            db.session.execute(delete(_table).where(_table.c.id == row.id, _table.c.claim == row.claim))
        else:
            again = retry_at(settings.retry_seconds, row.attempts)
            values: dict[str, Any] = {"last_error": error}
            if again is None:
                values.update(status=FAILED, next_attempt_at=None)
                log.warning("after-trigger %s failed for good after %d attempts: %s", row.trigger, row.attempts, error)
            else:
                values["next_attempt_at"] = again
            QUEUE.settle(db.session, row.id, row.claim, **values)
        db.session.commit()
        write_log()
    return len(rows)


def _run(row: Any) -> str | None:
    """Run one claimed job in a transaction of its own; its error, or None."""
    trigger = registry().trigger(row.trigger)
    if trigger is None:
        return f"{row.trigger} is no longer defined"
    payload = json.loads(row.payload)
    ctx = Ctx(identity_for(row.actor, payload.get("user")), attempt=row.attempts)
    args = (payload["doc"], payload["previous"]) if trigger.event == "after_update" else (payload["doc"],)
    db.session.connection()  # a transaction: what the run wrote commits only if it ends well
    try:
        invoke(trigger.function, trigger.name, trigger.event, args, ctx)
    except APIError as exc:
        db.session.rollback()
        return exc.message
    db.session.commit()
    return None


def run_queued() -> int:
    """Run every due after-trigger now, in this thread (what the runners do; for tests); how many."""
    total = 0
    while count := run_due(10):
        total += count
    return total


def start(app: Flask) -> None:
    """``Module.background``: this process's after-trigger runners."""
    settings = queue_settings(app)
    worker = PollingWorker(
        app, "functions-runners", lambda: run_due(1) > 0, threads=settings.senders, poll_seconds=settings.poll_seconds,
        logger=log,
    )  # fmt: skip
    app.extensions[WORKER] = worker
    worker.start()
