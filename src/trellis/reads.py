"""Reads that need no transaction: one pooled connection per request at most, read again once on a
fresh connection when PostgreSQL went away meanwhile.

The Database module's document reads, the user lookup of every signed-in request and the cache
generations' fallback read all come through here. The test fixtures replace an app's provider
(``Trellis.reads``) with one that reads inside the test's own rolled-back transaction.
"""

from __future__ import annotations

import contextlib
import logging
from collections import namedtuple
from collections.abc import Callable, Iterator
from time import monotonic
from typing import Any, Protocol, TypeVar

from flask import Flask
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, OperationalError

from trellis import db, statements
from trellis.errors import APIError

from . import current

log = logging.getLogger(__name__)
T = TypeVar("T")


class ReadProvider(Protocol):
    """Where an app's reads get their connection (``Trellis.reads``)."""

    retryable: bool  # a failed read may run again on a fresh connection

    def open(self) -> Connection: ...

    def close(self, connection: Connection) -> None: ...

    def transaction(self) -> contextlib.AbstractContextManager[Connection]: ...

    def snapshot(self) -> contextlib.AbstractContextManager[Connection]: ...


class ReadConnections:
    """The production provider: a pooled connection that needs no transaction.

    On PostgreSQL they come from a second pool of the same database whose connections are in
    autocommit mode for life (psycopg2's client-side flag, set once when a connection is made): each
    statement sees what is committed, no BEGIN/ROLLBACK round trips are spent, and check-in has
    nothing to reset. Sharing the session's pool with an ``AUTOCOMMIT`` execution option instead would
    set the flag on every checkout and restore the isolation level on every check-in
    (``bench/results/core.md#read-connections``). The pool owns the connections' life: recycling, and
    after a disconnect the invalidation of every older connection. On SQLite reads are local and use the main engine.

    A request's connection goes back to a short list of idle ones kept checked out (last in, first out),
    not to the pool: SQLAlchemy's checkout and check-in (``Engine.connect``, ``Connection.close``: the
    pool's queue and lock, a fairy and its weakref finaliser, the connection record) cost far more than
    taking one from a list (``bench/results/core.md#read-connections``).
    What the pool did at checkout is done here instead: a connection idle longer than
    ``IDLE_SECONDS`` goes back to the pool (which recycles it when it is due), and once one connection
    is found dead (it comes back invalidated) every idle one goes back, so the pool replaces each one
    older than the disconnect at its next checkout, as it does for its own.
    """

    IDLE_SECONDS = 10.0
    MAX_IDLE = 16

    retryable = True  # a statement on its own is safe to run again on a fresh connection

    def __init__(self, engine: Engine, pool_size: int = 16) -> None:
        self.base = engine
        self.engine = engine
        if db.is_postgresql(engine):
            self.engine = create_engine(
                engine.url,
                isolation_level="AUTOCOMMIT",
                pool_reset_on_return=None,
                pool_size=pool_size,
                max_overflow=pool_size,
                pool_recycle=1800,
            )
            # The reads' connections prepare their statements when the app's main engine does.
            statements.prepare_statements(self.engine, statements.preparing(engine))
        self._idle: list[tuple[Connection, float]] = []  # (connection, when it went idle), newest last
        self._keeps = self.engine is not engine  # PostgreSQL's own pool: nothing to keep on SQLite

    def open(self) -> Connection:
        while True:
            try:
                connection, since = self._idle.pop()
            except IndexError:  # none idle (the check and the pop are one step for threads too)
                return self.engine.connect()
            if monotonic() - since < self.IDLE_SECONDS:
                return connection
            connection.close()  # older ones are older still: the pool decides about them
            self.release_idle()

    def close(self, connection: Connection) -> None:
        if not self._keeps or len(self._idle) >= self.MAX_IDLE or connection.closed:
            connection.close()
            return
        # Invalidated through the Connection, or through its pool entry (``statements.execute_compiled``,
        # ``cache._read_table``): a disconnect, so the idle ones predate it too.
        dead = connection.invalidated or not connection.connection.is_valid
        if not dead and connection.in_transaction():
            # SQLAlchemy began its own transaction object at the first ``execute``; on an autocommit
            # connection its rollback sends nothing (psycopg2 has no transaction to end).
            try:
                connection.rollback()
            except DBAPIError:
                dead = True
        if dead:
            connection.close()
            self.release_idle()
            return
        self._idle.append((connection, monotonic()))

    def release_idle(self) -> None:
        """Give every idle connection back to the pool."""
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()

    def dispose(self) -> None:
        """Close every connection of the reads' pool, the idle ones included (an app's end, tests)."""
        self.release_idle()
        self.engine.dispose()

    def transaction(self) -> contextlib.AbstractContextManager[Connection]:
        return self.base.begin()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction whose statements all see one snapshot. PostgreSQL: on a read connection,
        one round trip opens it (``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``) and one ends it, with
        no checkout of the main pool (psycopg2 would send its own BEGIN, then the isolation level: one
        round trip more). SQLite: a transaction of the main engine (reads in one see one snapshot)."""
        if not self._keeps:
            with self.base.begin() as connection:
                yield connection
            return
        connection = self.open()
        try:
            try:
                connection.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield connection
            except BaseException:
                _end(connection, "ROLLBACK", raising=False)  # the first error is the one to tell
                raise
            _end(connection, "COMMIT", raising=True)
        finally:
            self.close(connection)


def _end(connection: Connection, command: str, raising: bool) -> None:
    """End a transaction opened by hand on an autocommit connection. If that fails, the connection is
    invalidated: its transaction may still be open, so it must not serve another reader."""
    try:
        connection.exec_driver_sql(command)
    except DBAPIError:
        connection.invalidate()
        if raising:
            raise


_READ_KEY = "trellis_read_connection"


def provider() -> ReadProvider:
    """The current app's provider of read connections."""
    return current.app().extensions["trellis"].reads


