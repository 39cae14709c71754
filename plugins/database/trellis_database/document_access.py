"""Per-document access control, the Database module's side (`docs/access.md`).

A schema opts in with ``modelOptions.conduit.authorization.enabled``. The decisions belong to the
Authorization module, reached only through ``trellis.access.control()``; this module tells it what the
opted-in schemas' tables look like (the catalog: :class:`Catalog`, :func:`describe`) and asks it, per
request, who the caller acts as (:func:`acting`). Reads add its predicate to their own statement
(``documents.find_json`` and the rest take ``acting``); writes check the document first
(:func:`require`) and tell it what they created or deleted, in the same transaction.

Schemas that do not opt in never reach any of this, and work without the Authorization module.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import sqlalchemy as sa
from flask import Flask, has_request_context
from sqlalchemy.dialects.postgresql import JSONB

from trellis import access, current, db
from trellis.access import ADMIN, Acting, FieldRef, ResourceTable
from trellis.credentials import identify
from trellis.errors import APIError, bad_request, forbidden, not_found
from trellis_authentication import service as users_service

from .fields import Field
from .registry import CompiledSchema, snapshot

# Relation targets that are not schemas with documents: users and teams, kept by the Authentication module.
PRINCIPAL_MODELS = frozenset({"User", "Team"})


def options(schema: CompiledSchema) -> dict[str, Any]:
    return schema.options.get("conduit", {}).get("authorization") or {}


def opted_in(schema: CompiledSchema | None) -> TypeGuard[CompiledSchema]:
    return schema is not None and schema.table is not None and bool(options(schema).get("enabled"))


def control() -> access.AccessControl:
    found = access.control()
    if found is None:  # schema_service refuses to opt in without it; a module removed later lands here
        raise APIError(503, "Access control is enabled on this schema but the Authorization module is not installed")
    return found


def sharing() -> access.Sharing:
    """The one job of access control the sharing routes use."""
    return control()


# ---- describing tables ----------------------------------------------------------------------------


def describe(schema: CompiledSchema, aliased: bool = False) -> ResourceTable:
    """The schema as the Authorization module sees it, built once per compiled schema."""
    key = ("access", aliased)
    found = schema.statements.get(key)
    if found is None:
        dialect = db.engine().dialect.name
        table: Any = schema.documents_table.alias(f"acc_{schema.name}") if aliased else schema.documents_table
        refs = {
            name: field_ref(table, field, dialect)
            for name, field in schema.fields.items()
            if field.type == "Relation" and field.model
        }
        fields = {name: relation for name, relation in (options(schema).get("fields") or {}).items()}
        found = schema.statements[key] = ResourceTable(schema.name, table, refs, fields, family_of(schema.name))
    return found


def family_of(schema_name: str) -> str:
    """The event family of a schema's document changes (``database.<Schema>``)."""
    return f"database.{schema_name}"


def field_ref(table: Any, field: Field, dialect: str) -> FieldRef:
    """How SQL (and Python) reads the ids a Relation field holds: its typed column for a single id, the
    JSON array in ``data`` for a list (PostgreSQL: the ``?|``/``?`` operators; SQLite: ``json_each``)."""
    name = field.name
    if not field.array:
        column = table.c[field.column]
        return FieldRef(
            name,
            field.target,
            holds_any=lambda param: access.any_of(column, param, dialect),
            refers_to=lambda other: column == other,
            ids=lambda doc: [doc[name]] if isinstance(doc.get(name), str) else [],
        )
    if dialect == "postgresql":
        items = sa.type_coerce(table.c.data, JSONB)[name]
        return FieldRef(
            name,
            field.target,
            holds_any=lambda param: items.has_any(sa.bindparam(param, type_=sa.ARRAY(sa.String))),
            refers_to=lambda other: items.has_key(other),
            ids=lambda doc: [v for v in doc.get(name) or () if isinstance(v, str)],
        )

    def each() -> Any:
        return sa.func.json_each(table.c.data, f"$.{name}").table_valued("value")

    def holds_any(param: str) -> sa.ColumnElement[bool]:
        values = each()
        return sa.exists(
            sa.select(sa.literal_column("1"))
            .select_from(values)
            .where(values.c.value.in_(sa.bindparam(param, expanding=True)))
        )

    def refers_to(other: Any) -> sa.ColumnElement[bool]:
        values = each()
        return sa.exists(sa.select(sa.literal_column("1")).select_from(values).where(values.c.value == other))

    return FieldRef(
        name,
        field.target,
        holds_any=holds_any,
        refers_to=refers_to,
        ids=lambda doc: [v for v in doc.get(name) or () if isinstance(v, str)],
    )


class Catalog:
    """The opted-in schemas, by name (registered with ``trellis.access``)."""

    def resource(self, name: str, aliased: bool = False) -> ResourceTable | None:
        schema = snapshot().document_schema(name)
        return describe(schema, aliased) if opted_in(schema) else None

    def names(self) -> list[str]:
        return [schema.name for schema in snapshot().schemas if opted_in(schema)]


def init_app(app: Flask) -> None:
    access.register_catalog(app, Catalog())


# ---- requests -------------------------------------------------------------------------------------


def scope_argument() -> str | None:
    """The request's ``scope`` (None without one). A request with no query string (a get by id) never
    parses one: building ``request.args`` is a visible share of a get by id
    (``bench/results/modules.md#query-strings``)."""
    if not has_request_context():
        return None
    req = current.request()
    if not req.environ.get("QUERY_STRING"):
        return None
    return req.args.get("scope") or None


