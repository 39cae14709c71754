"""After-triggers: durable runs queued in the transaction of the write they follow.

A run is a row of ``functions_jobs`` inserted with the write (a rolled-back write queues nothing), claimed
by some process's runners through the core's lease queue (``trellis.work_queue``: ``SKIP LOCKED`` on
PostgreSQL, once across processes), run at least once: a process killed mid-run leaves its claim, which
ends after the lease, and another process runs it again (``ctx.attempt`` counts). One that raises is
retried after ``TRELLIS_FUNCTIONS_RETRY_SECONDS`` (10 s, 1 min, 10 min), then marked failed. The client's
answer never waits for them.
"""

from __future__ import annotations

import functools
import json
import logging
import queue
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app

from trellis import db, reads, statements
from trellis.background import PollingWorker
from trellis.credentials import Identity
from trellis.errors import APIError
from trellis.work_queue import LeaseQueue, retry_at

from .api import Trigger
from .models import FAILED, QUEUED, FunctionJob, FunctionLogEntry
from .running import Ctx, actor_of, identity_for, insert_entries, invoke, take_entries, user_of
from .settings import queue_settings
from .state import registry

log = logging.getLogger(__name__)

RUNNERS = "trellis_functions_runners"
BATCH = 8  # due runs claimed at once by a runner (one transaction for the claim)
_table = FunctionJob.__table__
# One run's row in, and out once it ran: built once, run on the driver's cursor (``statements.execute_compiled``).
_INSERT = sa.insert(_table).values({column.name: sa.bindparam(column.name, type_=column.type) for column in _table.c})
_DONE = sa.delete(_table).where(_table.c.id == sa.bindparam("id"), _table.c.claim == sa.bindparam("claim"))
# PostgreSQL: a run that ended well and touched nothing else: its row out and its log entry in, one statement.
_DONE_AND_LOGGED = sa.text(
    "WITH done AS (DELETE FROM functions_jobs WHERE id = :job AND claim = :claim) "
    "INSERT INTO functions_log (id, function, kind, status, duration_ms, message, attempt, request_id, created_at) "
    "VALUES (:id, :function, :kind, :status, :duration_ms, :message, :attempt, :request_id, :created_at)"
).bindparams(sa.bindparam("created_at", type_=FunctionLogEntry.__table__.c.created_at.type))
_COMPILED: dict[Any, Any] = {}
QUEUE = LeaseQueue(
    _table,
    _table.c.status == QUEUED,
    [_table.c[name] for name in ("id", "trigger", "payload", "actor", "attempts", "claim")],
)


@dataclass(frozen=True)
class Claimed:
    """A run this process holds (its claim token matches the row's)."""

    id: str
    trigger: str
    payload: str
    actor: str
    attempts: int
    claim: str


def queue_run(triggers: list[Trigger], payload: dict[str, Any], identity: Identity | None) -> None:
    """Queue a run of each of ``triggers`` in the current transaction (the caller commits). A process that
    runs after-triggers inserts them already claimed by itself and hands them to its runners once the write
    commits: no claim to make afterwards (one transaction fewer per run). If it dies first, the claim ends
    after the lease and another process runs them."""
    now = db.utcnow()
    body = json.dumps({**payload, "user": user_of(identity)})
    runners: Runners | None = current_app.extensions.get(RUNNERS)
    claim = db.new_id() if runners is not None else None
    lease_end = now + timedelta(seconds=queue_settings(current_app).lease_seconds)
    actor = actor_of(identity)
    runs = [Claimed(db.new_id(), trigger.key, body, actor, 1 if claim else 0, claim or "") for trigger in triggers]
    rows = [
        {
            "id": run.id,
            "trigger": run.trigger,
            "payload": body,
            "actor": actor,
            "user_id": identity.id if identity is not None and identity.kind == "user" else None,
            "status": QUEUED,
            "attempts": run.attempts,
            "next_attempt_at": lease_end if claim else now,
            "claim": claim,
            "last_error": None,
            "created_at": now,
        }
        for run in runs
    ]
    connection = db.session.connection()
    for row in rows:
        statements.execute_compiled(connection, _INSERT, row, _COMPILED)
    if runners is not None:
        db.after_commit(functools.partial(runners.hand, runs))


