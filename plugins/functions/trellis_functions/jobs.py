"""After-triggers: durable runs queued in the transaction of the write they follow.

A run is a row of ``functions_jobs`` inserted with the write (a rolled-back write queues nothing): in its
transaction (:func:`queue_run`), or, for PostgreSQL's single-statement writes, by that statement itself
(:class:`StatementRuns`: the write keeps its one round trip). Claimed
by some process's runners through the core's lease queue (``trellis.work_queue``: ``SKIP LOCKED`` on
PostgreSQL, once across processes), run at least once: a process killed mid-run leaves its claim, which
ends after the lease, and another process runs it again (``ctx.attempt`` counts). One that raises is
retried after ``TRELLIS_FUNCTIONS_RETRY_SECONDS`` (10 s, 1 min, 10 min), then marked failed. The client's
answer never waits for them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import queue
import time
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.dialects.postgresql import ARRAY

from trellis import db, reads, statements
from trellis.background import PollingWorker
from trellis.credentials import Identity
from trellis.errors import APIError
from trellis.work_queue import LeaseQueue, retry_at

from .api import Trigger
from .models import FAILED, QUEUED, FunctionJob
from .running import Ctx, actor_of, identity_for, insert_entries, invoke, take_entries, user_of
from .settings import queue_settings
from .state import registry

log = logging.getLogger(__name__)

RUNNERS = "trellis_functions_runners"
BATCH = 8  # due runs a runner claims at once (one transaction for the claim)
HANDED = 32  # handed runs a runner takes in a batch: those that end well end in one statement
BATCH_SECONDS = 0.05  # a batch takes no more runs once it has run this long
_table = FunctionJob.__table__
# One run's row in, and out once it ran: built once, run on the driver's cursor (``statements.execute_compiled``).
_INSERT = sa.insert(_table).values({column.name: sa.bindparam(column.name, type_=column.type) for column in _table.c})
_DONE = sa.delete(_table).where(_table.c.id == sa.bindparam("id"), _table.c.claim == sa.bindparam("claim"))
# PostgreSQL: runs that ended well and touched nothing else: their rows out and their log entries in, one
# statement for the lot (column arrays, unnested side by side).
_DONE_AND_LOGGED = sa.text(
    "WITH done AS (DELETE FROM functions_jobs USING unnest(CAST(:jobs AS text[]), CAST(:claims AS text[])) "
    "AS ended(id, claim) WHERE functions_jobs.id = ended.id AND functions_jobs.claim = ended.claim) "
    "INSERT INTO functions_log (id, function, kind, status, duration_ms, message, attempt, request_id, created_at) "
    "SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:functions AS text[]), CAST(:kinds AS text[]), "
    "CAST(:statuses AS text[]), CAST(:durations AS integer[]), CAST(:messages AS text[]), "
    "CAST(:attempts AS integer[]), CAST(:request_ids AS text[]), CAST(:created AS timestamptz[]))"
)
_LOGGED_AS = {"ids": "id", "functions": "function", "kinds": "kind", "statuses": "status",
              "durations": "duration_ms", "messages": "message", "attempts": "attempt", "request_ids": "request_id",
              "created": "created_at"}  # fmt: skip
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


class _Queuing:
    """What the runs of one write share: who wrote, and whether this process's runners take them (they are
    then inserted already claimed by it and handed over once the write commits: no claim to make afterwards,
    one transaction fewer per run; if it dies first, the claim ends after the lease and another process runs
    them)."""

    def __init__(self, triggers: list[Trigger], identity: Identity | None) -> None:
        self.now = db.utcnow()
        self.runners: Runners | None = current_app.extensions.get(RUNNERS)
        self.claim = db.new_id() if self.runners is not None else None
        self.due = self.now + timedelta(seconds=queue_settings(current_app).lease_seconds) if self.claim else self.now
        self.actor = actor_of(identity)
        self.user_id = identity.id if identity is not None and identity.kind == "user" else None
        self.head = '{"user":' + json.dumps(user_of(identity)) + ","  # a payload: this, then the change's keys
        attempts = 1 if self.claim else 0
        self.runs = [
            Claimed(db.new_id(), trigger.key, "", self.actor, attempts, self.claim or "") for trigger in triggers
        ]

    def hand(self, payload: str, committed: bool) -> None:
        if self.runners is None:
            return
        runs = [dataclasses.replace(run, payload=payload) for run in self.runs]
        if committed:
            self.runners.hand(runs)
        else:
            db.after_commit(functools.partial(self.runners.hand, runs))


def queue_run(triggers: list[Trigger], change: dict[str, Any], identity: Identity | None) -> None:
    """Queue a run of each of ``triggers`` in the current transaction (the caller commits); ``change``:
    ``{"document": …, "previous": …}``."""
    queuing = _Queuing(triggers, identity)
    payload = queuing.head + json.dumps(change)[1:]
    connection = db.session.connection()
    for run in queuing.runs:
        row = {
            "id": run.id,
            "trigger": run.trigger,
            "payload": payload,
            "actor": queuing.actor,
            "user_id": queuing.user_id,
            "status": QUEUED,
            "attempts": run.attempts,
            "next_attempt_at": queuing.due,
            "claim": queuing.claim,
            "last_error": None,
            "created_at": queuing.now,
        }
        statements.execute_compiled(connection, _INSERT, row, _COMPILED)
    queuing.hand(payload, committed=False)


def _runs_by(rows: sa.CTE, change: sa.ColumnElement[str]) -> sa.CTE:
    """One run's row per trigger (the arrays ``run_ids`` and ``run_triggers``, unnested side by side) for
    each row of ``rows``; the payload is ``run_head`` spliced before the change's keys."""
    text_array = ARRAY(sa.Text)
    values = sa.select(
        sa.func.unnest(sa.bindparam("run_ids", type_=text_array)),
        sa.func.unnest(sa.bindparam("run_triggers", type_=text_array)),
        # Typed in the SQL: a prepared statement cannot tell a parameter's type from concatenation.
        sa.cast(sa.bindparam("run_head", type_=sa.Text), sa.Text).concat(
            sa.func.substr(change, sa.literal_column("2"))
        ),
        sa.bindparam("run_actor", type_=sa.Text),
        sa.bindparam("run_user_id", type_=sa.Text),
        sa.literal(QUEUED),
        sa.bindparam("run_attempts", type_=sa.Integer),
        sa.bindparam("run_due", type_=_table.c.next_attempt_at.type),
        sa.bindparam("run_claim", type_=sa.Text),
        sa.bindparam("run_created_at", type_=_table.c.created_at.type),
    ).select_from(rows)
    columns = ["id", "trigger", "payload", "actor", "user_id", "status", "attempts", "next_attempt_at", "claim"]
    return sa.insert(_table).from_select([*columns, "created_at"], values).cte(f"{rows.name}_runs")


