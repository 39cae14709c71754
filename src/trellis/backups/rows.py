"""Row values as JSON and back, by column type: what makes an archive portable between SQLite and PostgreSQL.

A row is written as a JSON array in the order of its table's column list (the archive's first line of each
table names them). Values JSON cannot hold are written by the column's type: datetimes as ISO 8601 text,
bytes as base64, decimals as text; reading goes by the same type, so a JSON column's string that merely
looks like a date stays a string.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import sqlalchemy as sa


def _base(kind: sa.types.TypeEngine) -> sa.types.TypeEngine:
    while isinstance(kind, sa.types.TypeDecorator):
        kind = kind.impl_instance
    return kind


def _encode(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} to a backup")


def encoder() -> Callable[[list[Any]], str]:
    """One row (its values in column order) as a line of JSON."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_encode).encode
    return lambda values: dumps(values) + "\n"


def decoder(columns: list[sa.Column]) -> Callable[[list[Any]], dict[str, Any]]:
    """The function that turns a line's values back into a row of ``columns`` (a dict by column key)."""
    converters: list[Callable[[Any], Any] | None] = [_reader(_base(column.type)) for column in columns]
    keys = [column.key for column in columns]

    def decode(values: list[Any]) -> dict[str, Any]:
        return {
            key: (convert(value) if convert is not None and value is not None else value)
            for key, convert, value in zip(keys, converters, values, strict=True)
        }

    return decode


def _reader(kind: sa.types.TypeEngine) -> Callable[[Any], Any] | None:
    if isinstance(kind, sa.DateTime):
        return datetime.fromisoformat
    if isinstance(kind, sa.Date):
        return date.fromisoformat
    if isinstance(kind, sa.Time):
        return time.fromisoformat
    if isinstance(kind, sa.LargeBinary):
        return base64.b64decode
    if isinstance(kind, sa.Numeric) and kind.asdecimal:
        return Decimal
    return None
