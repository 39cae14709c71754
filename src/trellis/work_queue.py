"""Durable work queues kept in a table: claimed under a lease, retried with backoff, once across processes.

A queue table has an ``id``, ``attempts``, ``next_attempt_at`` and ``claim`` column. A row is due when the
caller's condition holds (its status says waiting) and ``next_attempt_at`` has passed. A claim moves a due
row's ``next_attempt_at`` one lease ahead, counts the attempt and sets a fresh ``claim`` token in one
``UPDATE … RETURNING``; on PostgreSQL the rows are picked ``FOR UPDATE SKIP LOCKED``, so the workers of
every process take different rows without waiting for each other; SQLite allows one writer at a time and a
process lock keeps this process's threads from queueing for it. The outcome is written only while the claim
token still matches. A worker that dies leaves its row claimed until the lease ends, then it is due again:
every row is worked at least once, by one worker at a time.

``trellis.background.PollingWorker`` runs such a queue's work in background threads (green under eventlet):
woken by its ``wake`` (e.g. once a transaction that queued work commits) and by a poll.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session, scoped_session

from trellis import db
from trellis.settings import COUNT, SECONDS, SECONDS_LIST, Setting

# ±10 % on every delay: rows that failed together (a provider's outage) are not retried in one burst.
JITTER = 0.1


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

    def claim(self, session: Session | scoped_session[Session], limit: int, lease_seconds: float) -> Sequence[Row[Any]]:
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

    def settle(self, session: Session | scoped_session[Session], row_id: str, claim: str, **values: Any) -> bool:
        """Write ``values`` on a row this worker still holds (its claim token matches) and release the claim;
        whether it was still held. The caller commits."""
        table = self.table
        done = session.execute(
            sa.update(table).where(table.c.id == row_id, table.c.claim == claim).values(claim=None, **values)
        )
        return bool(db.rowcount(done))


def retry_at(schedule: Sequence[float], attempts: int) -> datetime | None:
    """When a row that failed its ``attempts``-th attempt is tried again (the schedule's delay, ±10 %),
    or None when the schedule is used up (``len(schedule) + 1`` attempts in all)."""
    if attempts > len(schedule):
        return None
    delay = schedule[attempts - 1] * random.uniform(1 - JITTER, 1 + JITTER)
    return db.utcnow() + timedelta(seconds=delay)


@dataclass(frozen=True)
class QueueSettings:
    """A durable queue's process settings: they shape each process's workers (not per-deployment config),
    and tests shorten them. A module declares them as ``TRELLIS_<PREFIX>_RETRY_SECONDS``,
    ``_LEASE_SECONDS``, ``_SENDERS`` and ``_POLL_SECONDS`` (:meth:`declare`) and reads them back at start
    (:meth:`read`)."""

    retry_seconds: tuple[float, ...]  # the delays before each retry: len + 1 attempts in all
    lease_seconds: float  # how long a claim holds a row before another worker may take it
    senders: int  # rows in flight at once per process
    poll_seconds: float  # how often idle workers look for due rows

    @property
    def max_attempts(self) -> int:
        return len(self.retry_seconds) + 1

    def declare(self, prefix: str, *, retry: str, lease: str, senders: str, poll: str) -> tuple[Setting, ...]:
        """The four settings under ``prefix``, these values as defaults, with their descriptions."""
        kinds = {"retry_seconds": SECONDS_LIST, "lease_seconds": SECONDS, "senders": COUNT, "poll_seconds": SECONDS}
        described = {"retry_seconds": retry, "lease_seconds": lease, "senders": senders, "poll_seconds": poll}
        return tuple(
            Setting(f"{prefix}_{f.name.upper()}", kinds[f.name], getattr(self, f.name), described[f.name])
            for f in fields(self)
        )

    def read(self, config: Any, prefix: str) -> Self:
        """These settings as the app's config has them (``app.config``, read and checked at start)."""
        return replace(self, **{f.name: config[f"{prefix}_{f.name.upper()}"] for f in fields(self)})
