"""The Database module's share of a project: admin-made schemas (fields with their indexes and search,
options with CMS and access switches) and custom endpoints, by name.

Things go through the schema service and the endpoint definitions, as the admin routes do. Order: endpoints
a prune removes, then schemas created (a Relation's target first) and changed, then endpoints created and
changed (they may use a field the same project adds), then schemas a prune removes. An endpoint that
still uses a field the project removes is refused by the service (409): change it in one apply, the field
in the next.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError

from trellis import db
from trellis.errors import conflict
from trellis.project import Change, ProjectInvalid, ProjectPart

from . import document_access, endpoint_definitions, schema_service, tables
from .definitions import DefinitionError, check_name, default_options, field_definitions, merge_options, parse_fields
from .registry import OWNER, Snapshot, snapshot

SCHEMAS, ENDPOINTS = "schemas", "customEndpoints"
SCHEMA_KEYS = frozenset({"fields", "modelOptions"})


class DatabasePart(ProjectPart):
    module = "database"
    kinds = {SCHEMAS: "schema", ENDPOINTS: "customEndpoint"}

    def stored(self, key: str) -> dict[str, Any]:
        snap = snapshot()
        if key == SCHEMAS:
            return {
                schema.name: {
                    "fields": field_definitions(schema.base_fields),
                    "modelOptions": merge_options(schema.options, None, None),
                }
                for schema in snap.schemas
                if schema.owner_module == OWNER
            }
        return {name: _endpoint_thing(endpoint, snap) for name, endpoint in snap.endpoints.items()}

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        if not isinstance(thing, dict):
            raise ProjectInvalid(path, "must be an object")
        if key == SCHEMAS:
            return _schema_thing(name, thing, path)
        return _endpoint_body(name, thing, path)

    def plan(self, section: Mapping[str, Any], path: str, prune: bool) -> list[Change]:
        changes = super().plan(section, path, prune)
        _check_references(section, changes, path)
        return changes

    def order(self, changes: list[Change]) -> list[Change]:
        def rank(change: Change) -> int:
            if change.kind == "customEndpoint":
                return 0 if change.action == "delete" else 3
            return {"create": 1, "update": 2, "delete": 4}[change.action]

        creates = _relation_order([c for c in changes if c.kind == "schema" and c.action == "create"])
        others = [c for c in changes if not (c.kind == "schema" and c.action == "create")]
        return sorted(creates + others, key=rank)  # a stable sort keeps the creates' relation order

    def create(self, key: str, name: str, thing: Any) -> None:
        if key == SCHEMAS:
            schema_service.create({"name": name, **thing})
        else:
            endpoint_definitions.create({"name": name, **thing})

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        if key == SCHEMAS:
            schema = snapshot().by_name[name]
            schema_service.check_stored_values(schema, parse_fields(thing["fields"]))
            schema_service.update(schema.id, thing)
        else:
            endpoint_definitions.update(snapshot().endpoints[name].id, {"name": name, **thing})

    def delete(self, key: str, name: str, current: Any) -> None:
        snap = snapshot()
        if key == ENDPOINTS:
            endpoint_definitions.delete(snap.endpoints[name].id)
            return
        schema = snap.by_name[name]
        documents = tables.count_rows(db.session.connection(), schema.table.name) if schema.table is not None else 0
        if documents:
            raise conflict(
                f"Schema {name!r} holds {documents} document(s): a project never deletes a schema with documents",
                {"documents": [str(documents)]},
            )
        schema_service.delete(schema.id, delete_data=False)


def _schema_thing(name: str, thing: dict[str, Any], path: str) -> dict[str, Any]:
    unknown = sorted(set(thing) - SCHEMA_KEYS)
    if unknown:
        raise ProjectInvalid(f"{path}.{unknown[0]}", "is not a key of a schema (fields, modelOptions)")
    try:
        check_name(name)
        fields = parse_fields(thing.get("fields", {}))
        options = merge_options(default_options(), thing.get("modelOptions"), None)
    except DefinitionError as exc:
        where, reasons = next(iter(exc.errors.items()))
        raise ProjectInvalid(f"{path}.{where}", reasons[0]) from None
    return {"fields": field_definitions(fields), "modelOptions": options}


def _endpoint_body(name: str, thing: dict[str, Any], path: str) -> dict[str, Any]:
    try:
        body = endpoint_definitions.EndpointBody().load({**thing, "name": name})
    except ValidationError as exc:
        where, reasons = next(iter(endpoint_definitions.by_path(exc.normalized_messages()).items()))
        raise ProjectInvalid(f"{path}.{where}", reasons[0]) from None
    selected = body.get("selectedSchema") or body.get("selectedSchemaName")
    if not selected:
        raise ProjectInvalid(f"{path}.selectedSchema", "names the schema the endpoint works on")
    return _endpoint_form({**body, "selectedSchema": selected})


def _endpoint_form(body: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as a project shows it: its body without name, by schema name (what the routes store)."""
    return {
        "operation": body["operation"],
        "selectedSchema": body["selectedSchema"],
        "inputs": list(body.get("inputs") or []),
        "query": body.get("query"),
        "assignments": list(body.get("assignments") or []),
        "authentication": body.get("authentication", False),
        "paginated": body.get("paginated", False),
        "sorted": body.get("sorted", False),
        "enabled": body.get("enabled", True),
    }


