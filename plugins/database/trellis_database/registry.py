"""The per-process view of every schema and custom endpoint, rebuilt only when they change.

A ``Snapshot`` holds the compiled schemas (fields, options, Core ``Table``), the custom endpoints,
and, built lazily, the GraphQL schema. It is cached beside the ``database-schemas`` generation stamp
(``trellis.cache``): writers bump that generation in the same transaction as their change, readers
compare stamps, so a change made by one worker reaches every worker without a restart and without
a schema query per request.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app, g, has_request_context, request
from sqlalchemy import select

from trellis import current, db

from . import tables
from .definitions import default_options, extension_fields, merge_options
from .fields import Field, FieldError, format_datetime, parse_field
from .models import CustomEndpointRecord, SchemaRecord

log = logging.getLogger(__name__)

GENERATION = "database-schemas"
OWNER = "database"
_OWNED_NAMESPACE = uuid.UUID("6f0b6c52-8f43-4a53-9d8e-6f1f4b7c2d10")


def owned_schema_id(owner_module: str, name: str) -> str:
    """Module-owned schemas have a stable id, whether or not a row exists for them yet."""
    return uuid.uuid5(_OWNED_NAMESPACE, f"{owner_module}:{name}").hex


@dataclass(frozen=True)
class CrudRule:
    enabled: bool
    authenticated: bool


@dataclass
class CompiledSchema:
    id: str
    name: str
    owner_module: str
    base_fields: dict[str, Field]
    fields: dict[str, Field]
    options: dict[str, Any]
    extensions: list[dict[str, Any]]
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    table: sa.Table | None  # None: the documents live in another module, not here
    storage: dict[str, Any] = field(default_factory=dict)
    raw_fields: dict[str, Any] | None = None  # an owned descriptor's fields as declared
    unique_indexes: dict[str, str] = field(default_factory=dict)  # index or column name → field
    statements: dict[Hashable, Any] = field(default_factory=dict)  # prepared Core statements, per snapshot

    @property
    def documents_table(self) -> sa.Table:
        """The documents' table, for code that only meets schemas with documents here (``table`` set)."""
        table = self.table
        if table is None:
            raise LookupError(f"the documents of schema {self.name} live in another module")
        return table

    @property
    def owned(self) -> bool:
        return self.owner_module != OWNER

    @property
    def timestamps(self) -> bool:
        return bool(self.options.get("timestamps", True))

    @property
    def cms_enabled(self) -> bool:
        return self.table is not None and bool(self.options["conduit"]["cms"]["enabled"])

    def crud(self, operation: str) -> CrudRule:
        rule = self.options["conduit"]["cms"]["crudOperations"][operation]
        return CrudRule(bool(rule["enabled"]), bool(rule["authenticated"]))

    def permission(self, name: str) -> Any:
        return self.options["conduit"]["permissions"][name]

    @property
    def extendable(self) -> bool:
        return bool(self.permission("extendable")) or self.permission("canModify") == "ExtensionOnly"

    def record(self) -> dict[str, Any]:
        """The schema record of the API."""
        fields = (
            self.raw_fields
            if self.raw_fields is not None
            else {name: f.definition() for name, f in self.base_fields.items()}
        )
        return {
            "_id": self.id,
            "name": self.name,
            "fields": fields,
            "modelOptions": self.options,
            "ownerModule": self.owner_module,
            "extensions": self.extensions,
            "createdAt": format_datetime(self.created_at) if self.created_at else None,
            "updatedAt": format_datetime(self.updated_at) if self.updated_at else None,
            "__v": self.version,
        }


@dataclass(frozen=True)
class CompiledEndpoint:
    id: str
    name: str
    operation: str
    schema_id: str
    inputs: tuple[dict[str, Any], ...]
    query: dict[str, Any] | None
    assignments: tuple[dict[str, Any], ...]
    authentication: bool
    paginated: bool
    sorted: bool
    enabled: bool
    version: int
    created_at: datetime | None
    updated_at: datetime | None


@dataclass
class Snapshot:
    stamp: Any
    schemas: list[CompiledSchema]
    endpoints: dict[str, CompiledEndpoint]
    by_name: dict[str, CompiledSchema] = field(default_factory=dict)
    by_id: dict[str, CompiledSchema] = field(default_factory=dict)
    _lazy: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for schema in self.schemas:
            self.by_id[schema.id] = schema
            # An admin schema keeps its name even if a module later declares the same one.
            if schema.name not in self.by_name or not schema.owned:
                self.by_name[schema.name] = schema

    def document_schema(self, name: str) -> CompiledSchema | None:
        schema = self.by_name.get(name)
        return schema if schema is not None and schema.table is not None else None

    def lazy(self, key: str, build: Callable[[], Any]) -> Any:
        """Something derived from this snapshot (GraphQL schema …), built once per snapshot."""
        if key not in self._lazy:
            with self._lock:
                if key not in self._lazy:
                    self._lazy[key] = build()
        return self._lazy[key]


