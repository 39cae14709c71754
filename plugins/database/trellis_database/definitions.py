"""Schema definitions as the admin writes them → the normalised form that is stored and returned.

Pure functions (no database): the schema service calls them and turns ``DefinitionError`` into a 400
with field errors.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .fields import Field, FieldError, parse_field
from .search import DEFAULT_LANGUAGE, LANGUAGES

SCHEMA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
# Path segments the document routes use, and names GraphQL keeps for itself.
RESERVED_SCHEMA_NAMES = frozenset(
    {"schemas", "function", "Query", "Mutation", "Subscription", "String", "Int", "Float", "Boolean", "ID", "JSON"}
)
CAN_MODIFY = ("Everything", "Nothing", "ExtensionOnly")
CRUD_OPERATIONS = ("create", "read", "update", "delete")


class DefinitionError(ValueError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {v[0]}" for k, v in errors.items()))
        self.errors = errors


def default_options(owned: bool = False) -> dict[str, Any]:
    return {
        "timestamps": True,
        "search": {"language": DEFAULT_LANGUAGE},
        "conduit": {
            "permissions": {
                "extendable": not owned,
                "canCreate": not owned,
                "canModify": "Nothing" if owned else "Everything",
                "canDelete": not owned,
            },
            "cms": {
                "enabled": not owned,
                "crudOperations": {op: {"enabled": True, "authenticated": False} for op in CRUD_OPERATIONS},
            },
            "authorization": {"enabled": False, "fields": {}},
        },
    }


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not SCHEMA_NAME.match(name):
        raise DefinitionError({"name": ["Must start with a letter and use letters, digits and _ (at most 63)"]})
    if name in RESERVED_SCHEMA_NAMES:
        raise DefinitionError({"name": [f"{name!r} is reserved"]})
    return name


def parse_fields(raw: Any, where: str = "fields") -> dict[str, Field]:
    if not isinstance(raw, dict):
        raise DefinitionError({where: ["Must be an object of field name → definition"]})
    if len(raw) > 200:
        raise DefinitionError({where: ["At most 200 fields"]})
    parsed: dict[str, Field] = {}
    errors: dict[str, list[str]] = {}
    for name, definition in raw.items():
        try:
            parsed[name] = parse_field(name, definition)
        except FieldError as exc:
            errors[f"{where}.{name}"] = [str(exc)]
    if errors:
        raise DefinitionError(errors)
    return parsed


def field_definitions(fields: dict[str, Field]) -> dict[str, Any]:
    return {name: field.definition() for name, field in fields.items()}


def merge_options(current: dict[str, Any], model_options: Any, conduit_options: Any) -> dict[str, Any]:
    """Apply ``modelOptions`` (and Conduit's ``conduitOptions`` = ``modelOptions.conduit``) onto ``current``."""
    merged = copy.deepcopy(current)
    merged.setdefault("search", {"language": DEFAULT_LANGUAGE})  # schemas stored before search existed
    # Schemas stored before an option existed get its default.
    for key, value in default_options()["conduit"].items():
        merged.setdefault("conduit", {}).setdefault(key, copy.deepcopy(value))
    errors: dict[str, list[str]] = {}
    if model_options is not None:
        _merge_checked(merged, model_options, _OPTIONS_SHAPE, "modelOptions", errors)
    if conduit_options is not None:
        _merge_checked(merged["conduit"], conduit_options, _OPTIONS_SHAPE["conduit"], "conduitOptions", errors)
    if errors:
        raise DefinitionError(errors)
    if _opts_in(current, merged) and not any(_sets_create_authenticated(o) for o in (model_options, conduit_options)):
        merged["conduit"]["cms"]["crudOperations"]["create"]["authenticated"] = True
    return merged


def _opts_in(current: dict[str, Any], merged: dict[str, Any]) -> bool:
    """Whether this change turns access control on. A document under access control must have an owner,
    so opting in makes creating a signed-in user's act (``create.authenticated``), unless the same change
    sets that switch itself: letting anonymous callers create there is an explicit choice."""
    before = ((current.get("conduit") or {}).get("authorization") or {}).get("enabled")
    return not before and bool(merged["conduit"]["authorization"]["enabled"])


def _sets_create_authenticated(options: Any) -> bool:
    """Whether ``modelOptions`` (or ``conduitOptions``, one level down) names ``create.authenticated``."""
    if isinstance(options, dict) and isinstance(options.get("conduit"), dict):
        options = options["conduit"]
    cms = options.get("cms") if isinstance(options, dict) else None
    operations = cms.get("crudOperations") if isinstance(cms, dict) else None
    create = operations.get("create") if isinstance(operations, dict) else None
    return isinstance(create, dict) and "authenticated" in create


_CRUD_SHAPE = {"enabled": bool, "authenticated": bool}
_OPTIONS_SHAPE: dict[str, Any] = {
    "timestamps": bool,
    "search": {"language": LANGUAGES},
    "conduit": {
        "permissions": {"extendable": bool, "canCreate": bool, "canModify": CAN_MODIFY, "canDelete": bool},
        "cms": {"enabled": bool, "crudOperations": {op: _CRUD_SHAPE for op in CRUD_OPERATIONS}},
        "authorization": {"enabled": bool, "fields": dict},
    },
}


def _merge_checked(
    target: dict[str, Any], changes: Any, shape: dict[str, Any], path: str, errors: dict[str, list[str]]
) -> None:
    if not isinstance(changes, dict):
        errors[path] = ["Must be an object"]
        return
    for key, value in changes.items():
        where = f"{path}.{key}"
        if key not in shape:
            errors[where] = ["Unknown option"]
            continue
        expected = shape[key]
        if expected is _CRUD_SHAPE and isinstance(value, bool):  # shorthand: create: false
            target[key] = {**target[key], "enabled": value}
        elif isinstance(expected, dict):
            _merge_checked(target[key], value, expected, where, errors)
        elif isinstance(expected, tuple):
            if value not in expected:
                errors[where] = [f"Must be one of {', '.join(expected)}"]
            else:
                target[key] = value
        elif not isinstance(value, expected):
            errors[where] = [f"Must be a {expected.__name__.replace('bool', 'boolean')}"]
        else:
            target[key] = value


def extension_fields(extensions: list[dict[str, Any]]) -> dict[str, Field]:
    """Fields added through extensions (stored already validated)."""
    out: dict[str, Field] = {}
    for extension in extensions or []:
        for name, definition in (extension.get("fields") or {}).items():
            out[name] = parse_field(name, definition)
    return out
