"""Statements run straight on the driver where SQLAlchemy's execution layer costs more than the round trip:
one compiled statement with one row of parameters (:func:`execute_compiled`) and many rows in one
``INSERT`` (:func:`insert_rows`). Both fall back to plain SQLAlchemy on SQLite (in-process).

A connection found dead invalidates the pool's older ones through SQLAlchemy's private
``Pool._invalidate``, checked against SQLAlchemy 2.1.9 (``CHECKED``, as in :mod:`trellis.server`;
``tests/test_server_libraries.py`` exercises it)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

CHECKED = {"sqlalchemy": "2.1.9"}  # see trellis.server


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
