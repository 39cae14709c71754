"""The OpenAPI paths of one CMS-enabled schema's document routes: its components (document, input, list,
aggregate), then the collection, ``/many``, ``/{id}``, ``/changes`` and ``/aggregate`` paths, each operation
with the security its crudOperations rule needs, and the sharing routes under access control."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from .document_access import opted_in
from .openapi_common import (
    ADMIN,
    ANYONE,
    SCOPE_PARAMETER,
    USER_OR_ADMIN,
    component_names,
    document_value_schema,
    responses,
    value_schema,
)
from .openapi_filters import LIST_PAGING, aggregate_parameters, list_parameters
from .openapi_grants import grant_paths
from .registry import CompiledSchema, Snapshot

# An operation of the schema: ``(op, operation_id, summary, **spec)`` → the OpenAPI operation object.
Operation = Callable[..., dict[str, Any]]


def schema_paths(snap: Snapshot, schema: CompiledSchema, out: dict[str, Any]) -> None:
    """Adds the schema's components, tag and paths to ``out`` (``snap``: the schemas its relations point at)."""
    properties = _components(snap, schema, out)
    tag = f"database: {schema.name}"
    out["tags"].append({"name": tag, "description": f"Documents of the {schema.name} schema"})
    operation = partial(_operation, schema, tag)
    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    access = opted_in(schema)
    collection = f"/database/{schema.name}"
    out["paths"][collection] = _collection_path(schema, operation, access)
    out["paths"][f"{collection}/many"] = _many_path(schema, operation, access)
    out["paths"][f"{collection}/{{id}}"] = _document_path(schema, operation, properties, id_param, access)
    if access:
        out["paths"][f"{collection}/{{id}}/grants"] = grant_paths(schema, operation, id_param, out)
    out["paths"][f"{collection}/changes"] = {"get": _changes_operation(schema, operation)}
    out["schemas"][f"Database{schema.name}Aggregate"] = _aggregate_schema(schema)
    out["paths"][f"{collection}/aggregate"] = {"get": _aggregate_operation(schema, operation, access)}


def _components(snap: Snapshot, schema: CompiledSchema, out: dict[str, Any]) -> dict[str, Any]:
    """The document, input and list components; returns the fields' properties as written (a patch body's).
    A document's Relation fields are the ids or, populated, the related documents; a body's are ids."""
    doc_name, input_name, list_name = component_names(schema)
    fields = sorted(schema.fields.items())
    properties = {name: value_schema(field) for name, field in fields}
    read = {name: document_value_schema(snap, field, out) for name, field in fields}
    document = {"_id": {"type": "string"}, **read, "__v": {"type": "integer"}}
    if schema.timestamps:
        document["createdAt"] = {"type": "string", "format": "date-time"}
        document["updatedAt"] = {"type": "string", "format": "date-time"}
    required = [name for name, field in fields if field.required]
    out["schemas"][doc_name] = {"type": "object", "properties": document, "required": ["_id", *required]}
    out["schemas"][input_name] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        **({"required": required} if required else {}),
    }
    out["schemas"][list_name] = {
        "type": "object",
        "required": ["documents"],
        "properties": {
            "documents": {"type": "array", "items": {"$ref": f"#/components/schemas/{doc_name}"}},
            "count": {"type": "integer", "description": "total matching, before skip/limit; absent with `count=none`"},
        },
    }
    return properties


def _operation(
    schema: CompiledSchema, tag: str, op: str, operation_id: str, summary: str, **spec: Any
) -> dict[str, Any]:
    """One operation, secured by the schema's rule for ``op`` (a disabled one is left to administrators)."""
    rule = schema.crud(op)
    ids = {"operationId": f"{operation_id}{schema.name}"}
    if not rule.enabled:
        return {
            **ids,
            "summary": summary + " (administrators only: disabled for others)",
            "tags": [tag],
            "security": ADMIN,
            **spec,
        }
    security = USER_OR_ADMIN if rule.authenticated else ANYONE
    return {**ids, "summary": summary, "tags": [tag], "security": security, **spec}


def _refs(schema: CompiledSchema) -> tuple[dict[str, str], dict[str, Any]]:
    """The document's reference and the request body of a whole document."""
    doc_name, input_name, _ = component_names(schema)
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{input_name}"}}},
    }
    return {"$ref": f"#/components/schemas/{doc_name}"}, body


def _scoped(access: bool) -> list[dict[str, Any]]:
    return [SCOPE_PARAMETER] if access else []


def _collection_path(schema: CompiledSchema, operation: Operation, access: bool) -> dict[str, Any]:
    """``/database/<Name>``: list and create."""
    ref, body = _refs(schema)
    list_name = component_names(schema)[2]
    scoped = _scoped(access)
    return {
        "get": operation(
            "read",
            "list",
            f"List {schema.name} documents",
            parameters=[*list_parameters(schema), *scoped],
            responses=responses(
                200, {"$ref": f"#/components/schemas/{list_name}"}, "Documents", 400, 401, 404, access=access
            ),
        ),
        "post": operation(
            "create",
            "create",
            f"Create a {schema.name} document",
            requestBody=body,
            parameters=scoped,
            responses=responses(201, ref, "The created document", 400, 401, 403, 404, 409, 415, access=access),
        ),
    }


