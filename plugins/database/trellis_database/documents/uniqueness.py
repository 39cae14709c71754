"""Unique fields: a batch that repeats a value, and the 409 for a unique index the database refused."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.exc import IntegrityError

from trellis import db
from trellis.errors import APIError, conflict

from ..registry import CompiledSchema

_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (?:index '([^']+)'|\w+\.(\w+))")


def unique_conflict(schema: CompiledSchema, exc: IntegrityError) -> APIError:
    """The 409 for a unique index violation, naming the field when the database tells us which."""
    db.session.rollback()
    index = getattr(getattr(exc.orig, "diag", None), "constraint_name", None)
    if index is None:
        match = _SQLITE_UNIQUE.search(str(exc.orig))
        index = (match.group(1) or match.group(2)) if match else None
    field = schema.unique_indexes.get(index or "")
    if field is None:
        return conflict("The document conflicts with an existing one")
    return conflict(f"Another {schema.name} document already has this {field}", {field: ["Already taken"]})


def unique_within(schema: CompiledSchema, values: list[dict[str, Any]]) -> None:
    """A 409 when two documents of a batch hold the same value of a unique field."""
    for name, field in schema.fields.items():
        if not field.unique:
            continue
        seen: dict[Any, int] = {}
        for index, data in enumerate(values):
            if name in data:
                if data[name] in seen:
                    raise conflict(
                        f"Two documents of the batch share the same {name}",
                        {"docs": {str(index): {name: ["Already taken (in this batch)"]}}},
                    )
                seen[data[name]] = index
