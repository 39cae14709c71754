r"""The event log: domain events recorded in the transaction of the change, numbered, fanned out.

A module calls :func:`record` where it writes (``database.Item.update``, ``authentication.user.block``);
the row commits with the change or not at all (a transactional outbox, table ``core_events``). A write
that is a single statement (the Database module's single-document writes on PostgreSQL) makes its event
rows part of that statement instead (:func:`recorded_by`, then :func:`written`): PostgreSQL runs a
statement atomically, so it commits alone, with no transaction around it. Every commit that records
events of a family also bumps that family's counter: the change number (:func:`change_number`).

Numbering (the *sequencer*): ``id`` is the insert order, but PostgreSQL transactions commit in another
order, so a reader that followed ``id`` could skip a row that commits late. On PostgreSQL an event is
therefore recorded in ``core_events_pending``; after a commit that recorded events, a background thread of
the process is poked: it takes ``pg_advisory_xact_lock``, moves the committed pending rows into
``core_events``, numbered in ``id`` order from ``max(event_id)+1``, and publishes them. ``event_id``\ s are
therefore contiguous and in commit order. A pass every second and one at start-up number anything a
crashed process left. SQLite has one writer, so commit order is insert order: there the row is numbered
by its INSERT (see ``_INSERT_NUMBERED``) and a pass only publishes what committed since the last one.

Why not let readers wait for a transaction horizon instead (the write draws its number itself, no pass):
ordered by ``(xid, id)`` behind ``pg_snapshot_xmin``, two updates of one document can come out in the
wrong order (an update takes its xid before it waits for the row lock, so the one that waited may hold
the lower xid); ordered by ``id``, a gap is known to stay empty only once every transaction that could
still fill it has ended, and a transaction whose first write is the event row draws its number before it
has an xid, so no horizon covers it. What the pass costs a write is small: ~48 µs of PostgreSQL with a pass
every 3 ms (2026-11-27), under the noise with one every 20 ms as a busy server runs it (pgbench, 5 rounds: 426
against 415 µs of machine CPU per update, 2026-11-28; ``bench/event_log_layout``).

Fan-out: the numbered batch is published on Redis (``TRELLIS_REDIS_URL``) or handed over in-process.
Each process has one receiver that delivers to its consumers (:func:`subscribe`) strictly in
``event_id`` order: a gap is read from the table, and a poll of ``max(event_id)`` every second catches a
lost last message (with Redis, one numbered before the previous poll: see :meth:`EventLog.poll`). A
delivered batch's socket writes go out together (``socket_fanout.gathered_writes``). Nothing holds a
database connection while idle.

Retention: every minute one process deletes the events that are both older than
``TRELLIS_EVENTS_RETENTION_SECONDS`` (600) and not among the last ``TRELLIS_EVENTS_RETENTION_COUNT``
(10,000) of their family.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.dialects import postgresql

from . import background, current, db, statements
from .models import EventConsumer, EventCounter, EventRecord, PendingEvent
from .modules import EventTopic, ModuleError, declared_topic
from .server.socket_fanout import gathered_writes
from .shared_redis import redis_client, redis_options

log = logging.getLogger(__name__)

_EXTENSION = "trellis_events"
SEQUENCER_LOCK = 0x7472656C6C6973  # "trellis": the advisory lock of the sequencer (PostgreSQL)
RETENTION_LOCK = SEQUENCER_LOCK + 1
PERIOD_SECONDS = 1.0  # sequencer pass and receiver poll
# A poke waits this long before its pass, so the commits of a burst share one numbering transaction
# (create at concurrency 16: one pass per commit cost ~400 µs of server CPU per write). Under a steady
# load (the last pass numbered BUSY_BATCH events or more) it waits longer, for fewer, larger passes: at
# ~1,500 updates/s the pass fell from 5.7% to 5.0% of the server's samples (py-spy, 2026-11-27; the
# throughput gain was under the machine's noise). A lone write still waits 5 ms only.
COALESCE_SECONDS = 0.005
COALESCE_BUSY_SECONDS = 0.02
BUSY_BATCH = 4
RETENTION_PERIOD_SECONDS = 60.0
BATCH = 1000  # rows numbered per pass and read per range query
LISTEN_RETRY_SECONDS = 1.0
# A batch that arrives before an earlier one (two processes number in turn and publish after their
# commits, in either order) waits this long for it before the gap is read from the table.
GAP_WAIT_SECONDS = 0.05
WAIT_FOR_STOP_SECONDS = 5.0

_table = EventRecord.__table__
_pending = PendingEvent.__table__
_VALUES = {
    "topic": sa.bindparam("topic"),
    "family": sa.bindparam("family"),
    "payload": sa.bindparam("payload"),
    "created_at": sa.bindparam("created_at", type_=_table.c.created_at.type),
}
_INSERT_PENDING = sa.insert(_pending).values(**_VALUES)
# SQLite has one writer, holding the lock from its first write to its commit: commit order is insert
# order, so an event is numbered as it is inserted (a rolled-back number is given again to the next one).
# A separate numbering transaction would hurt there: SQLite does not wait (no busy handler) when a
# transaction that has read tries to write while another connection holds the write lock, it fails.
_INSERT_NUMBERED = sa.insert(_table).values(
    **_VALUES, event_id=sa.select(sa.func.coalesce(sa.func.max(_table.c.event_id), 0) + 1).scalar_subquery()
)
_TAKE_SQLITE_WRITE_LOCK = sa.text("DELETE FROM core_events WHERE 0")
# PostgreSQL: one round trip takes the sequencer's lock (waiting for another process's pass, if any), then
# moves a batch of committed pending rows into the log, numbered, and returns it. The lock and the move are
# two statements of one simple query (``statements.preceded_by``): they run as one implicit transaction,
# which holds the transaction-scoped lock until the move is done, and the move reads with its own snapshot,
# taken once the lock was granted, so it sees every number committed before. Before, a pass took the lock
# in a transaction of its own (BEGIN, the lock, the UPDATE, COMMIT) and, finding it busy, slept 2 ms and
# tried again: half of the sequencer's CPU with two processes (py-spy, ``bench/live_bench.py``,
# 2026-11-26). Moving rows rather than numbering them in place (an UPDATE of each event row after its
# commit) gave PostgreSQL +35% creates/s (``bench/event_log_layout``). The move is prepared once per
# connection: planning it took 0.3 ms of a 0.5 ms pass of four events (``EXPLAIN (ANALYZE)``); per request
# the saving was under the peer benchmark's noise (2026-11-27 evening, ``bench/results/peer.md``). Run on
# the driver's cursor (``statements.execute_compiled``): through SQLAlchemy's execution layer a pass cost
# ~20 µs of server CPU per update at ~1,200 updates/s.
_NUMBER = sa.text(
    """
    WITH moved AS (
        DELETE FROM core_events_pending
        WHERE id IN (SELECT id FROM core_events_pending ORDER BY id LIMIT :batch)
        RETURNING id, topic, family, payload, created_at
    )
    INSERT INTO core_events (id, event_id, topic, family, payload, created_at)
    SELECT id, (SELECT coalesce(max(event_id), 0) FROM core_events) + row_number() OVER (ORDER BY id),
        topic, family, payload, created_at
    FROM moved
    RETURNING event_id, topic, family, payload, created_at