def _many_path(schema: CompiledSchema, operation: Operation, access: bool) -> dict[str, Any]:
    """``/database/<Name>/many``: create many, all or nothing."""
    ref, _ = _refs(schema)
    input_name = component_names(schema)[1]
    return {
        "post": operation(
            "create",
            "createMany",
            f"Create many {schema.name} documents (all or nothing)",
            parameters=_scoped(access),
            requestBody={
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["docs"],
                            "properties": {
                                "docs": {
                                    "type": "array",
                                    "maxItems": 1000,
                                    "items": {"$ref": f"#/components/schemas/{input_name}"},
                                }
                            },
                        }
                    }
                },
            },
            responses=responses(
                201,
                {
                    "type": "object",
                    "properties": {"docs": {"type": "array", "items": ref}, "count": {"type": "integer"}},
                },
                "The created documents",
                400,
                401,
                403,
                404,
                409,
                415,
                access=access,
            ),
        ),
    }


def _document_path(
    schema: CompiledSchema,
    operation: Operation,
    properties: dict[str, Any],
    id_param: dict[str, Any],
    access: bool,
) -> dict[str, Any]:
    """``/database/<Name>/{id}``: get, replace, update (a merge; null removes) and delete."""
    ref, body = _refs(schema)
    patch_body = {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object", "properties": properties, "additionalProperties": False}}
        },
    }
    scoped = _scoped(access)
    single: dict[str, Any] = {"parameters": [id_param]}
    single["get"] = operation(
        "read",
        "get",
        f"One {schema.name} document",
        parameters=[
            {"name": "populate", "in": "query", "schema": {"type": "string"}},
            {"name": "select", "in": "query", "schema": {"type": "string"}},
            *scoped,
        ],
        responses=responses(200, ref, "The document", 400, 401, 404, access=access),
    )
    single["put"] = operation(
        "update",
        "replace",
        f"Replace a {schema.name} document",
        requestBody=body,
        parameters=scoped,
        responses=responses(200, ref, "The new document", 400, 401, 404, 409, 415, access=access),
    )
    single["patch"] = operation(
        "update",
        "update",
        f"Change fields of a {schema.name} document (null removes)",
        requestBody=patch_body,
        parameters=scoped,
        responses=responses(200, ref, "The new document", 400, 401, 404, 409, 415, access=access),
    )
    single["delete"] = operation(
        "delete",
        "delete",
        f"Delete a {schema.name} document",
        parameters=scoped,
        responses=responses(200, {"$ref": "#/components/schemas/Deleted"}, "Deleted", 401, 403, 404, access=access),
    )
    return single


def _changes_operation(schema: CompiledSchema, operation: Operation) -> dict[str, Any]:
    """``/database/<Name>/changes``: the Server-Sent Events stream, filtered by the list's field filters."""
    changes = operation(
        "read",
        "streamChanges",
        f"Changes of {schema.name} documents as Server-Sent Events",
        parameters=[
            *list_parameters(schema)[LIST_PAGING:],  # the field filters only
            {"name": "since", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "events", "in": "query", "schema": {"type": "string"}, "example": "create,update,enter,leave"},
            {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
        ],
        responses=responses(200, None, "An endless stream: `id:`, `event:`, `data:` per change", 400, 401, 404, 410),
    )
    changes["responses"]["200"]["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
    return changes


def _aggregate_operation(schema: CompiledSchema, operation: Operation, access: bool) -> dict[str, Any]:
    """``/database/<Name>/aggregate``: its own parameters, then the list's field filters."""
    return operation(
        "read",
        "aggregate",
        f"Groups of {schema.name} documents: count, sum, avg, min, max",
        parameters=[*aggregate_parameters(schema), *list_parameters(schema)[LIST_PAGING:], *_scoped(access)],
        responses=responses(
            200,
            {"$ref": f"#/components/schemas/Database{schema.name}Aggregate"},
            "The groups (only the operations asked for) and how many there are before limit",
            400,
            401,
            404,
            access=access,
        ),
    )


def _aggregate_schema(schema: CompiledSchema) -> dict[str, Any]:
    values = {"type": "object", "additionalProperties": {"nullable": True}}
    group = {
        "type": "object",
        "required": ["key"],
        "properties": {
            "key": {"type": "object", "description": "`{<field>: value}`; a bucket is the ISO time it starts"},
            "count": {"type": "integer"},
            "sum": {"type": "object", "additionalProperties": {"type": "number"}},
            "avg": {"type": "object", "additionalProperties": {"type": "number", "nullable": True}},
            "min": values,
            "max": values,
        },
    }
    return {
        "type": "object",
        "required": ["groups", "count"],
        "properties": {
            "groups": {"type": "array", "items": group},
            "count": {"type": "integer", "description": "the number of groups before `limit`"},
        },
    }
