"""What the generated OpenAPI paths share: the security requirements, a field's JSON schema (as written and as
read), the component names of a schema, the ``scope`` parameter and the response objects with their error answers."""

from __future__ import annotations

from typing import Any

from trellis.credentials import Security

from .fields import Field
from .registry import CompiledSchema, Snapshot

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

# A user as a populated Relation to User shows it (``users.public_users``).
PUBLIC_USER = {
    "type": "object",
    "required": ["_id", "email"],
    "properties": {
        "_id": {"type": "string"},
        "email": {"type": "string", "nullable": True, "description": "null for a user who signs in by phone"},
    },
}

SCOPE_PARAMETER = {
    "name": "scope",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "maxLength": 100},
    "description": "`Team:<id>`: act as a team you are a member of (its grants only; not a member: 403)",
}


def value_schema(field: Field) -> dict[str, Any]:
    """A field's value as a client writes it (request bodies, filters): a Relation is the related document's id."""
    if field.type == "Relation":
        base: dict[str, Any] = {"type": "string", "description": f"id of a {field.model} document"}
    else:
        base = dict(JSON_TYPES[field.type])
    return _described(field, base)


def document_value_schema(snap: Snapshot, field: Field, out: dict[str, Any]) -> dict[str, Any]:
    """A field's value as a document read shows it. A Relation that ``?populate=`` can replace is its id or the
    related document (``documents.populate``): the target's document component, ``DatabasePublicUser`` for
    User (added to ``out``); a deleted target is null (dropped from an array), and the id stays for a missing
    user or one the reader may not read under access control. Team, and schemas without documents here: the id."""
    populated = _populated_schema(snap, field, out) if field.type == "Relation" else None
    if populated is None:
        return value_schema(field)
    id_text = f"id of a {field.model} document; with populate the document"
    nullable = not field.array and field.model != "User"
    if nullable:
        id_text += ", or null when it was deleted"
    id_schema: dict[str, Any] = {"type": "string", "description": id_text, **({"nullable": True} if nullable else {})}
    return _described(field, {"oneOf": [id_schema, populated]})


def _populated_schema(snap: Snapshot, field: Field, out: dict[str, Any]) -> dict[str, Any] | None:
    if field.model == "User":
        out["schemas"]["DatabasePublicUser"] = PUBLIC_USER
        return {"$ref": "#/components/schemas/DatabasePublicUser"}
    target = snap.document_schema(field.target)
    if target is None:
        return None
    if not target.cms_enabled:  # no component: its routes are left out of the document (administrators only)
        return {"type": "object", "description": f"the {target.name} document"}
    return {"$ref": f"#/components/schemas/{component_names(target)[0]}"}


def _described(field: Field, base: dict[str, Any]) -> dict[str, Any]:
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