"""
).execution_options(**statements.preceded_by(f"SELECT pg_advisory_xact_lock({SEQUENCER_LOCK})"))
_COMPILED: dict[Any, Any] = {}  # execute_compiled's forms of the single-row INSERTs and of _NUMBER

_counters = EventCounter.__table__
# A family's change counter is striped over SLOTS rows; a PostgreSQL writer bumps the slot of its backend
# (pool connections have distinct pids), so 16 concurrent writers of one family seldom queue on one row lock.
SLOTS = 16
_SLOT = sa.literal_column(f"pg_backend_pid() % {SLOTS}")
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
_COLUMNS = (_table.c.event_id, _table.c.topic, _table.c.family, _table.c.payload, _table.c.created_at)


@dataclass(frozen=True)
class Event:
    """A numbered event. ``payload`` is shared by every consumer: read it, never change it."""

    id: int
    topic: str
    family: str
    payload: dict
    created_at: str


@dataclass(frozen=True)
class Numbered:
    """An event as the sequencer numbered it, its payload still the stored JSON text: a publication carries
    that text as it is. Decoding each payload only to encode it again for Redis was a quarter of the
    sequencer's CPU (py-spy of a create at 2,000/s, ``bench/results/peer.md``, 2026-11-26)."""

    id: int
    topic: str
    family: str
    payload: str
    created_at: str

    def event(self) -> Event:
        return Event(self.id, self.topic, self.family, json.loads(self.payload), self.created_at)

    def wire(self) -> str:
        """``[id, topic, family, payload, created_at]`` as JSON text (what :func:`_offer` decodes)."""
        # created_at is an ISO 8601 time (digits, "-", ":", ".", "T", "+"): nothing in it to escape.
        return f'[{self.id},{_json_text(self.topic)},{_json_text(self.family)},{self.payload},"{self.created_at}"]'


