"""Retention: the log keeps what a reconnecting client or a replay may still ask for. Every minute one
process deletes the events that are both older than ``TRELLIS_EVENTS_RETENTION_SECONDS`` (600) and not
among the last ``TRELLIS_EVENTS_RETENTION_COUNT`` (10,000) of their family."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import sqlalchemy as sa

from .. import db
from ..models import EventRecord
from .sequencer import SEQUENCER_LOCK

RETENTION_LOCK = SEQUENCER_LOCK + 1
RETENTION_PERIOD_SECONDS = 60.0

_table = EventRecord.__table__
_TAKE_SQLITE_WRITE_LOCK = sa.text("DELETE FROM core_events WHERE 0")


class Retention:
    """Prunes one app's log."""

    def __init__(self, engine: sa.Engine, read_engine: sa.Engine, seconds: float, count: int) -> None:
        self.engine = engine
        self.read_engine = read_engine
        self.postgresql = engine.dialect.name == "postgresql"
        self.seconds = seconds
        self.count = count

    def prune(self) -> int:
        """Delete events older than the retention time and not among the last N of their family."""
        cutoff = db.utcnow() - timedelta(seconds=self.seconds)
        deleted = 0
        with self.read_engine.connect() as connection:  # most passes find nothing: then take no lock
            if not connection.execute(sa.select(_table.c.id).where(_table.c.created_at < cutoff).limit(1)).first():
                return 0
        with self._locked(RETENTION_LOCK) as connection:
            if connection is None:
                return 0  # another process is pruning
            families = connection.execute(sa.select(_table.c.family).distinct()).scalars().all()
            for family in families:
                keep_from = connection.execute(
                    sa.select(_table.c.event_id)
                    .where(_table.c.family == family)
                    .order_by(_table.c.event_id.desc())
                    .offset(max(self.count - 1, 0))
                    .limit(1)
                ).scalar()
                if keep_from is None:
                    continue
                deleted += connection.execute(
                    _table.delete().where(
                        _table.c.family == family,
                        _table.c.event_id < keep_from,
                        _table.c.created_at < cutoff,
                    )
                ).rowcount
        return deleted

    @contextmanager
    def _locked(self, key: int) -> Iterator[sa.Connection | None]:
        """A short transaction holding the log's lock ``key`` (None: another process holds it).

        PostgreSQL: a transaction-scoped advisory lock. SQLite: the one write lock, taken by the first
        statement (a write that changes nothing); the engine's busy timeout waits for it.
        """
        with self.engine.begin() as connection:
            if not self.postgresql:
                connection.execute(_TAKE_SQLITE_WRITE_LOCK)
                yield connection
                return
            if connection.execute(sa.select(sa.func.pg_try_advisory_xact_lock(key))).scalar():
                yield connection
                return
        yield None
