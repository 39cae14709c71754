"""Resource definitions: which relations a resource has and which relations grant each permission.

Every opted-in schema has one. Until an administrator changes it (``PATCH
/admin/authorization/resources/{name}``) it is the default below and nothing is stored. A permission
lists relations, or ``<field>-><permission>``: the permission inherited, one hop, from the document a
Relation field names (``"read": ["reader", "project->read"]``).

Definitions are read on every access-controlled request, so each process keeps the stored ones beside
the ``authorization-resources`` generation stamp (``trellis.cache``): a change bumps it in its own
transaction, and every process reloads before its next decision (no staleness window).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app
from sqlalchemy import select

from trellis import audit, current, db
from trellis.access import ResourceTable, catalog
from trellis.errors import bad_request

from .models import ResourceDefinition

GENERATION = "authorization-resources"
NAME = re.compile(r"^[a-z][A-Za-z0-9_]{0,31}$")
SUBJECT_TYPES = ("User", "Team", "*")  # "*": the wildcards User:* and *
DEFAULT_RELATIONS: dict[str, list[str]] = {
    "owner": ["User", "Team"],
    "editor": ["User", "Team", "*"],
    "reader": ["User", "Team", "*"],
}
DEFAULT_PERMISSIONS: dict[str, list[str]] = {
    "read": ["reader", "editor", "owner"],
    "edit": ["editor", "owner"],
    "delete": ["owner"],
    "share": ["owner"],
}
ARROW = "->"
# The permissions the Database module's routes ask for; a definition may add its own.
REQUIRED_PERMISSIONS = tuple(DEFAULT_PERMISSIONS)


@dataclass(frozen=True)
class Definition:
    name: str
    relations: dict[str, list[str]]
    permissions: dict[str, list[str]]
    version: int = 0

    def direct(self, permission: str) -> tuple[str, ...]:
        """The relations that grant ``permission`` on the document itself."""
        return tuple(entry for entry in self.permissions.get(permission, ()) if ARROW not in entry)

    def inherited(self, permission: str) -> tuple[tuple[str, str], ...]:
        """``(field, permission)`` pairs: ``permission`` held on the document that ``field`` names."""
        pairs = (entry.partition(ARROW) for entry in self.permissions.get(permission, ()) if ARROW in entry)
        return tuple((field, inherited) for field, _arrow, inherited in pairs)

    def granting(self, relation: str) -> list[str]:
        """The permissions ``relation`` grants directly."""
        return [name for name, entries in self.permissions.items() if relation in entries]

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "relations": self.relations, "permissions": self.permissions}


def default(name: str) -> Definition:
    return Definition(
        name, {k: list(v) for k, v in DEFAULT_RELATIONS.items()}, {k: list(v) for k, v in DEFAULT_PERMISSIONS.items()}
    )


class Definitions:
    """This process's copy of the stored definitions (see the module docstring)."""

    def __init__(self) -> None:
        self._stamp: Any = None
        self._stored: dict[str, Definition] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Definition:
        return self.stored().get(name) or default(name)

    @property
    def stamp(self) -> Any:
        """The generation the stored definitions were read at (read anew when it moved)."""
        self.stored()
        return self._stamp

    def stored(self) -> dict[str, Definition]:
        stamp = current.app().extensions["trellis"].generations.stamp(GENERATION)
        if stamp != self._stamp:
            rows = db.session.execute(select(ResourceDefinition)).scalars()
            stored = {row.name: Definition(row.name, row.relations, row.permissions, row.version) for row in rows}
            with self._lock:
                self._stored, self._stamp = stored, stamp
        return self._stored


def of(app: Flask | None = None) -> Definitions:
    return (app or current_app).extensions["trellis_authorization_definitions"]


def init_app(app: Flask) -> None:
    app.extensions["trellis_authorization_definitions"] = Definitions()


def definition(name: str) -> Definition:
    return of().get(name)


# ---- changes -------------------------------------------------------------------------------------------