def connection() -> Connection:
    """This request's connection for reads that need no transaction (opened on first use, given
    back when the app context ends)."""
    request_globals = current.g()
    connection = request_globals.get(_READ_KEY)
    if connection is None:
        connection = provider().open()
        setattr(request_globals, _READ_KEY, connection)
    return connection


def release() -> None:
    """Give this request's read connection back (the app context's teardown does)."""
    connection = current.g().pop(_READ_KEY, None)
    if connection is not None:
        provider().close(connection)


def init_app(app: Flask) -> None:
    """Give the read connection back when the app context ends. Call it after ``db.init_app``: teardowns
    run last registered first, so the read connection goes back before the session is removed."""
    app.teardown_appcontext(lambda _exc: release())


def transaction() -> contextlib.AbstractContextManager[Connection]:
    """A short transaction of its own on the main engine, outside the session's: bookkeeping after the
    session committed (an after-commit callback cannot use the session)."""
    return provider().transaction()


def reading(func: Callable[[Connection], T]) -> T:
    """Run ``func(connection())``. If the connection is dead or cannot be had (PostgreSQL
    restarted), run it once more on a fresh one (reads are idempotent); if that fails too, answer 503
    with ``Retry-After``. SQLAlchemy's pool, told of the disconnect, replaces every older connection."""
    try:
        return func(connection())
    except DBAPIError as exc:
        if not provider().retryable or not _lost(exc):
            raise
        log.warning("database connection lost (%s); reading again on a new one", exc.orig.__class__.__name__)
    release()
    try:
        return func(connection())
    except DBAPIError as exc:
        if not _lost(exc):
            raise
        release()
        raise APIError(503, "The database is unavailable; try again shortly", headers={"Retry-After": "1"}) from None


def read_one(statement: Any, **params: Any) -> Any:
    """One row (or None) of a read that needs no transaction, unless the session has one open: then
    on the session, which sees the transaction's own writes. Its columns are attributes, as on
    SQLAlchemy's ``Row``."""
    if db.in_transaction():  # asked without making a session: most requests never need one
        return db.session.execute(statement, params).one_or_none()
    return reading(lambda connection: _one(connection, statement, params))


_STATEMENTS: dict[Any, Any] = {}  # read_one's statements (module constants): their SQL and row shape


def _one(connection: Connection, statement: Any, params: dict[str, Any]) -> Any:
    """The driver's cursor (``statements.execute_compiled``), its row given the statement's column names and
    SQLAlchemy's result conversions (a timestamp's time zone): the user lookup of every signed-in request
    went through SQLAlchemy's execution and result layers for one row, a visible share of a user's get by
    id (``bench/results/core.md#one-row-on-the-cursor``). Where SQLAlchemy ran it (SQLite, an expanding
    parameter) its rows are SQLAlchemy's."""
    rows = statements.execute_compiled(connection, statement, params, _STATEMENTS)
    if len(rows) > 1:
        raise MultipleResultsFound("Multiple rows were found when one or none was required")
    if not rows or isinstance(rows[0], Row):
        return rows[0] if rows else None
    shape = _STATEMENTS.get(("row", connection.dialect.name, statement))
    if shape is None:
        dialect = connection.dialect
        columns = list(statement.selected_columns)
        row_class = namedtuple("Row", [column.key for column in columns], rename=True)  # type: ignore[misc]
        convert = tuple(
            (index, process)
            for index, column in enumerate(columns)
            if (process := column.type.dialect_impl(dialect).result_processor(dialect, None)) is not None
        )
        shape = _STATEMENTS[("row", connection.dialect.name, statement)] = (row_class, convert)
    named, convert = shape
    row = list(rows[0])
    for index, process in convert:
        row[index] = process(row[index])
    return named(*row)


def _lost(exc: DBAPIError) -> bool:
    """A dead connection, or none to be had (the server is down or restarting)."""
    return exc.connection_invalidated or isinstance(exc, OperationalError)