@functools.lru_cache(maxsize=1024)
def _json_text(value: str) -> str:
    """A topic's or a family's JSON text (the same few in every batch)."""
    return json.dumps(value, ensure_ascii=False)


def family_of(topic: str) -> str:
    """The first two segments: ``database.Item.update`` → ``database.Item``."""
    return ".".join(topic.split(".", 2)[:2])


# ---- recording ---------------------------------------------------------------------------------------


def record(topic: str, payload: dict | str) -> None:
    """Insert the event in the current ``db.session`` transaction (the caller commits).

    ``payload`` is a dict or its JSON text already made (serialised once, never re-encoded here).
    """
    record_many(topic, [payload])


def record_many(topic: str, payloads: list[dict | str]) -> None:
    """:func:`record` for several events of one topic: one statement (``/many`` writes 1,000 documents)."""
    log_ = _log()
    if not log_.enabled:
        return
    if log_.strict:
        log_.check_declared(topic)
    family, now = family_of(topic), db.utcnow()
    rows = [{"topic": topic, "family": family, "payload": _text(payload), "created_at": now} for payload in payloads]
    session = db.session
    connection = session.connection()
    postgresql = connection.dialect.name == "postgresql"
    if len(rows) == 1:  # one event per write (create, update): the DB-API cursor, SQL compiled once
        statements.execute_compiled(connection, _INSERT_PENDING if postgresql else _INSERT_NUMBERED, rows[0], _COMPILED)
    elif postgresql:  # a /many write: one statement (an unnest of column arrays)
        statements.insert_rows(connection, _pending, rows)
    else:
        connection.execute(_INSERT_NUMBERED, rows)
    db.before_commit(_Counted(), key=_Counted).families.add(family)
    db.after_commit(log_.poke, key=log_)  # one poke per commit, however many events it holds


class _Counted:
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


def recorded_by(topic: str, rows: sa.CTE, payload: sa.ColumnElement[str], alone: bool) -> list[sa.CTE]:
    """PostgreSQL: what a write that is a single statement adds to it to record ``topic`` once per row of
    ``rows`` (a data-modifying CTE of the write): the pending event rows (``payload``: the JSON text, an SQL
    expression over ``rows`` or a bound parameter; ``created_at`` the bound parameter ``now``) and, when the
    statement commits ``alone`` (autocommit), the bump of the family's counter. Nothing when the log is
    off. The caller runs the statement, then :func:`written`."""
    if not _log().enabled:
        return []
    family = family_of(topic)
    insert = sa.insert(_pending).from_select(
        ["topic", "family", "payload", "created_at"],
        sa.select(
            db.sql_text(topic), db.sql_text(family), payload, sa.bindparam("now", type_=_table.c.created_at.type)
        ).select_from(rows),
    )
    parts = [insert.cte(f"{rows.name}_event")]
    if alone:
        any_row = sa.exists(sa.select(sa.literal_column("1")).select_from(rows))
        bump = postgresql.insert(_counters).from_select(
            ["family", "slot", "changes"], sa.select(db.sql_text(family), _SLOT, sa.literal_column("1")).where(any_row)
        )
        bump = bump.on_conflict_do_update(
            index_elements=[_counters.c.family, _counters.c.slot],
            set_={"changes": _counters.c.changes + sa.literal_column("1")},
        )
        parts.append(bump.cte(f"{rows.name}_counted"))
    return parts


def written(topic: str, alone: bool) -> None:
    """After a statement built with :func:`recorded_by` ran: ``alone``, it has committed, so the sequencer
    numbers its event now; in the session's transaction, the family is counted and numbered at its commit."""
    log_ = _log()
    if not log_.enabled:
        return
    if log_.strict:
        log_.check_declared(topic)
    if alone:
        log_.poke()
        return
    db.before_commit(_Counted(), key=_Counted).families.add(family_of(topic))
    db.after_commit(log_.poke, key=log_)


