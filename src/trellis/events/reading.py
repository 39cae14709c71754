"""Reading the log: numbered events after a position, the head and the tail of what is kept, and whether
a replay from a position loses nothing. Reads need no transaction: they go to the reads' engine (on
PostgreSQL an autocommit pool, which spares BEGIN and ROLLBACK)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from ..models import EventRecord
from .records import Event, Numbered, numbered_from_row

T = TypeVar("T")
BATCH = 1000  # rows numbered per pass and read per range query

_table = EventRecord.__table__
_COLUMNS = (_table.c.event_id, _table.c.topic, _table.c.family, _table.c.payload, _table.c.created_at)


class LogReader:
    """The reads of one app's log."""

    def __init__(self, engine: sa.Engine, retention_count: int) -> None:
        self.engine = engine
        self.retention_count = retention_count

    def read(self, after: int, family: str | tuple[str, ...] | None = None, limit: int = BATCH) -> list[Event]:
        return [numbered.event() for numbered in self.read_numbered(after, family, limit)]

    def read_numbered(
        self, after: int, family: str | tuple[str, ...] | None = None, limit: int = BATCH
    ) -> list[Numbered]:
        """The events after ``after`` (of ``family``), ascending, their payloads as stored."""
        query = sa.select(*_COLUMNS).where(_table.c.event_id > after)
        if isinstance(family, str):
            query = query.where(_table.c.family == family)
        elif family is not None:
            query = query.where(_table.c.family.in_(family))
        rows = self._read(lambda connection: connection.execute(query.order_by(_table.c.event_id).limit(limit)).all())
        return [numbered_from_row(row) for row in rows]

    def latest(self) -> int:
        return (
            self._read(lambda connection: connection.execute(sa.select(sa.func.max(_table.c.event_id))).scalar()) or 0
        )

    def oldest(self, family: str | None = None) -> int | None:
        query = sa.select(sa.func.min(_table.c.event_id))
        if family is not None:
            query = query.where(_table.c.family == family)
        return self._read(lambda connection: connection.execute(query).scalar())

    def _read(self, read: Callable[[sa.Connection], T]) -> T:
        """``read`` on a connection of the pool, once more when that connection was found dead (PostgreSQL
        restarted: SQLAlchemy then replaces the pool's older connections), as request reads do."""
        try:
            with self.engine.connect() as connection:
                return read(connection)
        except sa.exc.DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        with self.engine.connect() as connection:
            return read(connection)

    def complete_after(self, after: int, family: str) -> bool:
        """See :func:`trellis.events.complete_after`."""
        oldest = self.oldest(family)
        if oldest is None:
            return True
        if after < oldest and self._restored_at(oldest, family):
            return False  # the state was replaced by a restore after ``after``: the client must resync
        if after >= oldest - 1:
            return True
        # Fewer kept than the retention count: the family was never pruned.
        kept = sa.select(_table.c.id).where(_table.c.family == family).limit(self.retention_count).subquery()
        counted = self._read(
            lambda connection: connection.execute(sa.select(sa.func.count()).select_from(kept)).scalar_one()
        )
        return bool(counted < self.retention_count)

    def _restored_at(self, event_id: int, family: str) -> bool:
        """Whether ``event_id`` is a restore's marker: a row whose topic is its family (``trellis.backups``)."""
        query = sa.select(_table.c.topic).where(_table.c.event_id == event_id)
        return self._read(lambda connection: connection.execute(query).scalar()) == family
