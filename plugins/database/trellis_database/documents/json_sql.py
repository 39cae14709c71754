"""A written document's JSON text made by PostgreSQL inside the write's statement, for its event and the
answer: the data is encoded once, by the database, and never decoded into a dict in between."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from trellis import db

from ..registry import CompiledSchema
from .json_text import STAMP_FORMAT


def concat(*parts: Any) -> sa.ColumnElement[str]:
    """SQL ``a || b || …``; a str part is a constant (an SQL string literal: compiled once)."""
    items = [db.sql_text(p) if isinstance(p, str) else p for p in parts]
    result = items[0]
    for item in items[1:]:
        result = result.op("||", return_type=sa.Text)(item)
    return result


def document_sql(schema: CompiledSchema, *row: Any) -> sa.ColumnElement[str]:
    """:func:`.json_text.document_json` in SQL, over the columns of a row a statement wrote (its event's
    payload): the same keys in the same order. ``data`` is PostgreSQL's text of the JSONB (``{"a": 1}``)."""
    doc_id, data, created, updated, version = row
    # The JSONB's text is made once (PostgreSQL does not share a repeated sub-expression): the braces cut
    # off by substr and left(…, -1); the empty test on the JSONB itself.
    inner_text = sa.func.left(sa.func.substr(sa.cast(data, sa.Text), sa.literal_column("2")), sa.literal_column("-1"))
    inner = sa.case(
        (sa.type_coerce(data, JSONB) == sa.literal_column("'{}'::jsonb"), sa.literal_column("''")),
        else_=concat(",", inner_text),
    )
    parts: list[Any] = ['{"_id":', sa.cast(sa.func.to_json(doc_id), sa.Text), inner]
    if schema.timestamps:
        stamp_format: sa.ColumnClause[Any] = sa.literal_column(f"'{STAMP_FORMAT}'")
        utc: sa.ColumnClause[Any] = sa.literal_column("'UTC'")
        created_text, updated_text = (
            sa.func.to_char(sa.func.timezone(utc, c), stamp_format) for c in (created, updated)
        )
        parts += [',"createdAt":"', created_text, '","updatedAt":"', updated_text, '"']
    parts += [',"__v":', sa.cast(version, sa.Text), "}"]
    return concat(*parts)
