"""Field definitions of a schema and the values documents may hold.

A field is written by the admin as a type name (``"String"``), an array of one (``["String"]``) or an
object ``{type, model?, required?, unique?, default?, description?, index?, maxLength?}``. It is stored in the
canonical object form. Values are checked and normalised here (dates become fixed-width UTC strings,
so they sort and compare as text on both databases).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TYPES = ("String", "Number", "Boolean", "Date", "ObjectId", "JSON", "Relation")
# Fields with a typed SQL column (and, by default, an index): everything but arrays and JSON.
SCALAR_TYPES = frozenset({"String", "Number", "Boolean", "Date", "ObjectId", "Relation"})
DEFINITION_KEYS = frozenset(
    {"type", "model", "required", "unique", "default", "description", "index", "maxLength", "searchable"}
)
# Indexed (or unique) String fields hold at most this many characters unless ``maxLength`` says otherwise,
# and at most INDEX_MAX_BYTES of UTF-8 whatever it says: PostgreSQL refuses a btree entry over ~2,700
# bytes (a 500 before this limit existed). The same rule holds on SQLite, so data moves between them.
INDEXED_STRING_MAX_LENGTH = 1024
INDEX_MAX_BYTES = 2000

# 60 so that the column name ``f_<name>`` stays within PostgreSQL's 63-character identifiers.
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,59}$")
# Names the list route uses as parameters or the server sets on every document.
RESERVED_FIELDS = frozenset({"_id", "createdAt", "updatedAt", "__v", "skip", "limit", "sort", "select", "populate"})
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
INT64 = 2**63 - 1
# Elements of one array field of a document (or an array input of a custom endpoint), counted before any
# is checked: the request body's size alone would let a few million through, each converted in Python.
MAX_ARRAY_LENGTH = 10_000


class FieldError(ValueError):
    """A value or a definition that does not fit; the message is shown to the client."""


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    array: bool = False
    model: str | None = None
    required: bool = False
    unique: bool = False
    default: Any = None
    description: str | None = None
    index: bool = True
    max_length: int | None = None  # declared ``maxLength`` (characters), String fields only
    searchable: bool = False  # full-text indexed (String and [String] only; see search.py)

    @property
    def scalar(self) -> bool:
        """Has a typed SQL column (filterable with comparisons, sortable, indexable)."""
        return not self.array and self.type in SCALAR_TYPES

    @property
    def column(self) -> str | None:
        return f"f_{self.name}" if self.scalar else None

    @property
    def target(self) -> str:
        """The schema (or ``User``, ``Team``) a Relation field refers to."""
        if self.model is None:
            raise LookupError(f"field {self.name} is a {self.type}, not a Relation")
        return self.model

    @property
    def indexed(self) -> bool:
        return self.scalar and (self.index or self.unique)

    @property
    def length_limit(self) -> int | None:
        """Characters a String value may have: declared, else a default for indexed fields, else none."""
        if self.max_length is not None:
            return self.max_length
        return INDEXED_STRING_MAX_LENGTH if self.type == "String" and self.indexed else None

    def definition(self) -> dict[str, Any]:
        """The canonical stored/returned form."""
        out: dict[str, Any] = {"type": [self.type] if self.array else self.type}
        if self.model is not None:
            out["model"] = self.model
        if self.required:
            out["required"] = True
        if self.unique:
            out["unique"] = True
        if self.default is not None:
            out["default"] = self.default
        if self.description:
            out["description"] = self.description
        if self.scalar and not self.index and not self.unique:
            out["index"] = False
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.searchable:
            out["searchable"] = True
        return out


def parse_field(name: str, raw: Any) -> Field:
    """One field definition in any accepted form → Field. Raises FieldError with a readable reason."""
    if not isinstance(name, str) or not FIELD_NAME.match(name):
        raise FieldError("Field names start with a letter and use letters, digits and _ (at most 60)")
    if name in RESERVED_FIELDS:
        raise FieldError(f"{name!r} is reserved")
    if isinstance(raw, (str, list)):
        raw = {"type": raw}
    if not isinstance(raw, dict):
        raise FieldError("A field is a type name, [type name] or an object with 'type'")
    unknown = set(raw) - DEFINITION_KEYS
    if unknown:
        raise FieldError(f"Unknown keys in the field definition: {', '.join(sorted(unknown))}")
    kind = raw.get("type")
    model = raw.get("model")
    array = False
    if isinstance(kind, list):
        if len(kind) != 1:
            raise FieldError("An array field is written [type] with exactly one element type")
        array = True
        kind = kind[0]
        if isinstance(kind, dict):  # Conduit's [{type: Relation, model: X}]
            if set(kind) - {"type", "model"}:
                raise FieldError("An array element definition may only have 'type' and 'model'")
            model = kind.get("model", model)
            kind = kind.get("type")
    if kind not in TYPES:
        raise FieldError(f"Unknown type {kind!r}; use one of {', '.join(TYPES)}")
    if kind == "Relation":
        if not isinstance(model, str) or not model:
            raise FieldError("A Relation field needs 'model': the name of the related schema")
    elif model is not None:
        raise FieldError("'model' is only for Relation fields")
    for flag in ("required", "unique", "index", "searchable"):
        if flag in raw and not isinstance(raw[flag], bool):
            raise FieldError(f"'{flag}' must be true or false")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise FieldError("'description' must be a string")
    max_length = raw.get("maxLength")
    if max_length is not None:
        if kind != "String":
            raise FieldError("'maxLength' is only for String fields")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 1 <= max_length <= 10_000_000:
            raise FieldError("'maxLength' must be a whole number from 1 to 10000000")
    field = Field(
        name=name,
        type=kind,
        array=array,
        model=model,
        required=bool(raw.get("required", False)),
        unique=bool(raw.get("unique", False)),
        description=description,
        index=bool(raw.get("index", True)),
        max_length=max_length,
        searchable=bool(raw.get("searchable", False)),
    )
    if field.searchable and kind != "String":
        raise FieldError("Only String and [String] fields can be searchable")
    if field.unique and not field.scalar:
        raise FieldError("Only single-valued fields other than JSON can be unique")
    if raw.get("index") and not field.scalar:
        raise FieldError("Only single-valued fields other than JSON can be indexed")
    default = raw.get("default")
    if default is not None:
        if kind == "Relation":
            raise FieldError("A Relation field cannot have a default")
        try:
            default = check_value(field, default)
        except FieldError as exc:
            raise FieldError(f"Bad default: {exc}") from None
        field = Field(**{**field.__dict__, "default": default})
    return field


# ---- values written to documents -------------------------------------------------------------------


def check_value(field: Field, value: Any) -> Any:
    """A JSON value written to ``field`` → the stored value (normalised), or FieldError.

    A required String refuses ``""`` (mongoose's and Conduit's meaning of required: a value, not just a key).
    """
    if field.array:
        if not isinstance(value, list):
            raise FieldError(f"Must be an array of {field.type}")
        check_array_length(value)
        items = [check_scalar(field.type, item) for item in value]
        if field.max_length is not None:
            for item in items:
                check_length(field, item)
        return items
    if field.required and field.type == "String" and value == "":
        raise FieldError("Required: must not be empty")
    value = check_scalar(field.type, value)
    if field.type == "String":
        check_length(field, value)
    return value


def check_array_length(value: list[Any]) -> None:
    if len(value) > MAX_ARRAY_LENGTH:
        raise FieldError(f"Longer than maximum length {MAX_ARRAY_LENGTH}.")


def check_length(field: Field, value: str) -> None:
    limit = field.length_limit
    if limit is not None and len(value) > limit:
        raise FieldError(
            f"Longer than {limit} characters"
            + (
                ""
                if field.max_length
                else " (the limit of indexed text; declare maxLength or index: false to change it)"
            )
        )
    if field.indexed and len(value) > INDEX_MAX_BYTES // 4 and len(value.encode("utf-8")) > INDEX_MAX_BYTES:
        raise FieldError(f"Longer than {INDEX_MAX_BYTES} bytes of UTF-8, the limit of an indexed value")


def check_scalar(kind: str, value: Any) -> Any:
    if value is None:
        raise FieldError("Must not be null")
    if kind == "String":
        if not isinstance(value, str):
            raise FieldError("Not a string")
        return check_text(value)
    if kind == "Number":
        return check_number(value)
    if kind == "Boolean":
        if not isinstance(value, bool):
            raise FieldError("Not a boolean")
        return value
    if kind == "Date":
        if not isinstance(value, str):
            raise FieldError("Not an ISO 8601 date string")
        return normalise_date(value)
    if kind in ("ObjectId", "Relation"):
        if isinstance(value, dict) and kind == "Relation" and "_id" in value:  # a populated document sent back
            value = value["_id"]
        if not isinstance(value, str) or not ID_PATTERN.match(value):
            raise FieldError("Not an id (1-64 letters, digits, - or _)")
        return value
    if kind == "JSON":
        return check_json(value)
    raise FieldError(f"Unknown type {kind}")  # definitions are validated, so only a bug gets here


def check_text(value: str) -> str:
    # PostgreSQL cannot store NUL in text or jsonb; refuse it on both databases alike.
    if "\x00" in value:
        raise FieldError("Text must not contain NUL characters")
    return value


def check_number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError("Not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise FieldError("Not a finite number")
    if isinstance(value, int) and abs(value) > INT64:
        raise FieldError("Integer out of range (64-bit)")
    return value


def check_json(value: Any, depth: int = 0) -> Any:
    """Any JSON value, with the same limits the databases have (finite numbers, no NUL, bounded depth)."""
    if depth > 32:
        raise FieldError("JSON nested too deeply (32 levels at most)")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return check_number(value)
    if isinstance(value, str):
        return check_text(value)
    if isinstance(value, list):
        return [check_json(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {check_text(str(key)): check_json(item, depth + 1) for key, item in value.items()}
    raise FieldError("Not a JSON value")


def normalise_date(text: str) -> str:
    """ISO 8601 (date or date-time, any offset; naive means UTC) → ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return format_datetime(parse_datetime(text))


