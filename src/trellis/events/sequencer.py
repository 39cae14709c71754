r"""The sequencer: numbers committed events contiguously, in commit order.

``id`` is the insert order, but PostgreSQL transactions commit in another order, so a reader that
followed ``id`` could skip a row that commits late. On PostgreSQL an event is therefore recorded in
``core_events_pending``; after a commit that recorded events, a background thread of the process is poked:
under ``pg_advisory_xact_lock`` it moves the committed pending rows into ``core_events``, numbered in ``id``
order from ``max(event_id)+1``, and publishes them. ``event_id``\ s are therefore contiguous and in commit
order. A pass every second and one at start-up number anything a crashed process left. SQLite has one
writer, so commit order is insert order: there the row is numbered by its INSERT (``recording``) and a pass
only publishes what committed since the last one.

Why not let readers wait for a transaction horizon instead (the write draws its number itself, no pass):
ordered by ``(xid, id)`` behind ``pg_snapshot_xmin``, two updates of one document can come out in the
wrong order (an update takes its xid before it waits for the row lock, so the one that waited may hold
the lower xid); ordered by ``id``, a gap is known to stay empty only once every transaction that could
still fill it has ended, and a transaction whose first write is the event row draws its number before it
has an xid, so no horizon covers it. What the pass costs a write is small
(``bench/results/event_log.md#sequencer-pass-cost``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import sqlalchemy as sa

from .. import statements
from .reading import BATCH, LogReader
from .records import Numbered, numbered_from_row

log = logging.getLogger("trellis.events")
SEQUENCER_LOCK = 0x7472656C6C6973  # "trellis": the advisory lock of the sequencer (PostgreSQL)
PERIOD_SECONDS = 1.0  # sequencer pass and receiver poll, whether poked or not
# A poke waits this long before its pass, so the commits of a burst share one numbering transaction
# rather than paying a pass each. Under a steady load (the last pass numbered BUSY_BATCH events or more)
# it waits longer, for fewer, larger passes; a lone write still waits COALESCE_SECONDS only
# (``bench/results/event_log.md#sequencer-coalescing``).
COALESCE_SECONDS = 0.005
COALESCE_BUSY_SECONDS = 0.02
BUSY_BATCH = 4

# PostgreSQL: one round trip takes the sequencer's lock (waiting for another process's pass, if any), then
# moves a batch of committed pending rows into the log, numbered, and returns it. The lock and the move are
# two statements of one simple query (``statements.preceded_by``): they run as one implicit transaction,
# which holds the transaction-scoped lock until the move is done, and the move reads with its own snapshot,
# taken once the lock was granted, so it sees every number committed before. Rows are moved rather than
# numbered in place, the move is prepared once per connection, and it runs on the driver's cursor
# (``statements.execute_compiled``): each cheaper than its alternative
# (``bench/results/event_log.md#sequencer-round-trip``).
# The move is planned with sequential scans off: both tables are planned while nearly empty (at start, or
# before autovacuum's next analyze), and a sequential scan of the pending table then reads every row the
# passes deleted since its last vacuum, and one of the log every row it holds, at each pass; their indexes
# reach the few rows a pass wants whatever the tables hold (``bench/results/event_log.md#stale-plans``).
# The batch's ids are one array, probed in the primary key: as ``id IN (subquery)``, a plan made while the
# table was empty (a vacuum had just truncated it) joined each pending row to the whole batch, and a pass
# over 45,000 pending rows took seconds of CPU (``bench/results/event_log.md#dead-pending-rows``).
_NUMBER = sa.text(
    """
    WITH moved AS (
        DELETE FROM core_events_pending
        WHERE id = ANY(ARRAY(SELECT id FROM core_events_pending ORDER BY id LIMIT :batch))
        RETURNING id, topic, family, payload, created_at
    )
    INSERT INTO core_events (id, event_id, topic, family, payload, created_at)
    SELECT id, (SELECT coalesce(max(event_id), 0) FROM core_events) + row_number() OVER (ORDER BY id),
        topic, family, payload, created_at
    FROM moved
    RETURNING event_id, topic, family, payload, created_at
