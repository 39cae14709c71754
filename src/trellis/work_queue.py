"""Durable work queues kept in a table: claimed under a lease, retried with backoff, once across processes.

A queue table has an ``id``, ``attempts``, ``next_attempt_at`` and ``claim`` column. A row is due when the
caller's condition holds (its status says waiting) and ``next_attempt_at`` has passed. A claim moves a due
row's ``next_attempt_at`` one lease ahead, counts the attempt and sets a fresh ``claim`` token in one
``UPDATE … RETURNING``; on PostgreSQL the rows are picked ``FOR UPDATE SKIP LOCKED``, so the workers of
every process take different rows without waiting for each other; SQLite allows one writer at a time and a
process lock keeps this process's threads from queueing for it. The outcome is written only while the claim
token still matches. A worker that dies leaves its row claimed until the lease ends, then it is due again:
every row is worked at least once, by one worker at a time.

:class:`PollingWorker` runs such a queue's work in background threads (green under eventlet): woken by
:meth:`PollingWorker.wake` (e.g. once a transaction that queued work commits) and by a poll.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from trellis import db

log = logging.getLogger(__name__)

# ±10 % on every delay: rows that failed together (a provider's outage) are not retried in one burst.
JITTER = 0.1
WARN_EVERY_SECONDS = 60.0


class LeaseQueue:
    """Claims due rows of ``table`` (see the module docstring); ``waiting`` is the condition on the row's
    own columns that says it waits for work (e.g. ``status = 'queued'``)."""

    def __init__(self, table: sa.Table, waiting: sa.ColumnElement[bool], returning: Sequence[sa.Column]) -> None:
        self.table = table
        self._sqlite_lock = threading.Lock()
        due = sa.and_(waiting, table.c.next_attempt_at <= sa.bindparam("now"))
        pick = sa.select(table.c.id).where(due).order_by(table.c.next_attempt_at).limit(sa.bindparam("limit"))
        self._any_due = pick.limit(1)
        claim = (
            sa.update(table)
            .values(
                attempts=table.c.attempts + 1, next_attempt_at=sa.bindparam("lease_end"), claim=sa.bindparam("token")
            )
            .returning(*returning)
        )
        # A MATERIALIZED CTE, run once: as ``id IN (pick)`` PostgreSQL may rescan it for every row it updates
        # and take more rows than the limit (the webhooks queue met this).
        picked = pick.with_for_update(skip_locked=True).cte("picked").prefix_with("MATERIALIZED")
        self._claim_postgresql = claim.where(table.c.id == picked.c.id, due)
        self._claim_sqlite = claim.where(table.c.id.in_(pick), due)

    def claim(self, session: Session, limit: int, lease_seconds: float) -> list[Row]:
        """Claim up to ``limit`` due rows (oldest due first) and commit; returns the ``returning`` columns."""
        now = db.utcnow()
        values = {"now": now, "limit": limit, "lease_end": now + timedelta(seconds=lease_seconds), "token": db.new_id()}
        if db.is_postgresql(session.get_bind()):
            rows = session.execute(self._claim_postgresql, values).all()
            session.commit()
            return rows
        # An idle poll only reads: on SQLite a write statement takes the one write lock even when it changes
        # nothing, and a request that had read before writing would then fail at once.
        nothing_due = session.execute(self._any_due, values).first() is None
        session.rollback()
        if nothing_due:
            return []
        with self._sqlite_lock:
            rows = session.execute(self._claim_sqlite, values).all()
            session.commit()
        return rows

    def settle(self, session: Session, row_id: str, claim: str, **values: Any) -> bool:
        """Write ``values`` on a row this worker still holds (its claim token matches) and release the claim;
        whether it was still held. The caller commits."""
        table = self.table
        done = session.execute(
            sa.update(table).where(table.c.id == row_id, table.c.claim == claim).values(claim=None, **values)
        )
        return bool(done.rowcount)


def retry_at(schedule: Sequence[float], attempts: int) -> datetime | None:
    """When a row that failed its ``attempts``-th attempt is tried again (the schedule's delay, ±10 %),
    or None when the schedule is used up (``len(schedule) + 1`` attempts in all)."""
    if attempts > len(schedule):
        return None
    delay = schedule[attempts - 1] * random.uniform(1 - JITTER, 1 + JITTER)
    return db.utcnow() + timedelta(seconds=delay)


class ThrottledWarning:
    """Logs a failing loop's error at most once a minute (a database outage must not flood the log)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._at = -WARN_EVERY_SECONDS

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._at >= WARN_EVERY_SECONDS:
            self._at = now
            log.warning("%s failed; trying again (warned once a minute)", self.what, exc_info=True)


class PollingWorker:
    """``threads`` background threads, each running ``step()`` in an app context until it reports no work
    done, then waiting for :meth:`wake` or ``poll_seconds``. A step that raises is logged (throttled) and
    tried again on the next poll. A wake rouses one waiting thread (work queued once wants one worker; all
    of them would each run a claim that finds nothing)."""

    def __init__(
        self, app: Flask, name: str, step: Callable[[], bool], *, threads: int = 1, poll_seconds: float = 1.0
    ) -> None:
        self.app = app
        self.name = name
        self.step = step
        self.threads = threads
        self.poll_seconds = poll_seconds
        self._wakes = threading.Semaphore(0)
        self._stopped = False
        self._warn = ThrottledWarning(name)

    def start(self) -> None:
        for n in range(self.threads):
            threading.Thread(target=self._loop, name=f"{self.name}-{n}", daemon=True).start()

    def wake(self) -> None:
        self._wakes.release()

    def stop(self) -> None:
        """End the threads after their current step (an app being discarded, e.g. in tests)."""
        self._stopped = True
        self._wakes.release(self.threads)

    def _loop(self) -> None:
        while not self._stopped:
            worked = False
            try:
                with self.app.app_context():
                    worked = self.step()
            except Exception:
                self._warn()
            if not worked:
                self._wakes.acquire(timeout=self.poll_seconds)
