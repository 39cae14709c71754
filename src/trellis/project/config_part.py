"""The core's own share of a project: every loaded module's configuration, ``modules.<module>.config``.

Exported as ``GET /config/{module}`` shows it (secrets as ``"********"``); a masked secret in a project keeps
the target's value, and the plan compares the stored values, so a project that names no new secret
plans nothing for it.
"""

from __future__ import annotations

from typing import Any

from flask import current_app
from marshmallow import Schema, ValidationError

from trellis.module_config import ConfigStore
from trellis.redact import redact, secret_paths

from .diff import differences
from .parts import Change, ProjectInvalid, invalid


def _store() -> ConfigStore:
    store: ConfigStore = current_app.extensions["trellis"].configs
    return store


def modules() -> list[str]:
    return sorted(_store().names())


def export(module: str) -> dict[str, Any]:
    store = _store()
    schema = store.schema(module)
    exported: dict[str, Any] = redact(schema.dump(store.get(module)), schema)
    return exported


def plan(module: str, wanted: Any, path: str) -> Change | None:
    """The update that makes the module's configuration what ``wanted`` says (None: nothing to change)."""
    if not isinstance(wanted, dict):
        raise ProjectInvalid(path, "must be an object")
    store = _store()
    schema = store.schema(module)
    try:
        loaded = store.merged(module, wanted)
    except ValidationError as exc:
        raise invalid(path, exc) from None
    current, new = _canonical(schema, store.get(module)), _canonical(schema, loaded)
    if current == new:
        return None
    detail = differences(current, new, secrets=frozenset(secret_paths(schema)))
    return Change(module, "config", module, "update", detail, wanted, current)


def _canonical(schema: Schema, loaded: dict[str, Any]) -> Any:
    """The config as stored, loaded once more: a nested section defaulted to ``{}`` gets its own defaults
    when it is given back as ``{}``, so both sides of a comparison go through the same load."""
    return schema.dump(schema.load(schema.dump(loaded)))


def apply(change: Change) -> None:
    _store().put(change.module, change.wanted)
