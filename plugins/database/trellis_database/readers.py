"""Autocommit connections for the document routes' reads (PostgreSQL).

A document GET needs no ORM session and no transaction: in psycopg2's autocommit mode (a
client-side flag; SQLAlchemy's AUTOCOMMIT isolation level would cost two server round trips of its
own) each statement sees what is committed, with no BEGIN/ROLLBACK round trips. A document read
takes a :class:`Reader` in the route's access guard (:func:`begin`) and gives it back in
``teardown_request``.

Readers are kept between requests on a free list: a checkout from SQLAlchemy's pool and its
check-in cost more than the primary-key read itself (pool events, a queue with its lock, the reset;
see bench/results/database.md). The connections under them come from that pool, so its size and
timeout still bound them. A reader that broke, or outlived ``pool_recycle``, goes back to the pool,
whose check-in listener (:func:`end_read_only`) clears the autocommit flag first.

Not when the session is bound to an outside connection (the test fixtures' rolled-back transaction,
whose rows only that connection sees), and not on SQLite, whose reads are local.
"""
from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from flask import current_app, g

from trellis import db

_KEY = "database_reader"
KEEP = 16  # idle readers kept per process: the concurrency one eventlet worker serves well


class Reader:
    """A request's autocommit connection: the pooled DB-API connection, and a Core Connection on it
    made the first time a statement needs SQLAlchemy's execution (get by id does not)."""

    __slots__ = ("_core", "born", "engine", "pooled")

    def __init__(self, engine: sa.Engine, pooled: Any) -> None:
        self.engine, self.pooled, self._core = engine, pooled, None
        # The connection's age, not the reader's: the pool may hand out one that is already old.
        record = getattr(pooled, "_connection_record", None)
        started = getattr(record, "starttime", None)
        self.born = time.monotonic() - (time.time() - started if started else 0.0)

    @property
    def dialect(self) -> Any:
        return self.engine.dialect

    @property
    def core(self) -> sa.Connection:
        if self._core is None:
            self._core = sa.Connection(self.engine, connection=self.pooled)
        return self._core

    def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self.core.execute(statement, parameters)

    def reusable(self, recycle: float) -> bool:
        """Ready for the next request: still connected, idle, and not older than ``recycle`` seconds."""
        if self._core is not None:
            if self._core.invalidated:
                return False
            if self._core.in_transaction():
                self._core.rollback()  # SQLAlchemy's bookkeeping only: in autocommit nothing is sent
        raw = self.pooled.dbapi_connection
        if raw is None or raw.closed or not raw.autocommit or raw.get_transaction_status() != 0:
            return False  # 0 is psycopg2's TRANSACTION_STATUS_IDLE
        return not self.expired(recycle)

    def age(self) -> float:
        """Seconds since the connection was opened."""
        return time.monotonic() - self.born

    def expired(self, recycle: float) -> bool:
        return recycle >= 0 and self.age() >= recycle

    def discard(self) -> None:
        """Back to SQLAlchemy's pool (which resets or drops the connection)."""
        if self._core is not None:
            self._core.close()  # also returns the pooled connection
        else:
            self.pooled.close()


class Readers:
    """The free list of one app's readers (a list: pop and append are atomic, greenlets or threads)."""

    def __init__(self, engine: sa.Engine, keep: int = KEEP) -> None:
        self.engine, self.keep, self._idle = engine, keep, []
        self.recycle = float(getattr(engine.pool, "_recycle", -1))

    def acquire(self) -> Reader:
        while self._idle:
            try:
                reader = self._idle.pop()
            except IndexError:  # another greenlet or thread took the last one
                break
            if not reader.expired(self.recycle):
                return reader
            reader.discard()  # idle past pool_recycle: back to the pool, which replaces it
        pooled = self.engine.raw_connection()
        pooled.dbapi_connection.autocommit = True
        return Reader(self.engine, pooled)

    def release(self, reader: Reader) -> None:
        try:
            reusable = reader.reusable(self.recycle)
        except (sa.exc.SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error):
            reusable = False
        if reusable and len(self._idle) < self.keep:
            self._idle.append(reader)
            return
        reader.discard()
        if not reusable and not reader.expired(self.recycle):
            # Broken, most likely with its siblings (the server restarted): drop the idle ones too,
            # as SQLAlchemy's pool does, rather than fail one request per stale connection.
            self.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().discard()


def init_app(app: Any) -> None:
    engine = app.extensions["trellis"].engine
    if engine.dialect.name == "postgresql":
        app.extensions["trellis_database_readers"] = Readers(engine)
        sa.event.listen(engine, "checkin", end_read_only)
    app.teardown_request(release)


def begin() -> None:
    """Give this request a reader, when reads may skip the session (see the module's docstring)."""
    readers = current_app.extensions.get("trellis_database_readers")
    if readers is None or _KEY in g:
        return
    if db.session.session_factory.kw.get("bind") is not None:  # sessions pinned to one connection
        return
    if db.session.registry.has() and db.session().bind is not None:
        return
    setattr(g, _KEY, readers.acquire())


def current() -> Reader | None:
    return g.get(_KEY)


def release(_exc: BaseException | None = None) -> None:
    reader = g.pop(_KEY, None)
    if reader is not None:
        current_app.extensions["trellis_database_readers"].release(reader)


def read_only() -> None:
    """Let this request's session skip BEGIN and ROLLBACK (two round trips) on PostgreSQL.

    For routes that only read through the session (custom endpoints): call it before the first
    query. Its connection is put in psycopg2's autocommit mode; :func:`end_read_only` clears the flag
    when the connection returns to the pool. Not when the session is bound to an outside connection,
    not once a statement has run, and not on SQLite.
    """
    session = db.session()  # the scoped session's current Session
    if session.bind is not None or session.in_transaction() or session.get_bind().dialect.name != "postgresql":
        return
    raw = session.connection().connection.dbapi_connection
    if raw is not None and hasattr(raw, "autocommit"):
        raw.autocommit = True


def end_read_only(dbapi_connection: Any, _record: Any) -> None:
    """Pool check-in listener: no connection goes back to the pool in autocommit mode."""
    if dbapi_connection is not None and not getattr(dbapi_connection, "closed", 1) and dbapi_connection.autocommit:
        dbapi_connection.autocommit = False