class StatementRuns:
    """:class:`trellis.triggers.Queued`: the runs of ``triggers`` inserted by the write's own statement."""

    key: Hashable = "functions-runs"  # the statement is the same whatever the triggers (arrays of them)

    def __init__(self, triggers: list[Trigger], identity: Identity | None) -> None:
        self._queuing = queuing = _Queuing(triggers, identity)
        self.parameters: dict[str, Any] = {
            "run_ids": [run.id for run in queuing.runs],
            "run_triggers": [run.trigger for run in queuing.runs],
            "run_head": queuing.head,
            "run_actor": queuing.actor,
            "run_user_id": queuing.user_id,
            "run_attempts": queuing.runs[0].attempts,
            "run_due": queuing.due,
            "run_claim": queuing.claim,
            "run_created_at": queuing.now,
        }

    def part(self, rows: sa.CTE, change: sa.ColumnElement[str]) -> sa.CTE:
        return _runs_by(rows, change)

    def written(self, change: str, alone: bool) -> None:
        self._queuing.hand(self._queuing.head + change[1:], committed=alone)


def run_due(limit: int = 1) -> int:
    """Claim up to ``limit`` due runs and run each; how many were claimed."""
    rows = QUEUE.claim(db.session, limit, queue_settings(current_app).lease_seconds)
    finish([Claimed(row.id, row.trigger, row.payload, row.actor, row.attempts, row.claim) for row in rows])
    return len(rows)


def finish(runs: Iterable[Claimed]) -> None:
    """Run claimed jobs one after another. What a run wrote, the end of its job and its log entry commit
    together; after a failure, the retry (or the failure for good) and the log entry. On PostgreSQL the
    runs that ended well having read and written nothing through the session end together, in one statement
    that commits alone (one round trip for them all, where each took BEGIN, two statements and COMMIT)."""
    ended: list[tuple[Claimed, dict[str, Any]]] = []
    for run in runs:
        error = _run(run)
        entries = take_entries()
        if error is None and db.is_postgresql() and len(entries) == 1 and not db.in_transaction():
            ended.append((run, entries[0]))  # it used no ctx.db (which opens the session's transaction)
        else:
            _settle(run, error, entries)
    if ended:
        columns = {"jobs": [run.id for run, _ in ended], "claims": [run.claim for run, _ in ended]}
        columns.update({name: [entry[key] for _, entry in ended] for name, key in _LOGGED_AS.items()})
        statements.execute_compiled(reads.connection(), _DONE_AND_LOGGED, columns, _COMPILED)


def _settle(run: Claimed, error: str | None, entries: list[dict[str, Any]]) -> None:
    """End one run in the session's transaction: its job done, or due again (failed for good after its last
    attempt), with its log entries."""
    if error is None:
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


def _run(run: Claimed) -> str | None:
    """Run one job; its error, or None. What it writes through ``ctx.db`` is in the session's transaction,
    left open for :func:`finish` to commit with the job's end, or to roll back."""
    trigger = registry().trigger(run.trigger)
    if trigger is None:
        return f"{run.trigger} is no longer defined"
    payload = json.loads(run.payload)
    ctx = Ctx(identity_for(run.actor, payload.get("user")), attempt=run.attempts)
    document = payload["document"] if "document" in payload else payload["doc"]  # "doc": queued by an earlier release
    args = (document, payload.get("previous")) if trigger.event == "after_update" else (document,)
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
        self._roused = False  # a runner was woken for handed runs and has not looked yet
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
        if not self._roused:  # one wake until a runner takes them: the runs handed meanwhile join its batch
            self._roused = True
            self.worker.wake()

    def _step(self) -> bool:
        self._roused = False  # before the queue is read: a run handed from now on wakes a runner again
        first = self._take()
        if first is None:
            return self._claim()
        try:
            finish(self._batch(first))
        except Exception:
            db.session.rollback()  # its claim ends after the lease: another runner (or process) runs it again
            raise
        return True

    def _take(self) -> Claimed | None:
        try:
            return self._handed.get_nowait()
        except queue.Empty:
            return None

    def _batch(self, first: Claimed) -> Iterator[Claimed]:
        """``first``, then the runs handed over while the batch is young (HANDED at most, for BATCH_SECONDS):
        under load many end in one statement, and none waits long behind a slow one."""
        yield first
        until = time.monotonic() + BATCH_SECONDS
        for _ in range(HANDED - 1):
            run = self._take() if time.monotonic() < until else None
            if run is None:
                return
            yield run


def start(app: Flask) -> None:
    """``Module.background``: this process's after-trigger runners."""
    runners = app.extensions[RUNNERS] = Runners(app)
    runners.worker.start()
