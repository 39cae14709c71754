"""Database access: one engine per app, a session scoped to the app context, the shared metadata.

Every module's models derive from :class:`Base`, so Alembic and the migration test see one metadata.
Code uses :data:`session` (an SQLAlchemy ``scoped_session``); it binds to the current app's engine
and is removed when the app context ends.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from flask import Flask, current_app, g
from flask.globals import app_ctx
from sqlalchemy import JSON, DateTime, MetaData, Table, TypeDecorator, create_engine, event
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, scoped_session, sessionmaker
from sqlalchemy.pool import StaticPool

from trellis.errors import APIError

log = logging.getLogger(__name__)
T = TypeVar("T")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# JSON on SQLite, JSONB on PostgreSQL.
JSONType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def new_id() -> str:
    """Opaque record id: 32 hex characters."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware datetimes on both databases (SQLite drops the zone; we put UTC back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


def isoformat(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def normalise_url(url: str, async_mode: str) -> URL:
    """PostgreSQL always goes through psycopg2, the driver we install.

    ``postgresql://`` and the contract's ``postgresql+psycopg://`` are accepted; under eventlet
    psycopg2 is made cooperative, which psycopg 3 cannot be (it would block the hub).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg2":
        log.info("using psycopg2 for PostgreSQL (asked for %s, async mode %s)", parsed.drivername, async_mode)
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def make_engine(url: str, async_mode: str = "threading") -> Engine:
    parsed = normalise_url(url, async_mode)
    kwargs: dict[str, Any] = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if parsed.database in (None, "", ":memory:"):
            kwargs["poolclass"] = StaticPool
    else:
        # No pre-ping: it costs a round trip per checkout; stale connections are recycled instead.
        # The pool keeps as many connections as an eventlet worker serves requests at once: an overflow
        # connection is closed on check-in, so a too-small pool opens a new PostgreSQL backend per request.
        kwargs.update(pool_size=32, max_overflow=32, pool_recycle=1800)
        if async_mode == "eventlet" and _eventlet_patched():
            from eventlet.support import psycopg2_patcher

            psycopg2_patcher.make_psycopg_green()
    engine = create_engine(parsed, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _eventlet_patched() -> bool:
    """True in a server process that eventlet has monkey-patched (not in the CLI or tests)."""
    if "eventlet" not in sys.modules:
        return False
    from eventlet import patcher

    return patcher.is_monkey_patched("socket")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling breaks SAVEPOINT; SQLAlchemy emits BEGIN itself instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN")


def engine() -> Engine:
    return current_app.extensions["trellis"].engine


class _AppSession(Session):
    """A session that binds to the engine of the app in whose context it was created."""

    def get_bind(self, mapper: Any = None, clause: Any = None, **kw: Any) -> Any:
        if self.bind is not None:
            return self.bind
        return engine()


def _scope() -> int:
    try:
        return id(app_ctx._get_current_object())
    except RuntimeError:  # outside an app context (scripts, test set-up): one session per thread
        return threading.get_ident()


session: scoped_session[Session] = scoped_session(
    sessionmaker(class_=_AppSession, expire_on_commit=False), scopefunc=_scope
)


def after_outer_commit(info_key: str, callback: Callable[[Any], None]) -> None:
    """Call ``callback(value)`` once the core session's transaction that set ``session.info[info_key] =
    value`` commits; a rollback drops the value. Savepoints are ignored: SQLAlchemy signals their release
    and rollback with the same events, but what they hold commits or not with the outer transaction.

    One listener pair on the session class, not one per transaction: registering per write cost ~70 µs
    of a create's CPU, and a ``once=True`` listener fires only for a session's first transaction
    (SQLAlchemy keeps it registered, so registering it again is a no-op)."""

    def committed(target: Session) -> None:
        if not target.in_nested_transaction():
            value = target.info.pop(info_key, None)
            if value is not None:
                callback(value)

    def rolled_back(target: Session) -> None:
        if not target.in_nested_transaction():
            target.info.pop(info_key, None)

    event.listen(session.session_factory.class_, "after_commit", committed)
    event.listen(session.session_factory.class_, "after_rollback", rolled_back)


def init_app(app: Flask) -> Engine:
    eng = make_engine(app.config["DATABASE_URL"], app.config["ASYNC_MODE"])

    @app.teardown_appcontext
    def _remove_session(_exc: BaseException | None) -> None:
        close_read_connection()
        session.remove()

    return eng


def execute_compiled(
    connection: Connection, statement: Any, parameters: dict[str, Any], cache: dict[Any, Any] | None = None
) -> list[Any]:
    """Run one statement with one row of parameters on ``connection`` and return its rows (``RETURNING``).

    On PostgreSQL the SQL is compiled once (kept in ``cache``, keyed by the statement) and run straight
    on the DB-API cursor: SQLAlchemy's execution layer (context, result wrapping, per-parameter
    processing) cost a create ~150 µs of CPU for its two statements (py-spy, ``bench/results/peer.md``),
    more than the round trip itself. Parameters are plain values; a dict is sent as JSON text (the JSON
    columns' parameters). DB-API errors come out as SQLAlchemy's (``IntegrityError`` …), as from
    ``connection.execute``, and a connection found dead is invalidated with every older one of the pool
    (after a PostgreSQL restart the next requests get fresh connections). SQLite runs through SQLAlchemy.
    """
    if connection.dialect.name != "postgresql":
        result = connection.execute(statement, parameters)
        return result.all() if result.returns_rows else []
    compiled = None if cache is None else cache.get(("sql", statement))
    if compiled is None:
        made = statement.compile(dialect=connection.dialect)
        # The statement's own values (``version + 1``'s 1) go with the caller's parameters.
        own = {name: bind.value for name, bind in made.binds.items() if not bind.required}
        compiled = (str(made), own)
        if cache is not None:
            cache[("sql", statement)] = compiled
    sql, own = compiled
    values = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in parameters.items()}
    if own:
        values = {**own, **values}
    raw = connection.connection.dbapi_connection
    try:
        with raw.cursor() as cursor:
            cursor.execute(sql, values)
            return cursor.fetchall() if cursor.description else []
    except raw.Error as exc:  # psycopg2's base class, as the connection exposes it
        dead = connection.dialect.is_disconnect(exc, raw, None)
        if dead:  # as SQLAlchemy does on a disconnect: this connection and every older one in the pool
            connection.engine.pool._invalidate(connection.connection, exc)
        raise DBAPIError.instance(
            sql, values, exc, raw.Error, connection_invalidated=dead, dialect=connection.dialect
        ) from exc


def insert_rows(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys, column names) into ``table`` in one statement.

    On PostgreSQL each column travels as one array parameter and the server unnests them, a statement
    compiled once per table and columns. SQLAlchemy's multi-row INSERT ("insertmanyvalues") rewrites its
    placeholders row by row in Python: that was 8% of a server's CPU while it queued webhook deliveries,
    50 rows a statement (py-spy, ``bench/results/webhooks.md``). SQLite: an executemany (in-process).
    Rows name every column they set: Python-side column defaults are not applied on PostgreSQL."""
    if not rows:
        return
    if connection.dialect.name != "postgresql":
        connection.execute(sa.insert(table), list(rows))
        return
    names = tuple(rows[0])
    statement = _unnest_insert(table, names)
    connection.execute(statement, {f"c{n}": [row[name] for row in rows] for n, name in enumerate(names)})


@functools.lru_cache(maxsize=256)
def _unnest_insert(table: Table, names: tuple[str, ...]) -> sa.TextClause:
    columns = [table.c[name] for name in names]
    dialect = postgresql.dialect()
    quote = dialect.identifier_preparer

    def item_type(column: sa.Column) -> Any:
        # Strings travel as text: a cast to varchar(n) (SQLAlchemy casts typed parameters too) would cut a
        # long value where the INSERT refuses it.
        return sa.Text() if isinstance(column.type, sa.String) else column.type

    arrays = ", ".join(f"CAST(:c{n} AS {item_type(column).compile(dialect)}[])" for n, column in enumerate(columns))
    listed = ", ".join(quote.quote(column.name) for column in columns)
    sql = f"INSERT INTO {quote.format_table(table)} ({listed}) SELECT * FROM unnest({arrays})"
    # Typed parameters: each item goes through its column's bind processing (UTC times, JSON text); one
    # dimension, so a JSON value that is a list stays one item.
    return sa.text(sql).bindparams(
        *(
            sa.bindparam(f"c{n}", type_=postgresql.ARRAY(item_type(column), dimensions=1))
            for n, column in enumerate(columns)
        )
    )


def is_postgresql(bind: Any = None) -> bool:
    return (bind or engine()).dialect.name == "postgresql"


# ---- reads that need no transaction ---------------------------------------------------------------


class ReadConnections:
    """Where reads that need no transaction run: a pooled connection, one per request at most.

    On PostgreSQL they come from a second pool of the same database whose connections are in
    autocommit mode for life (psycopg2's client-side flag, set once when a connection is made): each
    statement sees what is committed, no BEGIN/ROLLBACK round trips are spent, and check-in has
    nothing to reset. Sharing the session's pool with an ``AUTOCOMMIT`` execution option instead cost
    ~8% of a get by id (py-spy): SQLAlchemy sets the flag on every checkout and restores the isolation
    level on every check-in. The pool owns the connections' life: recycling, and after a disconnect the
    invalidation of every older connection. On SQLite reads are local and use the main engine.
    Tests replace this object by :class:`SessionReads` (the seam, see :func:`reads_in_session`).
    """

    retryable = True  # a statement on its own is safe to run again on a fresh connection

    def __init__(self, engine: Engine) -> None:
        self.base = engine
        self.engine = engine
        if is_postgresql(engine):
            self.engine = create_engine(
                engine.url,
                isolation_level="AUTOCOMMIT",
                pool_reset_on_return=None,
                pool_size=16,
                max_overflow=16,
                pool_recycle=1800,
            )

    def open(self) -> Connection:
        return self.engine.connect()

    def close(self, connection: Connection) -> None:
        connection.close()

    def transaction(self) -> contextlib.AbstractContextManager[Connection]:
        """A short transaction of its own, outside the session's (e.g. after the session committed)."""
        return self.base.begin()


class SessionReads:
    """Reads on the session's connection: the test fixtures' rolled-back transaction, whose rows
    only that connection sees (``connection`` is the one the session is bound to)."""

    retryable = False  # inside a transaction: a failed statement has aborted it

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def open(self) -> Connection:
        return session.connection()

    def close(self, connection: Connection) -> None:
        pass

    def transaction(self) -> contextlib.AbstractContextManager[Connection]:
        return contextlib.nullcontext(self.connection)


_READ_KEY = "trellis_read_connection"
# The test seam: while the `db` fixture runs, every app reads through its session (SessionReads).
_session_reads: list[SessionReads] = []


@contextlib.contextmanager
def reads_in_session(connection: Connection) -> Iterator[None]:
    """Within this block every app reads through the session bound to ``connection`` (the tests' transaction)."""
    _session_reads.append(SessionReads(connection))
    try:
        yield
    finally:
        _session_reads.pop()


def reads() -> ReadConnections | SessionReads:
    """The current app's provider of read connections."""
    return _session_reads[-1] if _session_reads else current_app.extensions["trellis"].reads


def read_connection() -> Connection:
    """This request's connection for reads that need no transaction (opened on first use, given
    back when the app context ends)."""
    connection = g.get(_READ_KEY)
    if connection is None:
        connection = reads().open()
        setattr(g, _READ_KEY, connection)
    return connection


def close_read_connection() -> None:
    connection = g.pop(_READ_KEY, None)
    if connection is not None:
        reads().close(connection)


def reading(func: Callable[[Connection], T]) -> T:
    """Run ``func(read_connection())``. If the connection is dead or cannot be had (PostgreSQL
    restarted), run it once more on a fresh one (reads are idempotent); if that fails too, answer 503
    with ``Retry-After``. SQLAlchemy's pool, told of the disconnect, replaces every older connection."""
    try:
        return func(read_connection())
    except DBAPIError as exc:
        if not reads().retryable or not _lost(exc):
            raise
        log.warning("database connection lost (%s); reading again on a new one", exc.orig.__class__.__name__)
    close_read_connection()
    try:
        return func(read_connection())
    except DBAPIError as exc:
        if not _lost(exc):
            raise
        close_read_connection()
        raise APIError(503, "The database is unavailable; try again shortly", headers={"Retry-After": "1"}) from None


def _lost(exc: DBAPIError) -> bool:
    """A dead connection, or none to be had (the server is down or restarting)."""
    return exc.connection_invalidated or isinstance(exc, OperationalError)
