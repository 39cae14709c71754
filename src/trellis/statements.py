"""Statements run straight on the driver where SQLAlchemy's execution layer costs more than the round trip:
one compiled statement with one row of parameters (:func:`execute_compiled`) and many rows in one
``INSERT`` (:func:`insert_rows`). Both fall back to plain SQLAlchemy on SQLite (in-process).

A connection found dead invalidates the pool's older ones through SQLAlchemy's private
``Pool._invalidate``, checked against SQLAlchemy 2.1.9 (``CHECKED``, as in :mod:`trellis.server`;
``tests/test_server_libraries.py`` exercises it)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy import Table, event
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    import psycopg2.extensions

CHECKED = {"sqlalchemy": "2.1.9"}  # see trellis.server
log = logging.getLogger(__name__)


def execute_compiled(
    connection: Connection, statement: Any, parameters: dict[str, Any], cache: dict[Any, Any] | None = None
) -> list[Any]:
    """Run one statement with one row of parameters on ``connection`` and return its rows (``RETURNING``).

    On PostgreSQL the SQL is compiled once (kept in ``cache``, keyed by the statement) and run straight
    on the DB-API cursor: SQLAlchemy's execution layer (context, result wrapping, per-parameter
    processing) cost a create more CPU than the round trip itself (``bench/results/core.md#compiled-statements``).
    Parameters are plain values; a dict is sent as JSON text (the JSON columns' parameters). Outside a
    transaction block it is also prepared once per connection on the server (see "statements prepared on
    the server" below). DB-API errors come out as SQLAlchemy's (``IntegrityError`` …), as from
    ``connection.execute``, and a connection found dead is invalidated with
    every older one of the pool (after a PostgreSQL restart the next requests get fresh connections).
    SQLAlchemy's ``before_cursor_execute`` and ``after_cursor_execute`` listeners are called, with no
    execution context. SQLite, and a statement with an expanding parameter, run through SQLAlchemy.
    """
    # A compiled form belongs to one dialect: a process may serve a SQLite and a PostgreSQL app (a backup
    # restored across databases), and a cache of module-level statements is shared by both.
    key = ("sql", connection.dialect.name, statement)
    compiled = None if cache is None else cache.get(key)
    if compiled is None:
        compiled = _direct_form(statement, connection.dialect)
        if cache is not None:
            cache[key] = compiled
    if compiled is _THROUGH_SQLALCHEMY:
        result = connection.execute(statement, parameters)
        return list(result.all()) if result.returns_rows else []  # typed a Sequence, though a list
    sql, own, convert = compiled.sql, compiled.own, compiled.convert
    values = {**own, **parameters} if own else dict(parameters)
    for name, process in convert.items():
        if name in values:
            values[name] = process(values[name])
    for name, value in values.items():  # an untyped parameter holding a dict: a JSON column's value
        if isinstance(value, dict):
            values[name] = json.dumps(value)
    fairy = connection.connection
    raw = cast("psycopg2.extensions.connection", fairy.dbapi_connection)  # only PostgreSQL's statements come here
    dispatch = connection.dispatch
    try:
        with raw.cursor() as cursor:
            # SQLAlchemy's cursor events still see the statement (tracing, tests that count statements);
            # no execution context was made, so theirs is None.
            if dispatch.before_cursor_execute:
                dispatch.before_cursor_execute(connection, cursor, sql, values, None, False)
            if compiled.prepare and raw.autocommit and connection.engine in _PREPARING:
                run_prepared(cursor, fairy.info, sql, values, compiled.leading)
            else:
                cursor.execute(compiled.leading + sql, values)
            rows = cursor.fetchall() if cursor.description else []
            if dispatch.after_cursor_execute:
                dispatch.after_cursor_execute(connection, cursor, sql, values, None, False)
            return rows
    except raw.Error as exc:  # psycopg2's base class, as the connection exposes it
        # psycopg2's Error is the driver module's Error that SQLAlchemy's DBAPI types name abstractly
        dead = connection.dialect.is_disconnect(exc, fairy.dbapi_connection, None)  # type: ignore[arg-type]
        if dead:
            # As SQLAlchemy's own Connection does on a disconnect: this connection, and every older one of
            # the pool recycled at its next checkout. Private, because no public API does that job:
            # Connection.invalidate drops this connection only, and Engine.dispose replaces the whole pool,
            # closing at once the fresh connections other requests opened since the restart (each of them,
            # meeting its own dead connection, would dispose again: the race SQLAlchemy left dispose for,
            # its issue 2985).
            connection.engine.pool._invalidate(connection.connection, exc)
        raise DBAPIError.instance(
            sql, values, exc, raw.Error, connection_invalidated=dead, dialect=connection.dialect
        ) from exc


@dataclass(frozen=True)
class _Direct:
    """A statement as the driver runs it: its SQL, its own bound values (``version + 1``'s 1, which go with
    the caller's parameters) and the conversions SQLAlchemy would apply to some parameters on their way to
    the driver (a JSON type's serialiser, a Boolean's check), by name."""

    sql: str
    own: dict[str, Any]
    convert: dict[str, Callable[[Any], Any]]
    prepare: bool = True  # False: the statement asked for UNPREPARED
    leading: str = ""  # "<sql>; " sent first, in the same simple query (see preceded_by), or nothing


_THROUGH_SQLALCHEMY = _Direct("", {}, {})  # see _direct_form


def _direct_form(statement: Any, dialect: Any) -> _Direct:
    """``statement`` as the driver runs it, or ``_THROUGH_SQLALCHEMY`` when only SQLAlchemy's execution can
    run it: on SQLite (in-process), or with an expanding parameter (``IN``: its SQL depends on the values).
    Worked out once per statement."""
    if dialect.name != "postgresql":
        return _THROUGH_SQLALCHEMY
    made = statement.compile(dialect=dialect)
    if any(bind.expanding for bind in made.binds.values()):
        return _THROUGH_SQLALCHEMY
    convert = {}
    for name, bind in made.binds.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            convert[name] = process
    own = {name: bind.value for name, bind in made.binds.items() if not bind.required}
    options = statement.get_execution_options()
    leading = options.get("trellis_leading")
    return _Direct(str(made), own, convert, options.get("trellis_prepare", True), f"{leading}; " if leading else "")


# ---- statements prepared on the server ---------------------------------------------------------------
# psycopg2 has no protocol-level preparation, so it is SQL's own: ``PREPARE name AS <sql with $n>`` once
# per connection, then ``EXECUTE name (<values>)``. It saves PostgreSQL's parse, analysis and (once it
# settles on the generic plan, after five runs) planning of every run
# (``bench/results/peer.md#statements-prepared-once-per-connection-trellisstatements``).
#
# What is prepared: every statement of :func:`execute_compiled` but those with the execution option
# ``UNPREPARED``, and a statement run through SQLAlchemy with the execution option ``PREPARE``
# (``statement.execution_options(**statements.PREPARE)``: the list pages and counts, one SQL text per
# query shape). A statement whose best plan depends on a parameter's value more than its generic plan can
# tell (who the caller is, under access control) is left unprepared: after five runs PostgreSQL may keep
# one plan for every caller, and the plan a broad caller's runs leave is wrong for a narrow one.
#
# Statements are prepared only outside a transaction block (autocommit: the read connections; PostgreSQL
# runs one statement atomically on its own): there a statement that fails because of its preparation can
# be prepared again and run once more, which a transaction, aborted by the error, cannot. PostgreSQL
# re-plans a prepared statement by itself after DDL on its tables, but fails it when the DDL changed what
# it answers or the types its parameters were given ("cached plan must not change result type"; an
# operator that no longer fits a column whose type changed).
#
# Each connection keeps the names it prepared in its pool entry's ``info``, which SQLAlchemy empties
# whenever the entry gets a new DBAPI connection (a PostgreSQL restart, recycling, an invalidation).
# Behind a pooler that hands each transaction another server connection (pgbouncer's transaction mode)
# the names are not where they were made: ``DATABASE_PREPARE=false`` there.

PREPARE = {"trellis_prepare": True}  # execution option: prepare this statement on the server
UNPREPARED = {"trellis_prepare": False}  # execution option: execute_compiled sends it as it is, planned each run


def preceded_by(sql: str) -> dict[str, str]:
    """Execution option for :func:`execute_compiled`: send ``sql`` (no parameters) before the statement, in
    the same simple query, so that both run in one implicit transaction and the statement, prepared or
    not, reads with a snapshot taken after ``sql`` ran (a lock it took is held by then). A statement
    cannot be prepared together with another one: this keeps the statement preparable."""
    return {"trellis_leading": sql}


_PREPARED_KEY = "trellis_prepared"  # in a pool entry's info: the names prepared on that connection
_MAX_PER_CONNECTION = 512  # clients choose list shapes: past this many, a connection starts again
_PREPARING: weakref.WeakSet[Engine] = weakref.WeakSet()
_PLAIN: set[str] = set()  # statements PostgreSQL cannot prepare (a parameter of unknown type)
# Errors that a statement's preparation may cause and a fresh preparation cures: its result or parameter
# types no longer fit the tables (0A000, 42804, 42883), or the name is not there (26000: a pooler, a
# DISCARD ALL). Running again after a new PREPARE is safe: the statement failed before it did anything.
_REPREPARE = frozenset({"0A000", "42804", "42883", "26000"})
_UNPREPARABLE = frozenset({"42P18", "42P08"})  # could not determine / inconsistent parameter type
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@dataclass(frozen=True)
class Prepared:
    name: str
    prepare: str  # PREPARE name AS <sql with $1…>
    execute: str  # EXECUTE name (%(a)s, …): psycopg2 fills in the values


@functools.lru_cache(maxsize=2048)
def prepared_form(sql: str) -> Prepared:
    """``sql`` (psycopg2's pyformat) as a ``PREPARE`` and its ``EXECUTE``. The name is a digest of the SQL,
    so the same statement has the same name on every connection. The ``PREPARE`` keeps psycopg2's
    escaped percent signs: it travels with the ``EXECUTE`` and its values."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "%%"
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    body = _PLACEHOLDER.sub(number, sql)
    name = "t_" + hashlib.blake2b(sql.encode(), digest_size=12).hexdigest()
    values = ", ".join(f"%({key})s" for key in order)
    return Prepared(name, f"PREPARE {name} AS {body}", f"EXECUTE {name} ({values})" if values else f"EXECUTE {name}")


def prepare_statements(engine: Engine, enabled: bool = True) -> None:
    """Let (or stop) ``engine``'s autocommit connections prepare statements on the server (PostgreSQL)."""
    if enabled and engine.dialect.name == "postgresql":
        _PREPARING.add(engine)
        if not event.contains(engine, "do_execute", _do_execute):
            event.listen(engine, "do_execute", _do_execute)
    else:
        _PREPARING.discard(engine)


def preparing(engine: Engine) -> bool:
    return engine in _PREPARING


def _do_execute(cursor: Any, sql: str, parameters: Any, context: Any) -> bool | None:
    """SQLAlchemy's single execution on PostgreSQL: prepared when the statement asks for it (``PREPARE``)
    and the connection is in autocommit; otherwise SQLAlchemy's own ``cursor.execute``."""
    if not context.execution_options.get("trellis_prepare") or not cursor.connection.autocommit:
        return None
    connection = context.root_connection
    if connection.engine not in _PREPARING:
        return None
    run_prepared(cursor, connection.connection.info, sql, parameters)
    return True


def run_prepared(cursor: Any, info: dict[str, Any], sql: str, values: Any, leading: str = "") -> None:
    """EXECUTE ``sql``, PREPAREd first if this connection has not got it yet: both in one round trip (one
    simple query of two statements; ``leading``, SQL text ending in ``"; "``, runs between them: see
    :func:`preceded_by`). On an error that a new preparation cures, every name of the connection is
    dropped (``DEALLOCATE ALL``: what one statement's DDL changed may concern others too) and the statement
    prepared and run once more; a second failure is the statement's own. A PREPARE is not undone when the
    EXECUTE after it fails (a unique violation): the name is then found already there."""
    if sql in _PLAIN:
        cursor.execute(leading + sql, values)
        return
    prepared = prepared_form(sql)
    names: set[str] = info.setdefault(_PREPARED_KEY, set())
    prepared_again = False
    while True:
        known = prepared.name in names
        if not known and len(names) >= _MAX_PER_CONNECTION:
            cursor.execute("DEALLOCATE ALL")
            names.clear()
        try:
            if known:
                cursor.execute(leading + prepared.execute, values)
            else:
                cursor.execute(f"{prepared.prepare}; {leading}{prepared.execute}", values)
        except Exception as exc:
            state = getattr(exc, "pgcode", None)
            if not known and state == "42P05":  # duplicate_prepared_statement: made by an earlier failed run
                names.add(prepared.name)
                continue
            if not known and state in _UNPREPARABLE:
                _PLAIN.add(sql)
                cursor.execute(leading + sql, values)
                return
            if prepared_again or state not in _REPREPARE:
                raise
            log.info("prepared statement %s failed (%s); preparing it again", prepared.name, state)
            cursor.execute("DEALLOCATE ALL")
            names.clear()
            prepared_again = True
            continue
        names.add(prepared.name)
        return


def insert_rows(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys, column names) into ``table`` in one statement.

    On PostgreSQL each column travels as one array parameter and the server unnests them, a statement
    compiled once per table and columns. SQLAlchemy's multi-row INSERT ("insertmanyvalues") rewrites its
    placeholders row by row in Python, a cost that showed while a server queued webhook deliveries
    (``bench/results/core.md#multi-row-inserts``). SQLite: an executemany (in-process).
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


def existing_ids(connection: Connection, *wanted: tuple[sa.Column[Any], Sequence[str]]) -> list[set[str]]:
    """For each ``(column, ids)`` (a primary key and the ids asked about), which of the ids are values of the
    column, all read in one statement on ``connection``: the check of every write that names users and
    teams, one round trip however many kinds it names. Never remembered: an id deleted by another process
    is gone for the next call. The statement is built and compiled once per columns and dialect and, on
    PostgreSQL, run on the driver's cursor with each list as one array (``= ANY``): through the ORM
    session its construction, compilation cache lookup and result wrapping cost more than the round trip."""
    asked = [(position, column, list(ids)) for position, (column, ids) in enumerate(wanted) if ids]
    found: list[set[str]] = [set() for _ in wanted]
    if not asked:
        return found
    statement = _existence(tuple(column for _, column, _ in asked), connection.dialect.name)
    parameters = {f"ids{k}": ids for k, (_, _, ids) in enumerate(asked)}
    for which, value in execute_compiled(connection, statement, parameters, _EXISTENCE):
        found[asked[which][0]].add(value)
    return found


_EXISTENCE: dict[Any, Any] = {}  # compiled forms of the existence statements (execute_compiled's cache)


@functools.lru_cache(maxsize=64)
def _existence(columns: tuple[sa.Column[Any], ...], dialect: str) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """``SELECT k, column WHERE column is one of :ids<k>`` for each column, joined by UNION ALL."""
    parts = []
    for k, column in enumerate(columns):
        if dialect == "postgresql":
            one_of: sa.ColumnElement[bool] = column == sa.any_(
                sa.bindparam(f"ids{k}", type_=postgresql.ARRAY(sa.String))
            )
        else:  # no arrays: an expanding IN, run through SQLAlchemy
            one_of = column.in_(sa.bindparam(f"ids{k}", expanding=True))
        parts.append(sa.select(sa.literal_column(str(k)), column).where(one_of))
    return parts[0] if len(parts) == 1 else sa.union_all(*parts)