def _text(payload: dict | str) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def change_number(family: str) -> sa.ColumnElement[int]:
    """A number, as an SQL expression, that grows with every commit that recorded an event of ``family``
    and never goes back: the sum of the family's counter rows (``core_event_counters``).

    Every commit that records events of a family bumps one of its counter rows by one, inside the
    transaction (:func:`count_commit` at commit; :func:`recorded_by` in a write's own statement), so the
    bump is visible exactly when the events are. Counters only grow, retention never touches them, and a
    restore bumps every family (``trellis.backups.restore``). So two reads that give the same number saw
    the same committed events of the family, and a cache keyed by it (the Database module's list counts)
    needs no invalidation of its own.

    Why counters, not ``max(event_id)`` plus the unnumbered rows (before): numbering updates each row after
    its commit, and the count of unnumbered rows walked the dead entries that leaves in the partial index
    (~420 index pages per list after ~340,000 events). The sum reads at most ``SLOTS`` rows through the
    primary key, whatever the log's size. A single counter row would put every writer of a family in one
    queue (its row lock is held until the commit's WAL flush): each backend bumps its own slot instead
    (measured in ``bench/results/peer.md``). ``family`` is made of validated names (``database.Item``); it
    is SQL text so that a statement built with it is compiled once."""
    total = sa.func.coalesce(sa.func.sum(_counters.c.changes), 0)
    return sa.select(sa.cast(total, sa.BigInteger)).where(_counters.c.family == db.sql_text(family)).scalar_subquery()


def topics() -> list[EventTopic]:
    """The event topics the loaded modules declare (``Module.events``): what a consumer may name."""
    return [topic for module in current_app.extensions["trellis"].modules for topic in module.events]


def enabled() -> bool:
    """Whether this app records events (``TRELLIS_EVENTS``, on unless turned off)."""
    return _log().enabled


# ---- reading -----------------------------------------------------------------------------------------


def read(after: int, family: str | tuple[str, ...] | None = None, limit: int = 1000) -> list[Event]:
    """Numbered events with ``event_id > after`` (of ``family``, or of any of several, when given), ascending."""
    return _log().read(after, family, limit)


def latest() -> int:
    """The highest ``event_id`` given so far (0 when none)."""
    return _log().latest()


def oldest(family: str | None = None) -> int | None:
    """The lowest ``event_id`` still kept (of ``family`` when given), None when there is none."""
    return _log().oldest(family)


def recorded() -> sa.Subquery:
    """Every recorded event row, numbered or still pending, as a subquery with the columns ``id`` (insert
    order), ``event_id`` (NULL while pending), ``topic``, ``family``, ``payload`` and ``created_at``: what
    a transaction sees it recorded before the sequencer numbered it (a module's tests of its events)."""
    columns = ("topic", "family", "payload", "created_at")
    numbered = sa.select(_table.c.id, _table.c.event_id, *(_table.c[name] for name in columns))
    pending = sa.select(
        _pending.c.id, sa.cast(sa.null(), sa.BigInteger).label("event_id"), *(_pending.c[name] for name in columns)
    )
    return sa.union_all(numbered, pending).subquery("recorded")


def complete_after(after: int, family: str) -> bool:
    """Whether the log still holds every event of ``family`` numbered after ``after`` (a replay from there
    loses nothing). Retention prunes a family only beyond its last N events and only below its oldest kept
    one, so the answer is no only when the family may have been pruned and ``after`` is below that."""
    return _log().complete_after(after, family)


def subscribe(pattern: str, callback: Callable[[Event], None]) -> Callable[[], None]:
    """Call ``callback(event)`` for every event of this process's receiver whose topic matches
    ``pattern`` (dotted, ``*`` = one segment), in ``event_id`` order, from a background thread inside an
    app context. Returns the function that unsubscribes. Callbacks must be quick (no blocking I/O)."""
    return _log().subscribe(pattern, callback)


def start(app: Flask) -> EventLog:
    """Start the app's sequencer, receiver and retention job (servers call it at start-up)."""
    log_ = app.extensions[_EXTENSION]
    log_.start()
    return log_


def init_app(app: Flask) -> None:
    app.extensions[_EXTENSION] = EventLog(app)


def _log() -> EventLog:
    return current.app().extensions[_EXTENSION]


def matches(pattern: str, topic: str) -> bool:
    wanted, parts = pattern.split("."), topic.split(".")
    return len(wanted) == len(parts) and all(w in ("*", p) for w, p in zip(wanted, parts, strict=True))


