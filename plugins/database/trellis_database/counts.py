"""Exact list counts, remembered in Redis until the schema's documents change.

A list answers ``count``, the number of matches before skip/limit. The page is 20 rows read from an
index; the count reads every match (an index-only scan over half the table costs PostgreSQL ~4 ms of
CPU at 100,000 documents; see bench/results/database.md). With Redis configured
(``TRELLIS_REDIS_URL``, which a production deployment has) a count is kept per query until a write
to the schema commits, in any process; without Redis every list counts.

Why it stays exact:

- Each document table has a version in Redis, a random token replaced after every commit that wrote
  to it (the :class:`CountCache` listens to the core session's ``after_commit``; the service's write
  functions mark their table with :meth:`CountCache.touched`). Counts live in a hash per table *and
  version*, and a count is stored under the version read *before* its query ran: a count that may
  predate a commit lands in a hash nobody reads once that commit's new version is set. Tokens are
  never reused, so a version key lost to eviction or a failover cannot revive an old hash.
- A commit whose new version cannot reach Redis (Redis down, hung or restarting) raises the table's
  *epoch* in the database instead (``database_count_epochs``). The list's page statement reads the
  epoch in the same round trip (a scalar subquery), and a count is kept under it: once Redis is back,
  with or without its old data, no count from before such a write is served.
- Every hash expires ``TTL_SECONDS`` after it was created; that bounds writes made behind Trellis's
  back (plain SQL) and a process killed between its commit and the invalidation.

Redis being down costs nothing but the counting: errors are logged at most once a minute and the
database counts.

Writes skip Redis while no count of their table can be cached. A new version costs a write a Redis
round trip after its commit, 13-19% of a create's or update's CPU (py-spy, ``bench/results/peer.md``),
and most tables written to are never listed with a count. So a process *announces* that it caches
counts of a table before it computes one to keep: it sets ``counted_until`` (now + ``ANNOUNCE_SECONDS``,
the database's clock) in the table's ``database_count_epochs`` row, in a transaction of its own. A
write reads that row in its own transaction (:func:`written`, ``FOR SHARE`` on PostgreSQL) and marks
its table for a new version only when the row is missing or the announcement has not expired. Why no
count can then outlive a write that skipped Redis:

- the write read the row before an announcement committed: on PostgreSQL its share lock makes the
  announcing ``UPDATE`` wait until the write has committed (on SQLite the database's one write lock
  does), so every count computed after the announcement includes the write;
- the write read it after: it saw ``counted_until`` in the future, because a count is only kept while
  the announcement outlives it (``counted_until`` at least ``TTL_SECONDS`` after the moment it is
  stored, checked before storing): it sets a new version as before.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app, has_app_context
from redis.exceptions import RedisError
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from trellis import db
from trellis.shared_redis import redis_client

from .models import CountEpoch

log = logging.getLogger(__name__)

# The longest a count lives: it also bounds writes behind Trellis's back and a crash after a commit.
TTL_SECONDS = 120
VERSION_TTL_SECONDS = 86_400  # a version key outlives every count stored under it
# An announcement lasts twice a count's life and is renewed once less than a count's life (plus a margin
# for the counting itself) is left: one small transaction per table and process every ~2 minutes at most.
ANNOUNCE_SECONDS = 2 * TTL_SECONDS
ANNOUNCE_MARGIN_SECONDS = 30
MAX_COUNTS = 10_000  # per table and version: clients choose the queries, memory stays bounded
_KEY = "trellis_database_counts"
_TOUCHED = "trellis_database_touched"

# KEYS[1] version key; ARGV: counts key prefix, the query's field, a fresh version token, version ttl
# → {version, count or nil}. A table without a version gets the fresh token: versions are random,
# never reused, so a lost or evicted version key cannot bring back an old hash.
_READ = """
local version = redis.call('GET', KEYS[1])
if not version then
  version = ARGV[3]
  redis.call('SET', KEYS[1], version, 'EX', ARGV[4])
