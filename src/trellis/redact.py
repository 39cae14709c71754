"""Secret values, known from the marshmallow schemas that declare them.

A config schema marks a field once, ``fields.String(metadata={"secret": True})``; that mark masks the value
in ``GET /config/{module}`` answers, in audit entries and in log lines. A masked value sent back (a form
that PUTs what it read) means "keep the stored secret".
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields

MASK = "********"


def _schema(schema: Schema | type[Schema]) -> Schema:
    return schema() if isinstance(schema, type) else schema


def _by_key(schema: Schema) -> dict[str, fields.Field]:
    return {field.data_key or name: field for name, field in schema.fields.items()}


def _nested(field: fields.Field) -> tuple[Schema | None, bool]:
    """The schema inside a Nested (or a List of Nested) field, and whether it holds a list."""
    if isinstance(field, fields.List) and isinstance(field.inner, fields.Nested):
        return field.inner.schema, True
    if isinstance(field, fields.Nested):
        return field.schema, bool(field.many)
    return None, False


def redact(data: Any, schema: Schema | type[Schema] | None) -> Any:
    """A copy of ``data`` with every secret field's value replaced by :data:`MASK` (unset ones stay unset)."""
    if schema is None or not isinstance(data, dict):
        return data
    known = _by_key(_schema(schema))
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = known.get(key)
        if field is None:
            out[key] = value
        elif field.metadata.get("secret"):
            out[key] = value if value in (None, "") else MASK
        else:
            inner, many = _nested(field)
            if inner is not None and many and isinstance(value, list):
                out[key] = [redact(item, inner) for item in value]
            else:
                out[key] = redact(value, inner) if inner is not None else value
    return out


def drop_masked(changes: Any, schema: Schema | type[Schema] | None) -> Any:
    """``changes`` without the secret fields whose value is :data:`MASK`, so merging keeps the stored secret."""
    if schema is None or not isinstance(changes, dict):
        return changes
    known = _by_key(_schema(schema))
    out: dict[str, Any] = {}
    for key, value in changes.items():
        field = known.get(key)
        if field is not None and field.metadata.get("secret") and value == MASK:
            continue
        inner, many = _nested(field) if field is not None else (None, False)
        out[key] = drop_masked(value, inner) if inner is not None and not many else value
    return out


def secret_paths(schema: Schema | type[Schema], prefix: str = "") -> list[str]:
    """Dotted names of the secret fields of ``schema`` (for docs and tests)."""
    found: list[str] = []
    for key, field in _by_key(_schema(schema)).items():
        if field.metadata.get("secret"):
            found.append(prefix + key)
        inner, _many = _nested(field)
        if inner is not None:
            found += secret_paths(inner, f"{prefix}{key}.")
    return found
