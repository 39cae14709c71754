"""Phone numbers: international format with a leading ``+``, checked with ``phonenumbers``, kept as E.164
(the SMS module texts them, the Authentication module signs users in with them)."""

from __future__ import annotations

import re
from typing import Any

import phonenumbers
from marshmallow import ValidationError, fields

# Digits and the usual separators only: phonenumbers would also turn letters ("+1-800-FLOWERS") into digits.
_SHAPE = re.compile(r"^\+[0-9][0-9 ().\-]{1,30}$")

INVALID = "Not a valid phone number: use international E.164 format with a leading +, e.g. +14155552671"


def to_e164(value: str) -> str:
    """``value`` as E.164 (``+14155552671``); ValueError when it is not a valid international number."""
    if not isinstance(value, str) or not _SHAPE.match(value.strip()):
        raise ValueError(INVALID)
    try:
        parsed = phonenumbers.parse(value.strip(), None)
    except phonenumbers.NumberParseException:
        raise ValueError(INVALID) from None
    if not phonenumbers.is_valid_number(parsed):
        raise ValueError(INVALID)
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


class PhoneNumber(fields.String):
    """A string field that loads as the E.164 form of a valid international phone number."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"description": "international format with a leading +", "example": "+14155552671"}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return to_e164(text)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
