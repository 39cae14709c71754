"""A request body checked against the schema: the values to store and the fields to remove."""

from __future__ import annotations

from typing import Any

from trellis.errors import bad_request

from ..fields import FieldError, check_value
from ..registry import CompiledSchema

SERVER_FIELDS = frozenset({"_id", "createdAt", "updatedAt", "__v"})


def validate(schema: CompiledSchema, body: Any, mode: str) -> tuple[dict[str, Any], list[str]]:
    """Check a request body; returns (values to store, keys to remove).

    ``mode``: "create" and "replace" give the whole document (defaults filled, required checked);
    "patch" gives only the changes (``null`` removes a field).
    """
    if not isinstance(body, dict):
        raise bad_request("A document is a JSON object")
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    removed: list[str] = []
    for key in body:
        if key not in schema.fields and key not in SERVER_FIELDS:
            errors[key] = ["Unknown field"]
    for name, field in schema.fields.items():
        if name in body and body[name] is not None:
            try:
                values[name] = check_value(field, body[name])
            except FieldError as exc:
                errors[name] = [str(exc)]
        elif mode == "patch":
            if name in body:
                if field.required:
                    errors[name] = ["Required field; it cannot be removed"]
                else:
                    removed.append(name)
        elif field.default is not None:
            values[name] = field.default
        elif field.required:
            errors[name] = ["Missing data for required field."]
    if errors:
        raise bad_request("The document does not match the schema " + schema.name, errors)
    return values, removed