"""
).execution_options(
    **statements.preceded_by(f"SET LOCAL enable_seqscan = off; SELECT pg_advisory_xact_lock({SEQUENCER_LOCK})")
)
_COMPILED: dict[Any, Any] = {}  # execute_compiled's form of _NUMBER

# Every row a pass moves stays in the pending table as a dead one until a vacuum, and whatever reads the
# table whole (the live tails' ``events.recorded``, which has no index to use there) reads them all: after a
# bulk load of 50,000 documents, 1,800 pages at each read for as long as autovacuum waits, which it did for
# a whole minute's run (``bench/results/event_log.md#dead-pending-rows``). So once this many rows have moved
# since the last one, the pass that drains the table vacuums it; SKIP_LOCKED leaves it to a vacuum at work.
VACUUM_AFTER_ROWS = 5000
_VACUUM = "VACUUM (SKIP_LOCKED) core_events_pending"


class Sequencer:
    """Numbers one app's committed events (PostgreSQL) or finds what its writers numbered (SQLite)."""

    def __init__(self, engine: sa.Engine, postgresql: bool, reader: LogReader) -> None:
        self.engine = engine  # the reads' engine: its autocommit pool sends no BEGIN around a pass
        self.postgresql = postgresql
        self.reader = reader
        self._sequenced: int | None = None  # SQLite: the last event_id a pass has published
        self._moved = 0  # PostgreSQL: rows moved since the last vacuum of the pending table
        self._vacuuming: threading.Thread | None = None

    def sequence(self) -> list[Numbered]:
        """Number the committed pending rows (locked passes); returns them, ascending."""
        if not self.postgresql:
            return self._numbered_since_last_pass()
        numbered: list[Numbered] = []
        while True:
            batch = self._number()
            numbered += batch
            self._moved += len(batch)
            if len(batch) < BATCH:
                break
        if self._moved >= VACUUM_AFTER_ROWS and (self._vacuuming is None or not self._vacuuming.is_alive()):
            self._moved = 0
            # On a thread of its own: a vacuum retries the lock that truncates the table for up to 5 s while a
            # transaction holds rows of it, and numbering must not wait for that.
            self._vacuuming = threading.Thread(target=self._vacuum, daemon=True, name="trellis-vacuum-pending")
            self._vacuuming.start()
        return numbered

    def _vacuum(self) -> None:
        """Vacuum the pending table (outside a transaction, as VACUUM must be); a failure only leaves it to
        autovacuum. A role that does not own the table gets PostgreSQL's warning, not an error."""
        try:
            with self.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(_VACUUM)
        except Exception as exc:  # on a thread of its own: anything uncaught would end in a bare traceback
            cause = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc  # e.g. no free connection in time
            log.warning("vacuum of the pending events failed (%s); autovacuum will", type(cause).__name__)

    def _numbered_since_last_pass(self) -> list[Numbered]:
        """SQLite: events are numbered as inserted; a pass hands on what committed since the last one."""
        if self._sequenced is None:
            self._sequenced = self.reader.latest()
            return []
        if self._sequenced > self.reader.latest():  # the table went back (see Receiver.catch_up)
            self._sequenced = 0
        found: list[Numbered] = []
        while batch := self.reader.read_numbered(self._sequenced, limit=BATCH):
            found += batch
            self._sequenced = batch[-1].id
            if len(batch) < BATCH:
                break
        return found

    def _number(self) -> list[Numbered]:
        """One round trip (``_NUMBER``): move up to BATCH committed pending rows into the log, numbered from
        max(event_id)+1 in id order, under the sequencer's lock. On the reads' autocommit pool no BEGIN or
        COMMIT travels around it (``begin`` sends nothing there; on a pool that is not in autocommit it
        commits the pass)."""
        with self.engine.begin() as connection:
            rows = statements.execute_compiled(connection, _NUMBER, {"batch": BATCH}, _COMPILED)
        return sorted((numbered_from_row(row) for row in rows), key=lambda event: event.id)
