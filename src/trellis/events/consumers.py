"""Durable consumers: a named cursor over the log that a consumer moves in the same transaction as its
work, so an event is handled once, whichever process gets there first, and a restart resumes where the
last commit left it. See ``docs/modules.md`` ("A durable consumer")."""

from __future__ import annotations

import sqlalchemy as sa

from .. import db
from ..models import EventConsumer

_consumers = EventConsumer.__table__


class Consumer:
    """A named cursor over the log (a row of ``core_event_consumers``) that a consumer moves in the same
    transaction as its work (``db.session``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._where = _consumers.c.name == name
        self._move = _consumers.update().where(self._where).values(last_event_id=sa.bindparam("to"))

    def position(self) -> int | None:
        """The last event handled, read without a lock (None: the consumer has never run)."""
        return db.session.execute(sa.select(_consumers.c.last_event_id).where(self._where)).scalar()

    def lock(self) -> int | None:
        """Lock the cursor in the session's transaction and return its position, or None when another
        process holds it (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: a write, which takes the one write
        lock). A consumer's first lock creates it at 0: from the start of what the log keeps."""
        if db.is_postgresql():
            locked = sa.select(_consumers.c.last_event_id).where(self._where).with_for_update(skip_locked=True)
            found = db.session.execute(locked).scalar_one_or_none()
            if found is not None:
                return found
            if self.position() is not None:
                return None  # locked by another process
        else:
            touch = _consumers.update().where(self._where).values(last_event_id=_consumers.c.last_event_id)
            if db.rowcount(db.session.execute(touch)):
                return self.position()
        try:
            db.session.execute(_consumers.insert().values(name=self.name, last_event_id=0))
        except sa.exc.IntegrityError:  # another process created it first: the transaction is rolled back
            db.session.rollback()
            return None
        return 0

    def advance(self, to: int) -> None:
        """Move the locked cursor to ``to`` (the last event handled) in the session's transaction."""
        db.session.execute(self._move, {"to": to})


def consumer(name: str) -> Consumer:
    """The durable cursor ``name`` (see :class:`Consumer`)."""
    return Consumer(name)