def acting(schema: CompiledSchema, identity: Any, scope: str | None = None) -> Acting | None:
    """Who the caller acts as on ``schema``; None when no access rule applies (the schema did not opt in,
    or an administrator without ``scope``). 403 for a team scope the caller is not in."""
    if not opted_in(schema):
        if scope is not None:
            raise bad_request(
                f"scope applies to schemas under access control; {schema.name} is not", {"scope": ["Not applicable"]}
            )
        return None
    found = control().acting(identity, scope)
    return None if found.admin and found.scope is None else found


def relation_reader(target: CompiledSchema | None, acting_as: Acting | None) -> Acting | None:
    """Who must be able to read ``target`` for a write to name one of its documents in a Relation field;
    None when no rule applies (``target`` is not under access control, or an administrator writes).

    The writer's ``acting_as`` (its scope included) when the written schema is under access control;
    otherwise (a schema that did not opt in, or a write whose rows were already filtered by access) the
    request's caller, anonymous callers included: naming a document is the same question whichever
    schema holds the Relation field."""
    if not opted_in(target):
        return None
    if acting_as is None:
        if not has_request_context():
            return None
        acting_as = control().acting(identify(), None)
    return None if acting_as.admin and acting_as.scope is None else acting_as


def nameable_teams() -> set[str] | None:
    """The teams the request's caller may name in a Relation to ``Team``: those it is a member of, directly
    or through a sub-team (as in a grant), so a write neither confirms a stranger's team nor hands it the
    relation a field-backed ``Team`` field holds; None when any team may be named (administrators)."""
    if not has_request_context():
        return None
    identity = identify()
    if identity is None:  # anonymous callers belong to no team
        return set()
    if identity.is_admin:
        return None
    return set(users_service.team_ids_of(identity.id)) if identity.id is not None else set()


def read_condition(
    schema: CompiledSchema, acting_as: Acting, permission: str = "read", membership: bool = False
) -> sa.ColumnElement[bool]:
    """The predicate for ``permission`` over the schema's table (bound parameters: ``acting_as.parameters()``);
    ``membership``: its form for a caller who holds few documents (``trellis.access.Predicates.predicate``)."""
    return control().predicate(describe(schema), permission, db.engine().dialect.name, membership)


def held(schema: CompiledSchema, permission: str = "read") -> sa.Select:
    """The ids of the schema's documents the caller's grants give ``permission`` on (bound parameters:
    ``Acting.parameters()``)."""
    return control().held(describe(schema), permission, db.engine().dialect.name)


def change_families(schema: CompiledSchema) -> list[str]:
    """Event families whose change numbers key a count under access (see ``documents.find_json``): worked
    out once per compiled schema and definitions' version, not per request (same section)."""
    key = ("families", statement_key(schema))
    found = schema.statements.get(key)
    if found is None:
        found = schema.statements[key] = control().change_families(describe(schema))
    return found


def statement_key(schema: CompiledSchema) -> Any:
    """What a statement built with a predicate depends on besides the schema: the definitions' version."""
    return ("access", control().version(schema.name))


def missing(schema: CompiledSchema, doc_id: str) -> APIError:
    """The one answer for a document that does not exist and for one the caller may not read."""
    return not_found(f"No {schema.name} document with id {doc_id!r}")


def require(
    schema: CompiledSchema, acting_as: Acting | None, doc_id: str, permission: str, exists: bool = False
) -> None:
    """Before a write to one document: 404 when the caller may not read it (or it does not exist), 403
    when it may read it but not ``permission`` it. Read in the write's transaction. ``exists``: also
    check that the document exists when no rule applies (administrators)."""
    if acting_as is None and not exists:
        return
    flags = control().allowed(describe(schema), acting_as or ADMIN, doc_id, ("read", permission))
    if flags is None or not flags["read"]:
        raise missing(schema, doc_id)
    if not flags[permission]:
        raise forbidden(f"You may read this {schema.name} document but not {permission} it")


def created(schema: CompiledSchema, acting_as: Acting | None, doc_ids: list[str]) -> None:
    if acting_as is not None and opted_in(schema):
        control().created(schema.name, doc_ids, acting_as)


def owner_parameters(schema: CompiledSchema, acting_as: Acting | None) -> dict[str, Any] | None:
    """The parameters of :func:`owner_grant` for this caller; None when a create grants nothing (the schema
    is not under access control, or an administrator creates)."""
    if acting_as is None or not opted_in(schema):
        return None
    return control().owner_parameters(acting_as)


def owner_grant(schema: CompiledSchema, written: sa.CTE) -> sa.Insert:
    """:func:`created` as part of a create's own statement (``written``: its INSERT, returning ``id``)."""
    return control().owner_grant(schema.name, written)


def forget(schema: CompiledSchema, written: sa.CTE) -> sa.Delete | None:
    """:func:`deleted` as part of a deletion's own statement; None when the schema is not under access control."""
    return control().forget_resources(schema.name, written) if opted_in(schema) else None


def deleted(schema: CompiledSchema, doc_ids: list[str]) -> dict[str, list[list[str]]]:
    """Remove the deleted documents' tuples; returns them by id (for the deletion's event, see
    ``documents.change_events``)."""
    if opted_in(schema) and doc_ids:
        return control().deleted(schema.name, doc_ids)
    return {}
