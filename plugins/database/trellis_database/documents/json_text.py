"""A document's row and its JSON: ``{"_id", <fields>…, "createdAt", "updatedAt", "__v"}``, the fields
stored in ``data`` and the rest in columns. Reads splice the JSON text from the row rather than decode and
re-encode the stored JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, overload

import sqlalchemy as sa

from ..registry import CompiledSchema


def columns(table: sa.Table) -> tuple[sa.Column, ...]:
    return table.c.id, table.c.data, table.c.created_at, table.c.updated_at, table.c.version


STAMP_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'  # the same text as stamp(), made by PostgreSQL


def text_columns(table: sa.Table, dialect_name: str) -> tuple[sa.ColumnElement, ...]:
    """The document's columns for :func:`document_json`: ``data`` as JSON text, and on PostgreSQL
    the timestamps already formatted, so a read never decodes and re-encodes the stored JSON."""
    doc_id, data, created_at, updated_at, version = columns(table)
    text = sa.cast(data, sa.Text)
    if dialect_name != "postgresql":
        return doc_id, text, created_at, updated_at, version
    # Constants as SQL text, not parameters: the statement is compiled once and run with its id only.
    utc: sa.ColumnClause[Any] = sa.literal_column("'UTC'")
    stamp_format: sa.ColumnClause[Any] = sa.literal_column(f"'{STAMP_FORMAT}'")
    created, updated = (
        sa.func.to_char(sa.func.timezone(utc, column), stamp_format) for column in (created_at, updated_at)
    )
    return doc_id, text, created, updated, version


def document_json(schema: CompiledSchema, row: Any) -> str:
    """A document as JSON text, spliced from a :func:`text_columns` row: the same keys in the same
    order as :func:`to_document`. ``data`` never holds ``_id``, the timestamps or ``__v``
    (:func:`.validation.validate` drops them), so splicing cannot repeat a key. Ids are hex and timestamps
    are formatted here or by the database (digits, ``-:.TZ``): neither needs escaping."""
    doc_id, inner = row[0], row[1].strip()[1:-1].strip()
    parts = ['{"_id":', f'"{doc_id}"' if doc_id.isalnum() else json.dumps(doc_id)]
    if inner:
        parts += [",", inner]
    if schema.timestamps:
        parts += [',"createdAt":"', stamp(row[2]), '","updatedAt":"', stamp(row[3]), '"']
    parts += [',"__v":', str(row[4]), "}"]
    return "".join(parts)


def to_document(schema: CompiledSchema, row: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"_id": row[0]}
    data = row[1]
    if isinstance(data, str):  # SQLite through RETURNING may hand back the text
        data = json.loads(data)
    doc.update(data)
    if schema.timestamps:
        doc["createdAt"] = stamp(row[2])
        doc["updatedAt"] = stamp(row[3])
    doc["__v"] = row[4]
    return doc


@overload
def stamp(value: datetime | str) -> str: ...
@overload
def stamp(value: None) -> None: ...
def stamp(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.utcoffset():  # the driver may answer in the server's time zone
        value = value.astimezone(UTC)
    # isoformat is C code: the same fixed-width text as fields.format_datetime, and faster.
    return value.isoformat(timespec="microseconds")[:26] + "Z"


def project(doc: dict[str, Any], select: frozenset[str] | None) -> dict[str, Any]:
    if select is None:
        return doc
    return {key: value for key, value in doc.items() if key in select}


def serialise(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
