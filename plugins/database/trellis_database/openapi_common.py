"""What the generated OpenAPI paths share: the security requirements, a field's JSON schema, the component
names of a schema, the ``scope`` parameter and the response objects with their error answers."""

from __future__ import annotations

from typing import Any

from trellis.credentials import Security

from .fields import Field
from .registry import CompiledSchema

ERROR = {"$ref": "#/components/schemas/Error"}
ADMIN: Security = [{"masterkey": []}, {"bearerAuth": []}]
ANYONE: Security = [{}, {"bearerAuth": []}, {"masterkey": []}]
USER_OR_ADMIN: Security = [{"bearerAuth": []}, {"masterkey": []}]
JSON_TYPES = {
    "String": {"type": "string"},
    "Number": {"type": "number"},
    "Boolean": {"type": "boolean"},
    "Date": {"type": "string", "format": "date-time"},
    "ObjectId": {"type": "string"},
    "JSON": {},
}

SCOPE_PARAMETER = {
    "name": "scope",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "maxLength": 100},
    "description": "`Team:<id>`: act as a team you are a member of (its grants only; not a member: 403)",
}


def value_schema(field: Field) -> dict[str, Any]:
    """A field's value as a JSON schema (a Relation: the related document's id)."""
    if field.type == "Relation":
        base: dict[str, Any] = {
            "type": "string",
            "description": f"id of a {field.model} document (the document itself when populated)",
        }
    else:
        base = dict(JSON_TYPES[field.type])
    if field.description:
        base["description"] = field.description
    return {"type": "array", "items": base} if field.array else base


def component_names(schema: CompiledSchema) -> tuple[str, str, str]:
    """The names of the schema's document, input and list components."""
    return (f"Database{schema.name}Document", f"Database{schema.name}Input", f"Database{schema.name}List")


def responses(
    status: int, content: dict[str, Any] | None, description: str, *errors: int, access: bool = False
) -> dict[str, Any]:
    """A success response and the error ones; ``access``: the schema is under access control (a 403 for
    what the caller may read but not change, or a scope team it is not in; every answer may be one)."""
    if access:
        errors = tuple(sorted({*errors, 400, 403}))
    out: dict[str, Any] = {str(status): {"description": description}}
    if content is not None:
        out[str(status)]["content"] = {"application/json": {"schema": content}}
    texts = {
        400: "Invalid request",
        401: "A user token is needed",
        403: "Not allowed by the schema's permissions",
        404: "Not found",
        405: "The endpoint answers another method (see Allow)",
        409: "A unique value is taken",
        415: "The body is not declared JSON (Content-Type: application/json)",
        410: "RESYNC_REQUIRED: the event log no longer holds every event after since",
    }
    if access:
        texts[403] = "Not allowed: you may read the document but not do this, or you are not in the scope team"
        texts[404] = "Not found (also a document you may not read: the same answer)"
    for code in errors:
        out[str(code)] = {"description": texts[code], "content": {"application/json": {"schema": ERROR}}}
    return out