end
return {version, redis.call('HGET', ARGV[1] .. version, ARGV[2])}
"""
# KEYS[1] version key; ARGV: counts key prefix, version read before counting, field, count, ttl, max,
# version ttl. The hash's expiry is set when it is created and never pushed back: TTL_SECONDS bounds
# how long any count lives, whatever else is stored beside it.
_STORE = """
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
local key = ARGV[1] .. ARGV[2]
local size = redis.call('HLEN', key)
if size >= tonumber(ARGV[6]) then return 0 end
redis.call('HSET', key, ARGV[3], ARGV[4])
if size == 0 then redis.call('EXPIRE', key, ARGV[5]) end
redis.call('EXPIRE', KEYS[1], ARGV[7])
return 1
"""


class CountCache:
    """One app's list counts (see the module's docstring)."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        # Keys carry the database's identity: two deployments (or test runs) may share one Redis.
        database = app.extensions["trellis"].engine.url.render_as_string(hide_password=True)
        self.prefix = "trellis:" + hashlib.sha1(database.encode()).hexdigest()[:12] + ":dbcount:"
        self._scripts: tuple[Any, Any] | None = None
        self._last_warning = float("-inf")
        # table → until when (time.monotonic) this process knows an announcement of it stands
        self._announced: dict[str, float] = {}

    @staticmethod
    def epoch_column(table: sa.Table) -> sa.ScalarSelect:
        """The table's epoch as a column of the page statement (0 until a write missed Redis)."""
        epochs = CountEpoch.__table__
        return sa.func.coalesce(
            sa.select(epochs.c.epoch)
            .where(epochs.c.table_name == sa.literal_column(f"'{table.name}'"))
            .scalar_subquery(),
            0,
        )

    def count(self, table: str, query: tuple[Any, ...], epoch: int | None, compute: Callable[[], int]) -> int:
        """The count of ``query`` on ``table``: from Redis when known for the current data, else ``compute()``.

        ``epoch`` is the table's epoch read before counting (None: unknown, so nothing is kept)."""
        redis = redis_client(self.app)
        if redis is None or epoch is None:
            return compute()
        version_key, counts_prefix = f"{self.prefix}{table}:v", f"{self.prefix}{table}:c:"
        field = hashlib.sha1(repr((epoch, query)).encode()).hexdigest()
        try:
            read, store = self._scripts or self._register(redis)
            version, known = read(keys=[version_key], args=[counts_prefix, field, _token(), VERSION_TTL_SECONDS])
        except RedisError as exc:  # Redis only accelerates lists: never fail one for it
            self._warn_now_and_then(f"count cache unavailable ({exc.__class__.__name__}); counting in the database")
            return compute()
        if known is not None:
            return int(known)
        if not self._announce(table):
            return compute()
        total = compute()
        if self._announced.get(table, 0.0) < time.monotonic() + TTL_SECONDS:
            return total  # the counting took so long that the announcement may not outlive the count
        try:
            store(
                keys=[version_key],
                args=[counts_prefix, version, field, total, TTL_SECONDS, MAX_COUNTS, VERSION_TTL_SECONDS],
            )
        except RedisError as exc:
            self._warn_now_and_then(f"count cache unavailable ({exc.__class__.__name__}); count not kept")
        return total

    def _announce(self, table: str) -> bool:
        """Make sure this table's announcement stands long enough to keep a count (see the module's
        docstring); False when it cannot be written (the count is then not kept)."""
        started = time.monotonic()
        if self._announced.get(table, 0.0) >= started + TTL_SECONDS + ANNOUNCE_MARGIN_SECONDS:
            return True
        epochs = CountEpoch.__table__
        dialect = self.app.extensions["trellis"].engine.dialect.name
        until = _database_now(dialect) + datetime.timedelta(seconds=ANNOUNCE_SECONDS)
        insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(epochs)
        statement = insert.values(table_name=table, epoch=0, counted_until=until).on_conflict_do_update(
            index_elements=[epochs.c.table_name], set_={"counted_until": until}
        )
        try:
            with db.reads().transaction() as connection:
                connection.execute(statement)
        except sa.exc.SQLAlchemyError as exc:
            self._warn_now_and_then(f"count cache: could not announce {table} ({exc.__class__.__name__})")
            return False
        # Measured from before the statement: the database's clock read it later, so it stands longer.
        self._announced[table] = started + ANNOUNCE_SECONDS
        return True

    def committed(self, tables: set[str]) -> None:
        """After a commit that wrote to ``tables``: a new version for each, else a new epoch."""
        redis = redis_client(self.app)
        if redis is None:
            return
        try:
            with redis.pipeline(transaction=False) as pipe:
                for table in tables:
                    pipe.set(f"{self.prefix}{table}:v", _token(), ex=VERSION_TTL_SECONDS)
                pipe.execute()
        except RedisError as exc:
            self._warn_now_and_then(
                f"count cache: {', '.join(sorted(tables))} invalidated in the database "
                f"(Redis: {exc.__class__.__name__})"
            )
            self._raise_epochs(tables)

    def _raise_epochs(self, tables: set[str]) -> None:
        dialect = self.app.extensions["trellis"].engine.dialect.name
        insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(CountEpoch.__table__)
        epochs = CountEpoch.__table__
        statement = insert.on_conflict_do_update(
            index_elements=[epochs.c.table_name], set_={"epoch": epochs.c.epoch + 1}
        )
        try:
            with db.reads().transaction() as connection:  # the session has committed: a transaction of its own
                connection.execute(statement, [{"table_name": t, "epoch": 1} for t in sorted(tables)])
        except sa.exc.SQLAlchemyError as exc:
            # Neither Redis nor the database took it: these counts may be stale until they expire.
            log.error("count cache: could not invalidate %s (%s)", ", ".join(sorted(tables)), exc.__class__.__name__)

    def _register(self, redis: Any) -> tuple[Any, Any]:
        """The two Lua scripts, run by their SHA (EVALSHA: the text is sent once, not per list)."""
        self._scripts = (redis.register_script(_READ), redis.register_script(_STORE))
        return self._scripts

    def _warn_now_and_then(self, message: str) -> None:
        """One warning a minute per app: with Redis down, every list and write would log one."""
        now = time.monotonic()
        if now - self._last_warning >= 60:
            self._last_warning = now
            log.warning(message)