def _endpoint_thing(endpoint: Any, snap: Snapshot) -> dict[str, Any]:
    body = endpoint_definitions.as_body(endpoint)
    schema = snap.by_id.get(endpoint.schema_id)
    return _endpoint_form({**body, "selectedSchema": schema.name if schema is not None else endpoint.schema_id})


def _check_references(section: Mapping[str, Any], changes: list[Change], path: str) -> None:
    """Relations and endpoints name schemas that exist once the project is applied (400 naming the path)."""
    snap = snapshot()
    deleted = {c.name for c in changes if c.kind == "schema" and c.action == "delete"}
    project = set(section.get(SCHEMAS) or {})
    existing = {s.name for s in snap.schemas if s.table is not None} - deleted

    def known(name: str) -> bool:
        return name in project or name in existing

    for change in changes:
        if change.action == "delete":
            continue
        where = f"{path}.{SCHEMAS if change.kind == 'schema' else ENDPOINTS}.{change.name}"
        if change.kind == "customEndpoint":
            if not known(change.wanted["selectedSchema"]):
                raise ProjectInvalid(
                    f"{where}.selectedSchema", "no schema of that name is in the project or the server"
                )
            continue
        for field, definition in change.wanted["fields"].items():
            model = definition.get("model")
            if model and model != change.name and model not in document_access.PRINCIPAL_MODELS and not known(model):
                raise ProjectInvalid(
                    f"{where}.fields.{field}.model", f"no schema named {model!r} is in the project or the server"
                )
    removed = {c.name for c in changes if c.kind == "customEndpoint" and c.action == "delete"}
    wanted_endpoints = section.get(ENDPOINTS) or {}
    for name, endpoint in snap.endpoints.items():
        if name in removed or name in wanted_endpoints:  # a wanted one was checked above when it changes
            target = (wanted_endpoints.get(name) or {}).get("selectedSchema") if name not in removed else None
            where = f"{path}.{ENDPOINTS}.{name}.selectedSchema"
        else:
            schema = snap.by_id.get(endpoint.schema_id)
            target, where = (schema.name if schema is not None else None), f"{path}.{ENDPOINTS}.{name}"
        if target in deleted:
            raise ProjectInvalid(where, f"the endpoint works on schema {target!r}, which the project deletes")


def _relation_order(creates: list[Change]) -> list[Change]:
    """Schemas to create, each after the schemas it has a Relation to (cycles keep their name order)."""
    by_name = {c.name: c for c in creates}
    ordered: list[Change] = []
    placed: set[str] = set()

    def place(change: Change, seen: frozenset[str]) -> None:
        if change.name in placed or change.name in seen:
            return
        for definition in change.wanted["fields"].values():
            target = by_name.get(definition.get("model") or "")
            if target is not None:
                place(target, seen | {change.name})
        placed.add(change.name)
        ordered.append(change)

    for change in creates:
        place(change, frozenset())
    return ordered
