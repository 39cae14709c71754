"""Checking a public submission against its form: field types, required fields, unknown fields.

Returns the cleaned values to store, or raises 400 with ``errors`` per field (every problem at once).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from email_validator import EmailNotValidError, validate_email

from trellis.errors import bad_request

TEXT_MAX = 1_000
TEXTAREA_MAX = 10_000
EMAIL_MAX = 320
MISSING = "Missing data for required field."


def _string(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError("Not a valid string.")
    if len(value) > limit:
        raise ValueError(f"Longer than {limit} characters.")
    return value


def _text(value: Any) -> str:
    text = _string(value, TEXT_MAX)
    if "\n" in text or "\r" in text:
        raise ValueError("Must be a single line (use a textarea field for more).")
    return text


def _textarea(value: Any) -> str:
    return _string(value, TEXTAREA_MAX)


def _email(value: Any) -> str:
    address = _string(value, EMAIL_MAX).strip()
    try:
        return validate_email(address, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise ValueError(str(exc)) from None


def _number(value: Any) -> int | float:
    # JSON numbers, and numeric strings as plain HTML inputs send them.
    if isinstance(value, bool):
        raise ValueError("Not a valid number.")
    if isinstance(value, str):
        try:
            value = int(value.strip()) if value.strip().lstrip("+-").isdigit() else float(value)
        except ValueError:
            raise ValueError("Not a valid number.") from None
    if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError("Not a valid number.")
    return value


def _checkbox(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("Not a valid boolean.")
    return value


CHECKERS: dict[str, Callable[[Any], Any]] = {
    "text": _text,
    "textarea": _textarea,
    "email": _email,
    "number": _number,
    "checkbox": _checkbox,
}
FIELD_TYPES = tuple(CHECKERS)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def clean_submission(fields: list[dict[str, Any]], data: dict[str, Any]) -> dict[str, Any]:
    """The stored form of ``data``; 400 listing unknown fields, missing required ones and bad values."""
    known = {field["name"]: field for field in fields}
    errors: dict[str, list[str]] = {key: ["Unknown field."] for key in data if key not in known}
    cleaned: dict[str, Any] = {}
    for name, field in known.items():
        value = data.get(name)
        if field["type"] == "checkbox" and value is None:
            value = False  # an unchecked box is simply not sent by browsers
        if _blank(value):
            if field.get("required"):
                errors[name] = [MISSING]
            continue
        try:
            cleaned[name] = CHECKERS[field["type"]](value)
        except ValueError as exc:
            errors[name] = [str(exc)]
            continue
        if field["type"] == "checkbox" and field.get("required") and cleaned[name] is not True:
            errors[name] = ["Must be checked."]
    if errors:
        raise bad_request("The submission does not fit the form", errors)
    return cleaned
