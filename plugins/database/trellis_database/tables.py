"""Physical storage of documents: one table per schema, created and altered at run time.

Table ``dbdoc_<schema id>``: ``id``, ``data`` (the document as JSON/JSONB), ``created_at``,
``updated_at``, ``version``, plus one *generated column* ``f_<field>`` per single-valued field,
computed from ``data`` by the database itself and indexed. Why generated columns rather than bare
expression indexes: PostgreSQL only counts matches from the index alone (index-only scan) when the
indexed value is a column; with an expression over ``data`` every match is read from the heap (see
docs/database.md for the measurements). The column is ``NULL`` when the document has no value of the
field's type, so a document written before a type change never breaks a query.

Every statement runs in the caller's transaction (PostgreSQL and SQLite both have transactional DDL),
so a failed schema change leaves nothing behind, and tests that roll back their transaction stay
clean. Identifiers are generated from validated names only (``[A-Za-z0-9_]``); values are never
interpolated.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trellis.db import JSONType, UTCDateTime

from .fields import Field


def table_name(schema_id: str) -> str:
    return f"dbdoc_{schema_id}"


def index_name(table: str, column: str, unique: bool) -> str:
    digest = hashlib.sha1(f"{table}.{column}.{unique}".encode()).hexdigest()[:24]
    return f"dbix_{digest}"


@dataclass(frozen=True)
class ColumnState:
    """What physically exists for one field: its generated column and (optional) index."""

    column: str
    type: str
    index: str | None
    unique: bool

    def as_dict(self) -> dict[str, Any]:
        return {"column": self.column, "type": self.type, "index": self.index, "unique": self.unique}


def desired_columns(table: str, fields: dict[str, Field]) -> dict[str, ColumnState]:
    out: dict[str, ColumnState] = {}
    for name, field in fields.items():
        if not field.scalar:
            continue
        column = field.column
        assert column is not None  # a scalar field has its generated column
        index = index_name(table, column, field.unique) if field.indexed else None
        out[name] = ColumnState(column, field.type, index, field.unique)
    return out


# ---- SQL text of generated columns, per dialect --------------------------------------------------


def _generated(dialect: str, field_name: str, kind: str) -> tuple[str, str]:
    """(SQL type, expression) of the generated column of a ``kind`` field called ``field_name``."""
    if dialect == "postgresql":
        node, text = f"data -> '{field_name}'", f"data ->> '{field_name}'"
        if kind == "Number":
            return "numeric", f"CASE WHEN jsonb_typeof({node}) = 'number' THEN ({text})::numeric END"
        if kind == "Boolean":
            return "boolean", f"CASE WHEN jsonb_typeof({node}) = 'boolean' THEN ({text})::boolean END"
        # "C": byte order, the same order SQLite's BINARY collation gives, whatever the server locale.
        return 'text COLLATE "C"', f"CASE WHEN jsonb_typeof({node}) = 'string' THEN {text} END"
    path = f"'$.{field_name}'"
    if kind == "Number":
        return (
            "NUMERIC",
            f"CASE WHEN json_type(data, {path}) IN ('integer', 'real') THEN json_extract(data, {path}) END",
        )
    if kind == "Boolean":
        return "INTEGER", f"CASE WHEN json_type(data, {path}) IN ('true', 'false') THEN json_extract(data, {path}) END"
    return "TEXT", f"CASE WHEN json_type(data, {path}) = 'text' THEN json_extract(data, {path}) END"


def column_type(kind: str) -> sa.types.TypeEngine:
    if kind == "Number":
        return sa.Numeric(asdecimal=False)
    if kind == "Boolean":
        return sa.Boolean()
    return sa.String()


# ---- the Table object used to build queries -----------------------------------------------------


def make_table(name: str, columns: dict[str, ColumnState]) -> sa.Table:
    """A Core Table for queries (its own MetaData: run-time tables are not part of the migrations)."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("data", JSONType, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        *(sa.Column(state.column, column_type(state.type)) for state in columns.values()),
    )


# ---- DDL --------------------------------------------------------------------------------------------


def _quote(connection: Connection, identifier: str) -> str:
    return connection.dialect.identifier_preparer.quote(identifier)


def create_table(connection: Connection, name: str, fields: dict[str, Field]) -> dict[str, dict[str, Any]]:
    """Create the table with its generated columns (one statement) and indexes; returns the column state."""
    return create_from_state(connection, name, desired_columns(name, fields))


