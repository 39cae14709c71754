"""Database access: one engine per app, a session scoped to the app context, the shared metadata.

Every module's models derive from :class:`Base`, so Alembic and the migration test see one metadata.
Code uses :data:`session` (an SQLAlchemy ``scoped_session``); it binds to the current app's engine
and is removed when the app context ends.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, cast, overload

from flask import Flask
from flask.globals import app_ctx
from sqlalchemy import JSON, DateTime, MetaData, Table, Text, TypeDecorator, create_engine, event, literal_column
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import URL, Connection, CursorResult, Engine, Result, make_url
from sqlalchemy.orm import DeclarativeBase, Session, scoped_session, sessionmaker
from sqlalchemy.pool import StaticPool

from trellis import current, sqlite_waits, statements

log = logging.getLogger(__name__)
C = TypeVar("C", bound=Callable[[], None])

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
    # Every model is mapped to a Table (none to a join or a select), so its insert()/update()/delete() exist.
    __table__: ClassVar[Table]


class _RandomHex:
    """Random hex text from the operating system's generator (as ``uuid4`` and ``secrets`` use), read
    ``size`` bytes at a time and handed out 32 characters per id: one system call serves many ids where
    ``uuid4`` makes one per id (``bench/results/core.md#random-ids``). A forked child starts with nothing
    read, so no two processes hand out the same ids; the lock keeps two threads from taking the same piece."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._lock = threading.Lock()  # a new one: another thread may have held the parent's at the fork
        self._text, self._at = "", 0

    def take(self) -> str:
        """32 hex characters (128 random bits) never handed out before by this process."""
        with self._lock:
            at = self._at
            if at >= len(self._text):
                self._text, at = os.urandom(self._size).hex(), 0
            self._at = at + 32
            return self._text[at : at + 32]


_random_hex = _RandomHex()


def new_id() -> str:
    """Opaque record id: 32 hex characters, 128 random bits."""
    return _random_hex.take()


def utcnow() -> datetime:
    return datetime.now(UTC)


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched: ``Session.execute`` types its result as a plain ``Result``,
    which is the driver cursor's ``CursorResult`` for such a statement."""
    return cast("CursorResult[Any]", result).rowcount


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


@overload
def isoformat(value: datetime) -> str: ...
@overload
def isoformat(value: None) -> None: ...
@overload
def isoformat(value: datetime | None) -> str | None: ...
def isoformat(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def normalise_url(url: str, async_mode: str) -> URL:
    """PostgreSQL always goes through psycopg2, the driver we install.

    ``postgresql://`` and the contract's ``postgresql+psycopg://`` are accepted; under eventlet
    psycopg2 is made cooperative. psycopg 3 blocks eventlet's hub with its default wait function (``poll()``
    in C), cooperates only with ``PSYCOPG_WAIT_FUNC=wait_select`` set in the environment, and spends more
    client CPU per statement (``bench/results/core.md#psycopg2``).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg2":
        log.info("using psycopg2 for PostgreSQL (asked for %s, async mode %s)", parsed.drivername, async_mode)
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def make_engine(url: str, async_mode: str = "threading", pool_size: int = 32) -> Engine:
    parsed = normalise_url(url, async_mode)
    kwargs: dict[str, Any] = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": sqlite_waits.WAIT_SECONDS}
        if async_mode == "eventlet" and _eventlet_patched():
            kwargs["connect_args"].update(sqlite_waits.connect_args())
        if parsed.database in (None, "", ":memory:"):
            kwargs["poolclass"] = StaticPool
    else:
        # No pre-ping: it costs a round trip per checkout; stale connections are recycled instead.
        # The pool keeps as many connections as an eventlet worker serves requests at once: an overflow
        # connection is closed on check-in, so a too-small pool opens a new PostgreSQL backend per request.
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800)
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
    if not isinstance(dbapi_connection, sqlite_waits.GreenWaitConnection):  # it waits greenly instead
        cursor.execute(f"PRAGMA busy_timeout={int(sqlite_waits.WAIT_SECONDS * 1000)}")
    cursor.close()


# The execution option that begins a SQLite transaction with foreign keys off (migrations, a restore).
SQLITE_FOREIGN_KEYS_OFF = "trellis_sqlite_foreign_keys_off"


def _sqlite_begin(connection: Any) -> None:
    if connection.get_execution_options().get(SQLITE_FOREIGN_KEYS_OFF) and not isinstance(
        connection.engine.pool, StaticPool
    ):
        # Batch mode recreates a table and drops the old one; with foreign keys on, that DROP first deletes
        # every row, cascading to the children (an upgrade from webhooks_0001 lost every delivery). The pragma
        # is a no-op inside a transaction, so it goes before BEGIN, on a connection closed afterwards instead
        # of pooled; `foreign_key_violation` takes the checks' place before the commit.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.detach()
    connection.exec_driver_sql("BEGIN")


def foreign_key_violation(connection: Any) -> str | None:
    """On SQLite, the first row that points to a missing parent, described (None when there is none, and
    always on other databases, which never turn their checks off)."""
    if connection.dialect.name != "sqlite":
        return None
    row = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
    return None if row is None else f"a row of {row[0]} references a missing row of {row[2]}"


def engine() -> Engine:
    return current.app().extensions["trellis"].engine


_ATOMIC = "trellis_atomic"  # in Session.info: an atomic() block is open; its value: a rollback happened in it


class _AppSession(Session):
    """A session that binds to the engine of the app in whose context it was created."""

    def get_bind(self, mapper: Any = None, clause: Any = None, **kw: Any) -> Any:
        if self.bind is not None:
            return self.bind
        return engine()

    def commit(self) -> None:
        if _ATOMIC in self.info:  # the block commits at its end; what the code asked commits with it
            self.flush()
            return
        super().commit()

    def rollback(self) -> None:
        if _ATOMIC in self.info:
            self.info[_ATOMIC] = True  # the block's work is gone: it must not end as if it had succeeded
        super().rollback()


class AtomicRolledBack(RuntimeError):
    """Code inside :func:`atomic` rolled the transaction back and went on as if nothing happened."""


@contextmanager
def atomic(commit: bool = True) -> Iterator[None]:
    """One transaction around code written to commit on its own (the admin services): inside the block
    ``session.commit()`` only flushes, and the block commits at its end, or rolls everything back when it
    raises. After-commit callbacks wait for that commit. A service's own rollback ends the block's work, so
    the block then refuses to commit (:class:`AtomicRolledBack`) unless the error goes on up.
    ``commit=False``: a dry run, rolled back at the end whatever happens."""
    current_session = session()
    if _ATOMIC in current_session.info:
        raise RuntimeError("atomic() blocks do not nest")
    current_session.info[_ATOMIC] = False
    try:
        yield
        if current_session.info[_ATOMIC]:
            raise AtomicRolledBack("the transaction was rolled back inside an atomic() block")
    except BaseException:
        current_session.info.pop(_ATOMIC, None)
        current_session.rollback()
        raise
    current_session.info.pop(_ATOMIC, None)
    if commit:
        current_session.commit()
    else:
        current_session.rollback()


def in_atomic() -> bool:
    """Whether an :func:`atomic` block is open on the core session."""
    return session.registry.has() and _ATOMIC in session().info


def _scope() -> int:
    try:
        return id(app_ctx._get_current_object())  # type: ignore[attr-defined]  # the LocalProxy's own method
    except RuntimeError:  # outside an app context (scripts, test set-up): one session per thread
        return threading.get_ident()


session: scoped_session[Session] = scoped_session(
    sessionmaker(class_=_AppSession, expire_on_commit=False), scopefunc=_scope
)


def in_transaction() -> bool:
    """Whether the core session has a transaction open (without making a session for the question)."""
    return session.registry.has() and session().in_transaction()


def flushed_connection() -> Connection:
    """The session's connection, its pending ORM changes flushed first (what the session's own queries see,
    for a statement run on the connection itself); within ``no_autoflush``, unflushed as there."""
    current = session()
    if current.autoflush:
        current.flush()
    return current.connection()


def commit() -> None:
    """Commit the core session's transaction, if one is open. A write that committed on its own (the
    Database module's single-document writes on PostgreSQL) leaves nothing to commit, and making a
    session to begin and commit an empty transaction would be work for nothing
    (``bench/results/core.md#empty-commits``)."""
    if in_transaction():
        session.commit()


_AFTER_COMMIT = "trellis_after_commit"  # in Session.info: the callbacks waiting for the outer commit


def after_commit(callback: Callable[[], object], key: Hashable | None = None) -> None:
    """Call ``callback()`` once the core session's current transaction commits; a rollback drops it.

    Savepoints are ignored: SQLAlchemy signals their release and rollback with the same events, but what
    they hold commits or not with the outer transaction. With ``key``, a callback registered again under
    the same key in the same transaction is not added twice (one cache token or one event-log poke per
    commit, however many writes it holds). One listener pair on the session class serves every
    transaction: registering a listener per write costs a create dearly (same section), and a ``once=True``
    listener fires only for a session's first transaction (SQLAlchemy keeps it registered, so
    registering it again is a no-op)."""
    pending: dict[Hashable, Callable[[], object]] = session().info.setdefault(_AFTER_COMMIT, {})
    pending.setdefault(object() if key is None else key, callback)


_BEFORE_COMMIT = "trellis_before_commit"


def before_commit(callback: C, key: Hashable | None = None) -> C:
    """Call ``callback()`` as the core session's current transaction is about to commit, inside it (its
    last statements: the event log's counter bumps, whose row locks are then held only for the commit);
    a rollback drops it. ``key`` and savepoints as in :func:`after_commit`; returns the callback kept under
    ``key`` (the first one registered), so a caller can add to what it will do. A failing callback fails
    the commit (the session is then rolled back by its caller, as for any failed statement)."""
    pending: dict[Hashable, Any] = session().info.setdefault(_BEFORE_COMMIT, {})
    return pending.setdefault(object() if key is None else key, callback)


def _run_before_commit(target: Session) -> None:
    if target.in_nested_transaction():
        return
    for callback in target.info.pop(_BEFORE_COMMIT, {}).values():
        callback()


def _run_after_commit(target: Session) -> None:
    if target.in_nested_transaction():
        return
    for callback in target.info.pop(_AFTER_COMMIT, {}).values():
        try:
            callback()
        except Exception:  # the data is committed: one failing follow-up must not stop the others
            log.exception("a callback after the commit failed")


def _drop_after_commit(target: Session) -> None:
    if not target.in_nested_transaction():
        target.info.pop(_AFTER_COMMIT, None)
        target.info.pop(_BEFORE_COMMIT, None)


event.listen(_AppSession, "before_commit", _run_before_commit)
event.listen(_AppSession, "after_commit", _run_after_commit)
event.listen(_AppSession, "after_rollback", _drop_after_commit)


def init_app(app: Flask) -> Engine:
    eng = make_engine(app.config["DATABASE_URL"], app.config["ASYNC_MODE"], int(app.config["DATABASE_POOL_SIZE"]))
    statements.prepare_statements(eng, bool(app.config.get("DATABASE_PREPARE", True)))

    @app.teardown_appcontext
    def _remove_session(_exc: BaseException | None) -> None:
        session.remove()

    return eng


def sql_text(value: str) -> Any:
    """A name made of validated parts (a topic, a schema name) as an SQL string literal: a statement built
    with it is compiled once and runs with the caller's own parameters only."""
    return literal_column("'" + value.replace("'", "''") + "'", Text)


def is_postgresql(bind: Any = None) -> bool:
    return (bind or engine()).dialect.name == "postgresql"