def check(
    resource: ResourceTable, relations: dict[str, list[str]], permissions: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Errors of a definition for ``resource`` (empty when it is sound)."""
    errors: dict[str, list[str]] = {}
    for name, types in relations.items():
        if not isinstance(name, str) or not NAME.match(name):
            errors[f"relations.{name}"] = ["A relation name is a letter then letters, digits or _ (at most 32)"]
        elif not isinstance(types, list) or not types or any(t not in SUBJECT_TYPES for t in types):
            errors[f"relations.{name}"] = [f"A relation lists the subject types it admits: {', '.join(SUBJECT_TYPES)}"]
    for name, entries in permissions.items():
        key = f"permissions.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            errors[key] = ["A permission name is a letter then letters, digits or _ (at most 32)"]
            continue
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            errors[key] = ["A permission is a list of relation names or <field>-><permission>"]
            continue
        for entry in entries:
            problem = _entry_problem(resource, relations, entry)
            if problem:
                errors.setdefault(key, []).append(problem)
    for field_name, relation in resource.field_relations.items():
        if relation not in relations:
            errors[f"relations.{relation}"] = [f"Field {field_name!r} holds this relation (authorization.fields)"]
    owner = relations.get("owner")
    if not isinstance(owner, list) or not {"User", "Team"} <= set(owner):
        errors.setdefault("relations.owner", []).append(
            "Creating a document grants owner to its creator (a user, or the scope team): owner admits User and Team"
        )
    for name in REQUIRED_PERMISSIONS:
        if name not in permissions:
            errors[f"permissions.{name}"] = ["The Database module asks for this permission (an empty list: nobody)"]
    return errors


def _entry_problem(resource: ResourceTable, relations: dict[str, list[str]], entry: str) -> str | None:
    if ARROW not in entry:
        return None if entry in relations else f"Unknown relation {entry!r}"
    field_name, permission = entry.split(ARROW, 1)
    ref = resource.relation_fields.get(field_name)
    if ref is None:
        return f"{entry!r}: {resource.name} has no Relation field {field_name!r}"
    found = catalog()
    target = found.resource(ref.target) if found is not None else None
    if target is None:
        return f"{entry!r}: {ref.target} is not a schema under access control"
    if permission not in definition(ref.target).permissions:
        return f"{entry!r}: {ref.target} has no permission {permission!r}"
    return None


def update(resource: ResourceTable, changes: dict[str, Any]) -> Definition:
    """Replace the keys of ``changes`` (``relations``, ``permissions``), audited and committed; 400 with the
    errors of :func:`check`, nothing saved. The PATCH route and the project part both change definitions here."""
    current_definition = definition(resource.name)
    relations = changes.get("relations", current_definition.relations)
    permissions = changes.get("permissions", current_definition.permissions)
    errors = check(resource, relations, permissions)
    if errors:
        raise bad_request(f"The definition of {resource.name} has errors", errors)
    saved = save(resource.name, relations, permissions)
    audit.record("authorization", "resource.update", resource.name, changes)
    db.session.commit()
    return saved


def save(name: str, relations: dict[str, list[str]], permissions: dict[str, list[str]]) -> Definition:
    """Store a definition in the caller's transaction and bump the generation (the caller commits)."""
    row = db.session.get(ResourceDefinition, name)
    if row is None:
        row = ResourceDefinition(name=name, version=0)
        db.session.add(row)
    row.relations, row.permissions = relations, permissions
    row.version = (row.version or 0) + 1
    row.updated_at = db.utcnow()
    current_app.extensions["trellis"].generations.bump(GENERATION)
    return Definition(name, relations, permissions, row.version)


def rename(old: str, new: str) -> None:
    row = db.session.get(ResourceDefinition, old)
    if row is not None:
        saved = Definition(new, row.relations, row.permissions, row.version)
        db.session.delete(row)
        db.session.flush()
        save(saved.name, saved.relations, saved.permissions)


def drop(name: str) -> None:
    row = db.session.get(ResourceDefinition, name)
    if row is not None:
        db.session.delete(row)
        current_app.extensions["trellis"].generations.bump(GENERATION)
