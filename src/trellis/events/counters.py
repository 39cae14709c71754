"""Change numbers: a family's counter, bumped by every commit that records events of it, so that two reads
giving the same number saw the same committed events (a cache keyed by it needs no invalidation)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from .. import db
from ..models import EventCounter

_counters = EventCounter.__table__
# A family's change counter is striped over SLOTS rows; a PostgreSQL writer bumps the slot of its backend
# (pool connections have distinct pids), so 16 concurrent writers of one family seldom queue on one row lock.
SLOTS = 16
_SLOT: sa.ColumnClause[Any] = sa.literal_column(f"pg_backend_pid() % {SLOTS}")
# At the commit of a transaction that recorded events: every family's slot bumped in one statement, in
# family order (two transactions bumping the same slots of two families cannot wait on each other).
_BUMP = sa.text(
    f"""
    INSERT INTO core_event_counters (family, slot, changes)
    SELECT family, pg_backend_pid() % {SLOTS}, 1 FROM unnest(CAST(:families AS text[])) AS family ORDER BY family
    ON CONFLICT (family, slot) DO UPDATE SET changes = core_event_counters.changes + 1
    """
)
_BUMP_SQLITE = sa.text(  # one writer at a time: one slot
    "INSERT INTO core_event_counters (family, slot, changes) VALUES (:family, 0, 1) "
    "ON CONFLICT (family, slot) DO UPDATE SET changes = changes + 1"
)


class Counted:
    """The families a transaction recorded events of: their counters are bumped as it commits (the row
    locks are then held for the commit only, not for the rest of the transaction)."""

    def __init__(self) -> None:
        self.families: set[str] = set()

    def __call__(self) -> None:
        count_commit(db.session.connection(), sorted(self.families))


def count_commit(connection: sa.Connection, families: list[str]) -> None:
    """Bump the change counters of ``families`` in ``connection``'s transaction, which records events of
    them (see :func:`change_number`)."""
    if not families:
        return
    if connection.dialect.name == "postgresql":
        connection.execute(_BUMP, {"families": sorted(families)})
    else:
        connection.execute(_BUMP_SQLITE, [{"family": family} for family in sorted(families)])


def counted_by(family: str, rows: sa.CTE) -> sa.CTE:
    """PostgreSQL: the part of a write that is a single statement that bumps ``family``'s counter when its
    data-modifying CTE ``rows`` changed any row (the write commits alone: no commit hook runs)."""
    any_row = sa.exists(sa.select(sa.literal_column("1")).select_from(rows))
    bump = postgresql.insert(_counters).from_select(
        ["family", "slot", "changes"], sa.select(db.sql_text(family), _SLOT, sa.literal_column("1")).where(any_row)
    )
    bump = bump.on_conflict_do_update(
        index_elements=[_counters.c.family, _counters.c.slot],
        set_={"changes": _counters.c.changes + sa.literal_column("1")},
    )
    return bump.cte(f"{rows.name}_counted")


def change_number(family: str) -> sa.ColumnElement[int]:
    """A number, as an SQL expression, that grows with every commit that recorded an event of ``family``
    and never goes back: the sum of the family's counter rows (``core_event_counters``).

    Every commit that records events of a family bumps one of its counter rows by one, inside the
    transaction (:func:`count_commit` at commit; ``recorded_by`` in a write's own statement), so the
    bump is visible exactly when the events are. Counters only grow, retention never touches them, and a
    restore bumps every family (``trellis.backups.restore``). So two reads that give the same number saw
    the same committed events of the family, and a cache keyed by it (the Database module's list counts)
    needs no invalidation of its own.

    Counters rather than ``max(event_id)`` plus the unnumbered rows: that count walked the dead index
    entries numbering leaves behind, growing with the log; the sum reads at most ``SLOTS`` rows through
    the primary key, whatever the log's size. Each backend bumps its own slot because a single row would
    queue every writer of a family on its lock until the commit's WAL flush
    (``bench/results/event_log.md#change-counters``). ``family`` is made of validated names
    (``database.Item``); it is SQL text so that a statement built with it is compiled once."""
    total = sa.func.coalesce(sa.func.sum(_counters.c.changes), 0)
    return sa.select(sa.cast(total, sa.BigInteger)).where(_counters.c.family == db.sql_text(family)).scalar_subquery()