def parse_datetime(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise FieldError("Not an ISO 8601 date") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_datetime(moment: datetime) -> str:
    """Fixed width, so the text order is the time order (isoformat drops zero microseconds)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond:06d}Z"
    )


# ---- values arriving in queries (text from a URL, typed from JSON/GraphQL) ------------------------

TRUE_WORDS = {"true": True, "1": True, "false": False, "0": False}


def coerce_query_value(kind: str, raw: Any) -> Any:
    """A value to compare a ``kind`` field with: typed JSON values pass through, text is converted."""
    if raw is None:
        raise FieldError("A value is required")
    if kind == "Number":
        if isinstance(raw, str):
            return parse_number(raw)
        return check_number(raw)
    if kind == "Boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in TRUE_WORDS:
            return TRUE_WORDS[raw.strip().lower()]
        raise FieldError("Not a boolean (true or false)")
    if kind == "Date":
        if not isinstance(raw, str):
            raise FieldError("Not an ISO 8601 date string")
        return normalise_date(raw)
    if kind in ("String", "ObjectId", "Relation"):
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise FieldError("Not a string")
        return check_text(str(raw))
    raise FieldError(f"{kind} fields cannot be compared")


def parse_number(text: str) -> int | float:
    text = text.strip()
    try:
        value: int | float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise FieldError("Not a number") from None
    return check_number(value)