def _token() -> str:
    """A new version: 64 random bits (Python's generator, OS-seeded; no system call per list)."""
    return f"{random.getrandbits(64):016x}"


def init_app(app: Flask) -> None:
    app.extensions[_KEY] = CountCache(app)
    # The core's session only (the scoped session every module uses), never every Session in the process.
    if not event.contains(db.session, "after_commit", _after_commit):
        event.listen(db.session, "after_commit", _after_commit)
        event.listen(db.session, "after_soft_rollback", _after_rollback)


def cache() -> CountCache:
    return current_app.extensions[_KEY]


def touched(session: Session, table: str) -> None:
    """Mark ``table`` written in ``session``'s transaction: its counts are dropped once it commits."""
    session.info.setdefault(_TOUCHED, set()).add(table)


def table_created(session: Session, table: str) -> None:
    """A new document table's row, in its creating transaction: writes to it skip Redis until a count
    of it is announced. (A table without a row counts as announced: see :func:`written`.)"""
    session.connection().execute(sa.insert(CountEpoch.__table__).values(table_name=table, epoch=0))


UNREAD = object()  # written(): the write's statement did not read the announcement


def announced_column(table: str, dialect: str) -> sa.ScalarSelect:
    """The table's announcement as a column a write statement returns (``RETURNING``), read under the
    same share lock as in :func:`written` without a round trip of its own: NULL when the row is
    missing, else whether it stands. Built into statements cached per schema version, so "now" is SQL.
    PostgreSQL's ``now()`` is the write's transaction start, earlier than the statement: an expired
    announcement may still look standing, which only costs a Redis version that was not needed."""
    epochs = CountEpoch.__table__
    now = sa.func.now() if dialect == "postgresql" else sa.func.strftime("%Y-%m-%d %H:%M:%f", "now")
    query = sa.select(sa.func.coalesce(epochs.c.counted_until > now, False)).where(
        epochs.c.table_name == sa.literal_column(f"'{table}'")  # a name made by tables.table_name
    )
    if dialect == "postgresql":
        query = query.with_for_update(read=True)
    return query.scalar_subquery()


def written(session: Session, table: str, announced: Any = UNREAD) -> None:
    """A document write to ``table`` in ``session``'s transaction: :func:`touched` if a count of the
    table may be cached (its announcement, read under a share lock, stands or is missing), else
    nothing, and the commit sends nothing to Redis. Without Redis no count is cached at all.

    A missing row counts as an announcement: a write cannot lock a row that does not exist yet, so an
    announcement inserting it would not wait for the write. Tables get their row when they are made
    (:func:`table_created`; those made before it, from migration ``database_0003``)."""
    if redis_client(cache().app) is None:
        return
    if announced is not UNREAD:  # read by the write's own statement (announced_column)
        if announced is None or announced:  # SQLite answers 0/1
            touched(session, table)
        return
    dialect = session.get_bind().dialect.name
    counted = session.connection().execute(sa.select(announced_column(table, dialect))).scalar()
    if counted is None or counted:
        touched(session, table)


def _database_now(dialect: str) -> Any:
    """The database's clock on PostgreSQL (one clock for every process), this host's on SQLite."""
    if dialect == "postgresql":
        return sa.func.now()
    return datetime.datetime.now(datetime.UTC)  # bound with the column's type where it is compared


def _after_commit(session: Session) -> None:
    tables = session.info.pop(_TOUCHED, None)
    if tables and has_app_context() and _KEY in current_app.extensions:
        cache().committed(tables)


def _after_rollback(session: Session, previous_transaction: Any) -> None:
    if previous_transaction.parent is None:  # the outermost transaction: nothing it wrote survives
        session.info.pop(_TOUCHED, None)
