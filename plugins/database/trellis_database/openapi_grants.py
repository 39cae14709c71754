"""The OpenAPI paths of a document's sharing routes (``/database/<Name>/{id}/grants``), shown for a schema under
access control, and their components."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .openapi_common import SCOPE_PARAMETER, responses
from .registry import CompiledSchema

GRANT_SCHEMAS = {
    "DatabaseGrantInput": {
        "type": "object",
        "required": ["subject", "relation"],
        "properties": {
            "subject": {"type": "string", "maxLength": 100, "description": "`User:<id>`, `Team:<id>`, `User:*` or `*`"},
            "relation": {"type": "string", "maxLength": 32, "description": "`owner`, `editor`, `reader`, …"},
        },
    },
    "DatabaseGrant": {
        "type": "object",
        "required": ["subject", "relation", "resource"],
        "properties": {
            "subject": {"type": "string"},
            "relation": {"type": "string"},
            "resource": {"type": "string", "description": "`<Schema>:<documentId>`"},
        },
    },
    "DatabaseGrantEntries": {
        "type": "object",
        "required": ["grants", "count"],
        "properties": {
            "grants": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["subject", "relation"],
                    "properties": {"subject": {"type": "string"}, "relation": {"type": "string"}},
                },
            },
            "count": {"type": "integer"},
        },
    },
}


def grant_paths(
    schema: CompiledSchema, operation: Callable[..., dict[str, Any]], id_param: dict[str, Any], out: dict[str, Any]
) -> dict[str, Any]:
    """``/database/<Name>/{id}/grants``: who holds what on a document (needs ``read``), share (``share``),
    revoke (``share``). A document the caller may not read is the 404 of a missing one."""
    out["schemas"].update(GRANT_SCHEMAS)
    grant = {"$ref": "#/components/schemas/DatabaseGrant"}
    text = {"type": "string", "maxLength": 100}
    return {
        "parameters": [id_param],
        "get": operation(
            "read",
            "listGrants",
            f"Who holds which relation on a {schema.name} document",
            parameters=[SCOPE_PARAMETER],
            responses=responses(
                200, {"$ref": "#/components/schemas/DatabaseGrantEntries"}, "The grants", 401, 404, access=True
            ),
        ),
        "post": operation(
            "read",
            "share",
            f"Share a {schema.name} document (needs share; only relations you hold, unless you own it)",
            parameters=[SCOPE_PARAMETER],
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DatabaseGrantInput"}}},
            },
            responses=responses(201, grant, "The grant", 401, 404, 409, 415, access=True),
        ),
        "delete": operation(
            "read",
            "revoke",
            f"Revoke a grant on a {schema.name} document (needs share)",
            parameters=[
                {"name": "subject", "in": "query", "required": True, "schema": text},
                {"name": "relation", "in": "query", "required": True, "schema": {"type": "string", "maxLength": 32}},
                SCOPE_PARAMETER,
            ],
            responses=responses(200, grant, "The revoked grant", 401, 404, access=True),
        ),
    }