class Registry:
    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()

    def current(self) -> Snapshot:
        generations = current.app().extensions["trellis"].generations
        dirty = _dirty()
        stamp = generations.stamp(GENERATION)  # read before the rows: a racing change forces a rebuild
        snapshot = self._snapshot
        if snapshot is not None and snapshot.stamp == stamp and not dirty:
            return snapshot
        snapshot = load_snapshot(stamp)
        if not dirty:  # never cache what this request changed but has not committed
            with self._lock:
                self._snapshot = snapshot
        return snapshot


def registry(app: Flask | None = None) -> Registry:
    return (app or current.app()).extensions["trellis_database"]


def snapshot() -> Snapshot:
    return registry().current()


def snapshot_having(found: Callable[[Snapshot], bool]) -> Snapshot:
    """The current snapshot; when ``found`` is false on it, re-read the generations from the database
    (not the shared token) and look again, so a 404 for a name is never answered from a stale copy."""
    snap = snapshot()
    if found(snap):
        return snap
    current_app.extensions["trellis"].generations.refresh()
    return snapshot()


def _dirty() -> bool:
    """Whether this request (or, outside one, this app context: a CLI command) changed schemas or endpoints."""
    if has_request_context():
        return bool(current.request().environ.get("trellis", {}).get("database_dirty"))
    return bool(g.get("trellis_database_dirty"))


def changed() -> None:
    """Call right before committing a change to schemas or endpoints."""
    if has_request_context():
        request.environ.setdefault("trellis", {})["database_dirty"] = True
    else:
        g.trellis_database_dirty = True
    current_app.extensions["trellis"].generations.bump(GENERATION)


# ---- building ---------------------------------------------------------------------------------------


def load_snapshot(stamp: Any) -> Snapshot:
    rows = {row.id: row for row in db.session.execute(select(SchemaRecord)).scalars()}
    schemas = [compile_record(row) for row in rows.values() if row.owner_module == OWNER]
    for descriptor in _owned_descriptors():
        schemas.append(compile_owned(descriptor, rows.get(owned_schema_id(descriptor.owner_module, descriptor.name))))
    endpoints = {row.name: compile_endpoint(row) for row in db.session.execute(select(CustomEndpointRecord)).scalars()}
    schemas.sort(key=lambda s: s.name)
    return Snapshot(stamp, schemas, endpoints)


def _owned_descriptors() -> list[Any]:
    found = []
    for module in current_app.extensions["trellis"].modules:
        found.extend(module.owned_schemas)
    return found


def compile_record(row: SchemaRecord) -> CompiledSchema:
    base = {name: parse_field(name, definition) for name, definition in (row.fields or {}).items()}
    fields = {**base, **extension_fields(row.extensions)}
    state = row.storage or {}
    columns = {name: tables.ColumnState(**c) for name, c in (state.get("columns") or {}).items()}
    table = tables.make_table(state["table"], columns) if state.get("table") else None
    # Index name (PostgreSQL reports it) and column name (SQLite does) → field, to name a 409's culprit.
    unique = {key: name for name, c in columns.items() if c.unique and c.index for key in (c.index, c.column)}
    return CompiledSchema(
        id=row.id,
        name=row.name,
        owner_module=row.owner_module,
        base_fields=base,
        fields=fields,
        options=row.model_options,
        extensions=row.extensions or [],
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        table=table,
        storage=state,
        unique_indexes=unique,
    )


def owned_fields(raw: dict[str, Any]) -> dict[str, Field]:
    """A module's declared fields, read leniently: what the admin form cannot parse is shown as JSON."""
    out: dict[str, Field] = {}
    for name, definition in (raw or {}).items():
        try:
            out[name] = parse_field(name, definition)
        except FieldError:
            out[name] = Field(name=name, type="JSON")
    return out


def owned_options(descriptor: Any) -> dict[str, Any]:
    options = default_options(owned=True)
    options["timestamps"] = bool(descriptor.timestamps)
    return merge_options(
        options,
        {"conduit": {"permissions": {"canModify": descriptor.can_modify, "extendable": bool(descriptor.extendable)}}},
        None,
    )


def compile_owned(descriptor: Any, row: SchemaRecord | None) -> CompiledSchema:
    base = owned_fields(descriptor.fields)
    extensions = (row.extensions if row is not None else None) or []
    return CompiledSchema(
        id=owned_schema_id(descriptor.owner_module, descriptor.name),
        name=descriptor.name,
        owner_module=descriptor.owner_module,
        base_fields=base,
        fields={**base, **extension_fields(extensions)},
        options=row.model_options if row is not None and row.model_options else owned_options(descriptor),
        extensions=extensions,
        version=row.version if row is not None else 0,
        created_at=row.created_at if row is not None else None,
        updated_at=row.updated_at if row is not None else None,
        table=None,
        raw_fields=dict(descriptor.fields),
    )


def compile_endpoint(row: CustomEndpointRecord) -> CompiledEndpoint:
    return CompiledEndpoint(
        id=row.id,
        name=row.name,
        operation=row.operation,
        schema_id=row.schema_id,
        inputs=tuple(row.inputs or ()),
        query=row.query,
        assignments=tuple(row.assignments or ()),
        authentication=row.authentication,
        paginated=row.paginated,
        sorted=row.sorted,
        enabled=row.enabled,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