def create_from_state(connection: Connection, name: str, wanted: dict[str, ColumnState]) -> dict[str, dict[str, Any]]:
    """Create the table as a schema's stored column state describes it (a restore: ``SchemaRecord.storage``)."""
    dialect = connection.dialect.name
    generated = []
    for field_name, state in wanted.items():
        sql_type, expression = _generated(dialect, field_name, state.type)
        generated.append(
            f"{_quote(connection, state.column)} {sql_type} "
            f"GENERATED ALWAYS AS ({expression}) {_STORED[dialect == 'postgresql']}"
        )
    base = [
        f"{_quote(connection, column.name)} {column.type.compile(dialect=connection.dialect)} NOT NULL"
        + (" PRIMARY KEY" if column.primary_key else "")
        for column in make_table(name, {}).columns
    ]
    connection.exec_driver_sql(
        f"CREATE TABLE {_quote(connection, name)} (\n\t" + ",\n\t".join(base + generated) + "\n)"
    )
    # Default order of the list route (oldest first) without sorting the whole table.
    connection.exec_driver_sql(
        f"CREATE INDEX {_quote(connection, index_name(name, 'created_at', False))} "
        f"ON {_quote(connection, name)} (created_at, id)"
    )
    for state in wanted.values():
        _create_index(connection, name, state)
    return {field_name: state.as_dict() for field_name, state in wanted.items()}


_STORED = {True: "STORED", False: "VIRTUAL"}  # PostgreSQL only has stored ones; SQLite can only add virtual


def _create_index(connection: Connection, table: str, state: ColumnState) -> None:
    if not state.index:
        return
    column = _quote(connection, state.column)
    if state.unique:
        definition = f"({column})"
    elif connection.dialect.name == "postgresql":
        # Forward scan: ASC with missing values first; backward: DESC with them last (see query.py).
        definition = f"({column} NULLS FIRST, id)"
    else:
        definition = f"({column}, id)"
    unique = "UNIQUE " if state.unique else ""
    connection.exec_driver_sql(
        f"CREATE {unique}INDEX {_quote(connection, state.index)} ON {_quote(connection, table)} {definition}"
    )


def drop_table(connection: Connection, name: str) -> None:
    connection.exec_driver_sql(f"DROP TABLE IF EXISTS {_quote(connection, name)}")


def count_rows(connection: Connection, name: str) -> int:
    return connection.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar_one()


def sync_columns(
    connection: Connection, table: str, current: dict[str, dict[str, Any]], fields: dict[str, Field]
) -> dict[str, dict[str, Any]]:
    """Make the generated columns and indexes of ``table`` match ``fields``; returns the new state.

    A unique index that existing documents violate raises IntegrityError (the caller answers 409).
    """
    dialect = connection.dialect.name
    wanted = desired_columns(table, fields)
    have = {name: ColumnState(**state) for name, state in (current or {}).items()}
    q_table = _quote(connection, table)
    alterations: list[str] = []
    for name, state in have.items():
        target = wanted.get(name)
        if state.index and (target is None or target.index != state.index or target.type != state.type):
            connection.exec_driver_sql(f"DROP INDEX IF EXISTS {_quote(connection, state.index)}")
        if target is None or target.type != state.type:
            alterations.append(f"DROP COLUMN {_quote(connection, state.column)}")
    added = []
    for name, target in wanted.items():
        had = have.get(name)
        if had is None or had.type != target.type:
            sql_type, expression = _generated(dialect, name, target.type)
            alterations.append(
                f"ADD COLUMN {_quote(connection, target.column)} {sql_type} "
                f"GENERATED ALWAYS AS ({expression}) {_STORED[dialect == 'postgresql']}"
            )
            added.append(target)
        elif target.index != had.index:
            added.append(target)
    if alterations and dialect == "postgresql":
        # One statement: PostgreSQL rewrites the table once for all the stored columns.
        connection.exec_driver_sql(f"ALTER TABLE {q_table} " + ", ".join(alterations))
    else:
        for alteration in alterations:
            connection.exec_driver_sql(f"ALTER TABLE {q_table} {alteration}")
    for target in added:
        _create_index(connection, table, target)
    return {name: state.as_dict() for name, state in wanted.items()}