# ---- durable consumers --------------------------------------------------------------------------------

_consumers = EventConsumer.__table__


class Consumer:
    """A named cursor over the log (a row of ``core_event_consumers``) that a consumer moves in the same
    transaction as its work (``db.session``): an event is handled once, whichever process gets there
    first, and after a restart the consumer resumes where its last commit left it. See
    ``docs/modules.md`` ("A durable consumer")."""

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
            if db.session.execute(touch).rowcount:
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


# ---- the per-process machinery -----------------------------------------------------------------------


class EventLog:
    """What one process runs for the event log: sequencer, receiver, retention, consumers."""

    def __init__(self, app: Flask) -> None:
        self._app = weakref.ref(app)
        self.engine = app.extensions["trellis"].engine
        reads = app.extensions["trellis"].reads
        # Reads of the log need no transaction: PostgreSQL's autocommit pool spares BEGIN/ROLLBACK.
        self.read_engine = getattr(reads, "engine", self.engine)
        self.postgresql = self.engine.dialect.name == "postgresql"
        self.retention_seconds = app.config["EVENTS_RETENTION_SECONDS"]
        self.retention_count = app.config["EVENTS_RETENTION_COUNT"]
        self.redis_url = app.config.get("REDIS_URL") or None
        # TRELLIS_EVENTS=false records nothing: only to price the log (bench/live_bench.py); live data,
        # webhooks and replay then see no change.
        self.enabled = app.config["EVENTS"]
        # One channel per database: several deployments (or test runs) may share one Redis.
        self.channel = (
            "trellis:events:"
            + hashlib.sha1(self.engine.url.render_as_string(hide_password=True).encode()).hexdigest()[:12]
        )
        # Tests refuse a topic a loaded module records without declaring it (Module.events); production
        # pays nothing for the check. Topics outside every loaded module's name (the core's own tests) pass.
        self.strict = bool(app.config.get("TESTING"))
        self._wake = threading.Event()
        self._inbox: list[Event] = []  # offered, not yet taken by the receiver thread
        self._inbox_lock = threading.Lock()
        self._received = threading.Event()
        self._early: dict[int, Event] = {}  # received after a gap: waiting for the events before them
        self._gap_since: float | None = None
        self._started = False
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._deliver_lock = threading.RLock()
        self._delivered: int | None = None  # the last event_id handed to consumers
        self._polled: int | None = None  # the highest event_id at the last poll (see poll)
        self._sequenced: int | None = None  # SQLite: the last event_id a pass has published
        self.last_batch = 0  # events numbered by the last pass (how long the next one waits: see _pass)
        self._consumers: list[tuple[str, Callable[[Event], None]]] = []
        self._next_retention = 0.0
        self._next_poll = 0.0
        self._warn_pass = background.ThrottledWarning(log)
        self._warn_listen = background.ThrottledWarning(log)

    # public operations

    def check_declared(self, topic: str) -> None:
        """Raise :class:`ModuleError` when ``topic`` begins with a loaded module's name that does not declare it."""
        app = self._app()
        modules = app.extensions["trellis"].modules if app is not None else []
        owner = [m for m in modules if m.name == topic.split(".", 1)[0]]
        if owner and declared_topic(owner, topic) is None:
            raise ModuleError(f"module {owner[0].name!r} records event {topic!r} without declaring it (Module.events)")

    def poke(self) -> None:
        """A commit recorded events: number them soon (never blocks the caller)."""
        self.start()
        self._wake.set()

    def subscribe(self, pattern: str, callback: Callable[[Event], None]) -> Callable[[], None]:
        self.start()
        entry = (pattern, callback)
        with self._deliver_lock:
            if self._delivered is None:  # from now on: what committed before is for read() (replay)
                self._delivered = self.latest()
            self._consumers.append(entry)

        def unsubscribe() -> None:
            with self._deliver_lock:
                if entry in self._consumers:
                    self._consumers.remove(entry)
                if not self._consumers:  # a later first consumer starts from then, as the first one did
                    self._delivered = None

        return unsubscribe

    def read(self, after: int, family: str | tuple[str, ...] | None = None, limit: int = BATCH) -> list[Event]:
        return [numbered.event() for numbered in self._read_numbered(after, family, limit)]

    def _read_numbered(
        self, after: int, family: str | tuple[str, ...] | None = None, limit: int = BATCH
    ) -> list[Numbered]:
        """The events after ``after`` (of ``family``), ascending, their payloads as stored."""
        query = sa.select(*_COLUMNS).where(_table.c.event_id > after)
        if isinstance(family, str):
            query = query.where(_table.c.family == family)
        elif family is not None:
            query = query.where(_table.c.family.in_(family))
        with self.read_engine.connect() as connection:
            rows = connection.execute(query.order_by(_table.c.event_id).limit(limit)).all()
        return [_numbered(row) for row in rows]

    def latest(self) -> int:
        with self.read_engine.connect() as connection:
            return connection.execute(sa.select(sa.func.max(_table.c.event_id))).scalar() or 0

    def oldest(self, family: str | None = None) -> int | None:
        query = sa.select(sa.func.min(_table.c.event_id))
        if family is not None:
            query = query.where(_table.c.family == family)
        with self.read_engine.connect() as connection:
            return connection.execute(query).scalar()

    def complete_after(self, after: int, family: str) -> bool:
        oldest = self.oldest(family)
        if oldest is None:
            return True
        if after < oldest and self._restored_at(oldest, family):
            return False  # the state was replaced by a restore after ``after``: the client must resync
        if after >= oldest - 1:
            return True
        # Fewer kept than the retention count: the family was never pruned.
        kept = sa.select(_table.c.id).where(_table.c.family == family).limit(self.retention_count).subquery()
        with self.read_engine.connect() as connection:
            return connection.execute(sa.select(sa.func.count()).select_from(kept)).scalar_one() < self.retention_count

    def _restored_at(self, event_id: int, family: str) -> bool:
        """Whether ``event_id`` is a restore's marker: a row whose topic is its family (``trellis.backups``)."""
        query = sa.select(_table.c.topic).where(_table.c.event_id == event_id)
        with self.read_engine.connect() as connection:
            return connection.execute(query).scalar() == family

    def start(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if self._started:
                return
            self._started = True
        # The threads hold the log weakly: an app discarded without stop() ends them.
        ref = weakref.ref(self)
        stopped = functools.partial(_stopped, ref)

        def loop(name: str, what: str, turn: Callable[[weakref.ref], None], pause: Callable[[float], object]) -> Any:
            # The database is down or restarting: the next turn, a second later, tries again.
            return background.start_loop(
                name, what, functools.partial(turn, ref), self._warn_pass, retry_seconds=PERIOD_SECONDS,
                stopped=stopped, pause=pause,
            )  # fmt: skip

        self._threads = [
            loop("trellis-events", "event log pass", _pass, self._wake.wait),
            loop("trellis-events-receive", "event log delivery", _receive, self._received.wait),
        ]
        if self.redis_url:
            app = self._app()
            listener = background.RedisListener(
                self.redis_url,
                self.channel,
                "event log",  # meanwhile the 1 s poll delivers from the table
                self._warn_listen,
                connect_timeout=redis_options(app)["socket_connect_timeout"] if app is not None else 0.25,
                retry_seconds=LISTEN_RETRY_SECONDS,
                poll_seconds=PERIOD_SECONDS,  # wakes up to notice a stop
                stopped=stopped,
            )
            self._threads.append(listener.start("trellis-events-listen", functools.partial(_offer, ref)))

    def stop(self) -> None:
        """End this process's background threads (an app being discarded); :meth:`start` starts them again."""
        with self._start_lock:
            self._stopping = True
            self._wake.set()
            self._received.set()
        for thread in self._threads:
            thread.join(WAIT_FOR_STOP_SECONDS)
        with self._start_lock:
            self._threads, self._started, self._stopping = [], False, False

    def reset(self) -> None:
        """Forget the receiver's position (after the table was emptied: tests wipe their data)."""
        with self._deliver_lock:
            self._delivered = None
            self._early.clear()
            self._gap_since = None

    # sequencer

    def sequence(self) -> list[Numbered]:
        """Number the committed pending rows (locked passes); returns them, ascending."""
        if not self.postgresql:
            return self._numbered_since_last_pass()
        numbered: list[Numbered] = []
        while True:
            batch = self._number()
            numbered += batch
            if len(batch) < BATCH:
                return numbered

    def _numbered_since_last_pass(self) -> list[Numbered]:
        """SQLite: events are numbered as inserted; a pass hands on what committed since the last one."""
        if self._sequenced is None:
            self._sequenced = self.latest()
            return []
        if self._sequenced > self.latest():  # the table went back (see catch_up)
            self._sequenced = 0
        found: list[Numbered] = []
        while batch := self._read_numbered(self._sequenced, limit=BATCH):
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
        with self.read_engine.begin() as connection:
            rows = statements.execute_compiled(connection, _NUMBER, {"batch": BATCH}, _COMPILED)
        return sorted((_numbered(row) for row in rows), key=lambda event: event.id)

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

    def publish(self, batch: list[Numbered]) -> None:
        """Hand a numbered batch to every process's receiver (Redis) or to this one."""
        if not batch:
            return
        app = self._app()
        client = redis_client(app) if app is not None and self.redis_url else None
        if client is None:
            if self._consumers:
                self.offer([numbered.event() for numbered in batch])
            return
        message = "[" + ",".join(numbered.wire() for numbered in batch) + "]"
        try:
            client.publish(self.channel, message)
        except redis.RedisError:
            pass  # the breaker has warned; every receiver's poll reads the batch from the table

    # receiver

    def offer(self, batch: list[Event]) -> None:
        """Hand a numbered batch (ascending) to this process's receiver thread, which delivers it (never on
        the caller's thread: the Redis listener reads on, the sequencer numbers on)."""
        self.start()
        with self._inbox_lock:
            self._inbox += batch
        self._received.set()

    def receive(self) -> None:
        """The receiver thread's turn: deliver what was offered, in ``event_id`` order, once each.

        Whatever arrived meanwhile is delivered together (its socket writes gathered: one per socket), so
        a busy process writes less, not later. An event after a gap waits for the batch before it, up to
        GAP_WAIT_SECONDS, then the gap is read from the table."""
        with self._inbox_lock:
            items, self._inbox = self._inbox, []
        with self._deliver_lock, gathered_writes():
            if self._delivered is None and items:
                # A receiver starts at the head of the log: what came before is for read() (replay).
                self._delivered = min(item.id for item in items) - 1
            for item in items:
                if self._delivered is not None and item.id > self._delivered:
                    self._early[item.id] = item
            self._deliver_following()
            if not self._early:
                self._gap_since = None
                return
            now = time.monotonic()
            if self._gap_since is None:
                self._gap_since = now
            elif now - self._gap_since >= GAP_WAIT_SECONDS:
                first = min(self._early)
                self.catch_up(first - 1)
                if self._delivered < first - 1:  # not in the table (pruned, or the table went back)
                    log.warning(
                        "events %d to %d are not in the log; delivering from %d", self._delivered + 1, first - 1, first
                    )
                    self._delivered = first - 1
                self._deliver_following()
                self._gap_since = None if not self._early else now

    def _deliver_following(self) -> None:
        """Deliver the early events that follow the last delivered one, as one batch; drop the ones it passed."""
        if self._delivered is None:  # nothing received yet (the receiver's first turn at start-up)
            return
        for passed in [key for key in self._early if key <= self._delivered]:
            del self._early[passed]
        run = []
        while (item := self._early.pop(self._delivered + len(run) + 1, None)) is not None:
            run.append(item)
        self._deliver(run)

    def catch_up(self, through: int | None = None) -> None:
        """Deliver what the table holds after the last delivered event (up to ``through``)."""
        with self._deliver_lock, gathered_writes():
            if self._delivered is None:
                self._delivered = self.latest()
                return
            if through is None and self._delivered > (latest := self.latest()):
                # The table went back (emptied, or restored from a backup): start again from what it holds.
                log.warning("the event log went back from %d to %d; delivering from its start", self._delivered, latest)
                self._delivered = 0
            while through is None or self._delivered < through:
                batch = self.read(self._delivered, limit=BATCH)
                if through is not None:
                    batch = [e for e in batch if e.id <= through]
                if not batch:
                    return
                if batch[0].id != self._delivered + 1:  # pruned meanwhile: carry on from what is kept
                    log.warning("events %d to %d were pruned before delivery", self._delivered + 1, batch[0].id - 1)
                self._deliver(batch)

    def poll(self) -> None:
        """The receiver's safety net, once a period: deliver what the table holds and no publication brought.

        With Redis, only what was numbered by the previous poll already: a publication arrives within
        milliseconds, and delivering it from here instead read the table and ran every consumer on the
        sequencer's thread while the message was on its way (py-spy, 400 writes/s to 500 subscribers:
        12% of a worker's CPU, and a second of latency for what it delivered). A restart's state and a
        table that went back are handled at once, as without Redis."""
        if not self._consumers:
            # Nobody to deliver to (publications are dropped unread: see _offer); a first consumer starts
            # at the head of the log (subscribe).
            with self._deliver_lock:
                if not self._consumers:
                    self._delivered = None
                    return
        if not self.redis_url:
            self.catch_up()
            return
        latest = self.latest()
        earlier, self._polled = self._polled, latest
        with self._deliver_lock:
            if self._delivered is None or self._delivered > latest:
                self.catch_up()
            elif earlier is not None and self._delivered < earlier:
                self.catch_up(earlier)
                self._deliver_following()

    def _deliver(self, batch: list[Event]) -> None:
        """Hand ``batch`` (contiguous, following the last delivered event) to the consumers. Their socket
        writes are gathered by the caller (``gathered_writes``): one write per socket for the batch."""
        if not batch:
            return
        app = self._app()
        consumers = list(self._consumers)
        self._delivered = batch[-1].id
        if app is None or not consumers:
            return
        with app.app_context():
            for item in batch:
                for pattern, callback in consumers:
                    if matches(pattern, item.topic):
                        try:
                            callback(item)
                        except Exception:
                            log.exception("event consumer %r failed on event %d", callback, item.id)

    # retention

    def prune(self) -> int:
        """Delete events older than the retention time and not among the last N of their family."""
        cutoff = db.utcnow() - timedelta(seconds=self.retention_seconds)
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
                    .offset(max(self.retention_count - 1, 0))
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

    def sequencer_turn(self) -> tuple[threading.Event, float]:
        self._wake.clear()
        self.tick()
        return self._wake, PERIOD_SECONDS

    def receiver_turn(self) -> tuple[threading.Event, float]:
        """Deliver what was offered; poll the table once a period; then wait for the next offer (shortly,
        while a gap waits)."""
        self._received.clear()
        self.receive()
        if time.monotonic() >= self._next_poll:
            self._next_poll = time.monotonic() + PERIOD_SECONDS
            self.poll()
        return self._received, GAP_WAIT_SECONDS if self._early else PERIOD_SECONDS

    def tick(self) -> None:
        """One pass of the sequencer's loop: number and publish, and prune when due. (The poll for a lost
        publication is the receiver thread's: nothing here waits for a delivery.)"""
        batch = self.sequence()
        self.last_batch = len(batch)
        self.publish(batch)
        if time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + RETENTION_PERIOD_SECONDS
            self.prune()


def _numbered(row: Any) -> Numbered:
    payload = row[3]
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return Numbered(row[0], row[1], row[2], text, _stamp(row[4]))


def _stamp(value: Any) -> str:
    return db.isoformat(value) if value is not None and not isinstance(value, str) else value


def _turn(ref: weakref.ref, turn: Callable[[EventLog], tuple[threading.Event, float]]) -> bool:
    """One turn of a background thread on a log it holds weakly (nothing once the log is gone): ``turn``
    works and names the signal to wait for and for how long; whether the signal came."""
    log_ = ref()
    if log_ is None:
        return False
    signal, seconds = turn(log_)
    del log_
    return signal.wait(seconds)


def _pass(ref: weakref.ref) -> None:
    """The sequencer's turn: a pass, then wait to be poked, or a second (the first at start-up); once
    poked, let the commits of the next few milliseconds join the pass."""
    if _turn(ref, EventLog.sequencer_turn):
        log_ = ref()
        busy = log_ is not None and log_.last_batch >= BUSY_BATCH
        del log_
        time.sleep(COALESCE_BUSY_SECONDS if busy else COALESCE_SECONDS)


def _receive(ref: weakref.ref) -> None:
    """The receiver's turn: deliver what was offered, poll once a period, wait for the next offer."""
    _turn(ref, EventLog.receiver_turn)


def _stopped(ref: weakref.ref) -> bool:
    log_ = ref()
    return log_ is None or log_._stopping


def _offer(ref: weakref.ref, message: dict[str, Any]) -> None:
    """A numbered batch published by any process, handed to this process's receiver."""
    log_ = ref()
    # A process nobody in listens to (no live subscription, no webhook) reads no payload: decoding every
    # batch it hears was 2.4% of its CPU at ~2,100 updates/s (py-spy, 2026-11-27).
    if log_ is not None and log_._consumers:
        log_.offer([Event(*item) for item in json.loads(message["data"])])
