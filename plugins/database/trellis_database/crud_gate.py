"""The CMS switches' gate: who may call a schema's document routes at all (`docs/database.md`, "Access").

The master key or an admin token may do everything. Anyone else goes through the schema's
``crudOperations.<op>``: a disabled operation (or a schema without CMS) does not exist (404); an
``authenticated`` one needs a user token (401 without one).
"""

from __future__ import annotations

from trellis.credentials import Identity, identify
from trellis.errors import APIError, forbidden, not_found, unauthorized

from .registry import CompiledSchema


def authorize(schema: CompiledSchema | None, operation: str, name: str | None = None) -> Identity | None:
    """Check access to ``operation`` (create|read|update|delete) on ``schema``; returns the caller."""
    return authorize_as(identify(), schema, operation, name)


def authorize_as(
    identity: Identity | None, schema: CompiledSchema | None, operation: str, name: str | None = None
) -> Identity | None:
    """:func:`authorize` for a caller other than the request's (server-side code acting as someone)."""
    if schema is None or schema.table is None:
        raise not_found(f"No schema named {name or (schema.name if schema else '')!r} with documents")
    if identity is not None and identity.is_admin:
        return identity
    check_rule(schema, operation, identity)
    return identity


def check_rule(schema: CompiledSchema, operation: str, identity: Identity | None) -> None:
    if not schema.cms_enabled or not schema.crud(operation).enabled:
        raise not_found(f"No {operation} route for schema {schema.name!r}")
    if schema.crud(operation).authenticated and (identity is None or identity.kind != "user"):
        raise unauthorized(f"Schema {schema.name!r}: {operation} needs a user Bearer token")


def allowed(schema: CompiledSchema, operation: str, identity: Identity | None) -> APIError | None:
    """The error ``operation`` would raise for ``identity``, or None (GraphQL reports it per field)."""
    if identity is not None and identity.is_admin:
        return None
    try:
        check_rule(schema, operation, identity)
    except APIError as exc:
        return exc
    return None


def check_permission(schema: CompiledSchema, operation: str) -> None:
    """The schema's own permissions bind everyone, admins included (they protect module data)."""
    if operation == "create" and not schema.permission("canCreate"):
        raise forbidden(f"Documents of {schema.name!r} cannot be created (permissions.canCreate is false)")
    if operation == "delete" and not schema.permission("canDelete"):
        raise forbidden(f"Documents of {schema.name!r} cannot be deleted (permissions.canDelete is false)")