def run_due(limit: int = 1) -> int:
    """Claim up to ``limit`` due runs and run each; how many were claimed."""
    rows = QUEUE.claim(db.session, limit, queue_settings(current_app).lease_seconds)
    for row in rows:
        finish(Claimed(row.id, row.trigger, row.payload, row.actor, row.attempts, row.claim))
    return len(rows)


def finish(run: Claimed) -> None:
    """Run one claimed job. What it wrote, the end of the job and its log entry commit together; after a
    failure, the retry (or the failure for good) and the log entry."""
    error = _run(run)
    entries = take_entries()
    if error is None:
        if db.is_postgresql() and len(entries) == 1 and not _holds_a_connection():
            # The run read and wrote nothing through the session: its end and its entry are one statement
            # that commits alone (one round trip, where BEGIN, two statements and COMMIT were four).
            db.session.commit()
            statements.execute_compiled(
                reads.connection(), _DONE_AND_LOGGED, {**entries[0], "job": run.id, "claim": run.claim}, _COMPILED
            )
            return
        statements.execute_compiled(db.session.connection(), _DONE, {"id": run.id, "claim": run.claim}, _COMPILED)
    else:
        db.session.rollback()
        again = retry_at(queue_settings(current_app).retry_seconds, run.attempts)
        values: dict[str, Any] = {"last_error": error}
        if again is None:
            values.update(status=FAILED, next_attempt_at=None)
            log.warning("after-trigger %s failed for good after %d attempts: %s", run.trigger, run.attempts, error)
        else:
            values["next_attempt_at"] = again
        QUEUE.settle(db.session, run.id, run.claim, **values)
    insert_entries(entries)
    db.session.commit()


def _holds_a_connection() -> bool:
    """Whether the session's transaction has reached the database (SQLAlchemy keeps that in a private map)."""
    transaction = db.session().get_transaction()
    return transaction is not None and bool(getattr(transaction, "_connections", True))


def _run(run: Claimed) -> str | None:
    """Run one job in the session's transaction (left open when it ends well); its error, or None."""
    trigger = registry().trigger(run.trigger)
    if trigger is None:
        return f"{run.trigger} is no longer defined"
    payload = json.loads(run.payload)
    ctx = Ctx(identity_for(run.actor, payload.get("user")), attempt=run.attempts)
    args = (payload["doc"], payload["previous"]) if trigger.event == "after_update" else (payload["doc"],)
    if not db.session().in_transaction():
        db.session.begin()  # what the run writes commits only if it ends well (no round trip until it does)
    try:
        invoke(trigger.function, trigger.name, trigger.event, args, ctx)
    except APIError as exc:
        return exc.message
    return None


class Runners:
    """This process's after-trigger runners: the runs it queued itself (handed over at commit), then due
    runs claimed from the table (retries, another process's runs whose claim ended)."""

    def __init__(self, app: Flask) -> None:
        settings = queue_settings(app)
        self._handed: queue.SimpleQueue[Claimed] = queue.SimpleQueue()
        self._poll_seconds = settings.poll_seconds
        self._next_claim = 0.0  # monotonic time before which an empty table is not asked again
        self.worker = PollingWorker(
            app, "functions-runners", self._step, threads=settings.senders, poll_seconds=settings.poll_seconds,
            logger=log,
        )  # fmt: skip

    def _claim(self) -> bool:
        """Due runs from the table, at most once a poll while it has none: a runner that finished a handed
        run looks once more for work, and an empty claim each time was half of what a run cost."""
        now = time.monotonic()
        if now < self._next_claim:
            return False
        self._next_claim = now + self._poll_seconds
        found = run_due(BATCH) > 0
        if found:  # a backlog: the next look claims again at once
            self._next_claim = 0.0
        return found

    def hand(self, runs: list[Claimed]) -> None:
        for run in runs:
            self._handed.put(run)
        self.worker.wake()

    def _step(self) -> bool:
        try:
            run = self._handed.get_nowait()
        except queue.Empty:
            return self._claim()
        try:
            finish(run)
        except Exception:
            db.session.rollback()  # its claim ends after the lease: another runner (or process) runs it again
            raise
        return True


def start(app: Flask) -> None:
    """``Module.background``: this process's after-trigger runners."""
    runners = app.extensions[RUNNERS] = Runners(app)
    runners.worker.start()
