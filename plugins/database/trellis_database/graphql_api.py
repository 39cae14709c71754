"""GraphQL over the CMS-enabled schemas (graphql-core).

Built from a registry snapshot and cached on it, so it is rebuilt only when schemas change. Per
schema ``X``: query fields ``X(where, skip, limit, sort): [X!]!``, ``X__one(_id): X`` (null when there
is no such document), ``X__count(where): Int!`` (exact) and ``X__aggregate(where, groupBy, count, sum, avg,
min, max, sort, limit): Aggregate__Result!`` (the REST aggregate: ``aggregates.py``), and mutations ``createX(data)``,
``updateX(_id, data)`` (merge, like PATCH), ``deleteX(_id)``. ``where`` takes ``field``,
``field_ne|_lt|_lte|_gt|_gte|_in|_nin|_contains|_exists`` and ``AND``/``OR`` lists, compiled by the
same compiler as the REST filters. Relations resolve to nested objects: the list resolver reads the
selection set and populates one level per query (never one query per document). A Relation to ``User``
is the user's public fields (``User__Public {_id, email}``), one to ``Team`` the team's id.

Access control (schemas that opt in, CONTRACT.md "Access control"): every field and mutation runs with
the caller's ``acting`` (``document_access.acting``), and takes a ``scope: "Team:<id>"`` argument. Lists,
``__one`` and ``__count`` carry the read predicate in their statement; create grants ``owner``, update
needs ``edit``, delete needs ``delete`` (403), and a document the caller may not read is the NOT_FOUND
of a missing one, word for word. A related document the caller may not read resolves to **null** (in an
array: a null element): the id a REST populate keeps cannot stand where GraphQL expects an object, and
null is also what a deleted target gives, so the two cannot be told apart.

Limits, checked before execution: query length, lexer tokens, selection depth, total selected fields
(after fragment expansion) and aliases; each breach is a GraphQL error, not a crash.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLArgument,
    GraphQLBoolean,
    GraphQLError,
    GraphQLField,
    GraphQLFloat,
    GraphQLID,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLString,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    execute,
    parse,
    validate,
    validate_schema,
)
from graphql.error import GraphQLSyntaxError
from graphql.utilities import get_operation_ast, value_from_ast_untyped

from trellis import db
from trellis.access import Acting
from trellis.credentials import identify
from trellis.errors import APIError
from trellis.http import deleted

from . import aggregates, document_access, documents
from .crud_gate import allowed, check_permission
from .fields import MAX_ARRAY_LENGTH, Field
from .query import MAX_POPULATE_DEPTH, Condition, Group
from .registry import CompiledSchema, Snapshot

log = logging.getLogger(__name__)

JSONScalar = GraphQLScalarType(
    "JSON",
    description="Any JSON value",
    serialize=lambda value: value,
    parse_value=lambda value: value,
    parse_literal=lambda node, variables=None: value_from_ast_untyped(node, variables),
)

SUFFIXES = ("ne", "lt", "lte", "gt", "gte", "in", "nin", "contains", "exists")
SCALARS = {
    "String": GraphQLString,
    "Number": GraphQLFloat,
    "Boolean": GraphQLBoolean,
    "Date": GraphQLString,
    "ObjectId": GraphQLID,
    "Relation": GraphQLID,
    "JSON": JSONScalar,
}
SPECIAL = {
    "_id": Field(name="_id", type="ObjectId"),
    "createdAt": Field(name="createdAt", type="Date"),
    "updatedAt": Field(name="updatedAt", type="Date"),
}


class Limits:
    def __init__(self, config: dict[str, Any]) -> None:
        self.length = int(config["graphqlMaxQueryLength"])
        self.tokens = int(config["graphqlMaxTokens"])
        self.depth = int(config["graphqlMaxDepth"])
        self.fields = int(config["graphqlMaxFields"])
        self.aliases = int(config["graphqlMaxAliases"])


# ---- schema --------------------------------------------------------------------------------------------

# Type names the built schema uses itself (a CMS schema of one of these names is left out).
BUILT_IN_TYPES = frozenset(
    {
        "Query",
        "Mutation",
        "Subscription",
        "JSON",
        "Deleted__Result",
        "User__Public",
        "Aggregate__Result",
        "Aggregate__Group",
        "String",
        "Int",
        "Float",
        "Boolean",
        "ID",
    }
)
WHERE_GROUPS = ("AND", "OR")

PUBLIC_USER = GraphQLObjectType(
    "User__Public",
    {"_id": GraphQLField(GraphQLNonNull(GraphQLID)), "email": GraphQLField(GraphQLString)},
    description="A user as others may see it (a Relation field to User): never a secret",
)
SEARCH_ARGUMENT = GraphQLArgument(
    GraphQLString,
    description="Words to find in the searchable fields (every word in some field, the last also as a prefix); "
    "best match first unless sort is given",
)
AGGREGATE_GROUP = GraphQLObjectType(
    "Aggregate__Group",
    {
        "key": GraphQLField(GraphQLNonNull(JSONScalar), description="`{<field>: value}` of the group"),
        "count": GraphQLField(GraphQLInt, description="documents in the group (asked with `count: true`)"),
        **{
            op: GraphQLField(JSONScalar, description=f"`{{<field>: {op}}}` of the fields asked in `{op}`")
            for op in aggregates.OPERATIONS
        },
    },
    description="One group of an aggregate (the REST route's group, as JSON values)",
)
AGGREGATE_RESULT = GraphQLObjectType(
    "Aggregate__Result",
    {
        "groups": GraphQLField(GraphQLNonNull(GraphQLList(GraphQLNonNull(AGGREGATE_GROUP)))),
        "count": GraphQLField(GraphQLNonNull(GraphQLInt), description="the number of groups before `limit`"),
    },
)
NAMES = GraphQLList(GraphQLNonNull(GraphQLString))
SCOPE_ARGUMENT = GraphQLArgument(
    GraphQLString, description="Act as a team you are a member of (`Team:<id>`): its grants only"
)


def type_names(schema: CompiledSchema) -> set[str]:
    """The GraphQL type names and query field names one CMS schema brings in (a schema whose names meet
    another's is left out)."""
    name = schema.name
    return {
        name,
        f"{name}__Where",
        f"{name}__Input",
        f"{name}__Patch",
        f"{name}__one",
        f"{name}__count",
        f"{name}__aggregate",
    }


def build(snap: Snapshot) -> GraphQLSchema:
    """The schema of every CMS-enabled schema that can be expressed in GraphQL.

    One schema that cannot be expressed must never take the others down (issue 13.5): names that clash
    are left out before building, and when the assembled schema still does not validate, each schema is
    tried alone and the ones that fail are left out (logged), so the API of the others stays up.
    """
    usable = _without_clashes([s for s in snap.schemas if s.cms_enabled])
    schema, problems = _assemble_checked(snap, usable)
    if not problems:
        return schema
    kept = [s for s in usable if not _assemble_checked(snap, [s])[1]]
    for left_out in sorted({s.name for s in usable} - {s.name for s in kept}):
        log.warning("schema %s is left out of GraphQL: it cannot be expressed (%s)", left_out, problems[0])
    schema, problems = _assemble_checked(snap, kept)
    if problems:  # schemas that only fail together: serve none rather than fail every request
        log.warning("GraphQL serves no schema: %s", problems[0])
        schema, _ = _assemble_checked(snap, [])
    return schema


def _without_clashes(schemas: list[CompiledSchema]) -> list[CompiledSchema]:
    taken = set(BUILT_IN_TYPES)
    usable: list[CompiledSchema] = []
    for schema in schemas:
        names = type_names(schema)
        if names & taken:
            log.warning("schema %s is left out of GraphQL: its type names clash with others", schema.name)
            continue
        taken |= names
        usable.append(schema)
    return usable


def _assemble_checked(snap: Snapshot, usable: list[CompiledSchema]) -> tuple[GraphQLSchema | None, list[str]]:
    try:
        schema = _assemble(snap, usable)
        problems = [str(error) for error in validate_schema(schema)]
    except Exception as exc:  # noqa: BLE001 - graphql-core reports bad types as assertions or TypeErrors
        return None, [f"{type(exc).__name__}: {exc}"]
    return schema, problems


def _assemble(snap: Snapshot, usable: list[CompiledSchema]) -> GraphQLSchema:
    objects: dict[str, GraphQLObjectType] = {}
    for schema in usable:
        objects[schema.name] = GraphQLObjectType(
            schema.name, (lambda s=schema: _object_fields(s, objects)), description=f"A document of {schema.name}"
        )
    deleted = GraphQLObjectType(
        "Deleted__Result",
        {"_id": GraphQLField(GraphQLNonNull(GraphQLID)), "deleted": GraphQLField(GraphQLNonNull(GraphQLBoolean))},
    )
    query: dict[str, GraphQLField] = {
        "_schemas": GraphQLField(
            GraphQLNonNull(GraphQLList(GraphQLNonNull(GraphQLString))),
            resolve=lambda *_: [s.name for s in usable],
            description="Names of the schemas served here",
        ),
    }
    mutation: dict[str, GraphQLField] = {}
    for schema in usable:
        obj = objects[schema.name]
        scope = {"scope": SCOPE_ARGUMENT} if document_access.opted_in(schema) else {}
        where = GraphQLArgument(_where_type(schema))
        search = {"search": SEARCH_ARGUMENT} if (schema.storage or {}).get("search") else {}
        query[schema.name] = GraphQLField(
            GraphQLNonNull(GraphQLList(GraphQLNonNull(obj))),
            args={
                "where": where,
                "skip": GraphQLArgument(GraphQLInt),
                "limit": GraphQLArgument(GraphQLInt),
                "sort": GraphQLArgument(GraphQLString),
                **search,
                **scope,
            },
            resolve=_list_resolver(snap, schema.name),
            description=f"Documents of {schema.name}",
        )
        id_arg = {"_id": GraphQLArgument(GraphQLNonNull(GraphQLID))}
        query[f"{schema.name}__one"] = GraphQLField(
            obj,
            args={**id_arg, **scope},
            resolve=_one_resolver(snap, schema.name),
            description=f"One {schema.name} document by id; null when there is none (or you may not read it)",
        )
        query[f"{schema.name}__count"] = GraphQLField(
            GraphQLNonNull(GraphQLInt),
            args={"where": where, **search, **scope},
            resolve=_count_resolver(snap, schema.name),
            description=f"How many {schema.name} documents match (exact; only those you may read)",
        )
        query[f"{schema.name}__aggregate"] = query[f"{schema.name}_aggregate"] = GraphQLField(
            GraphQLNonNull(AGGREGATE_RESULT),
            args={
                "where": where,
                "groupBy": GraphQLArgument(NAMES, description="fields; a Date as `field:day|week|month|year`"),
                "count": GraphQLArgument(GraphQLBoolean),
                **{op: GraphQLArgument(NAMES) for op in aggregates.OPERATIONS},
                "sort": GraphQLArgument(GraphQLString, description="`count`, `-count`, a groupBy field, `-sum.price`"),
                "limit": GraphQLArgument(GraphQLInt, description="groups: 100 by default, at most 1000"),
                **search,
                **scope,
            },
            resolve=_aggregate_resolver(snap, schema.name),
            description=f"Groups of the {schema.name} documents you may read, with count, sum, avg, min, max",
        )
        id_arg = {**id_arg, **scope}
        if schema.fields:  # an input object needs at least one field: a schema without any takes no data
            data = GraphQLInputObjectType(
                f"{schema.name}__Input",
                lambda s=schema: _input_fields(s, create=True),
                description=f"A new {schema.name} document (required fields non-null)",
            )
            patch = GraphQLInputObjectType(
                f"{schema.name}__Patch",
                lambda s=schema: _input_fields(s, create=False),
                description=f"Changes to a {schema.name} document (null removes)",
            )
            mutation[f"create{schema.name}"] = GraphQLField(
                obj,
                args={"data": GraphQLArgument(GraphQLNonNull(data)), **scope},
                resolve=_create_resolver(snap, schema.name),
            )
            mutation[f"update{schema.name}"] = GraphQLField(
                obj,
                args={**id_arg, "data": GraphQLArgument(GraphQLNonNull(patch))},
                resolve=_update_resolver(snap, schema.name),
            )
        else:
            mutation[f"create{schema.name}"] = GraphQLField(
                obj, args=scope, resolve=_create_resolver(snap, schema.name)
            )
        mutation[f"delete{schema.name}"] = GraphQLField(
            deleted, args=id_arg, resolve=_delete_resolver(snap, schema.name)
        )
    return GraphQLSchema(
        query=GraphQLObjectType("Query", query),
        mutation=GraphQLObjectType("Mutation", mutation) if mutation else None,
    )


def _related_type(field: Field, objects: dict[str, GraphQLObjectType]) -> GraphQLObjectType | None:
    """The object a Relation field resolves to: a user's public fields, a schema's document; a team (and a
    schema left out of GraphQL) stays its id (None)."""
    if field.type != "Relation":
        return None
    if field.model == "User":
        return PUBLIC_USER
    if field.model in document_access.PRINCIPAL_MODELS:
        return None
    return objects.get(field.model)


def _output_type(field: Field, objects: dict[str, GraphQLObjectType]) -> Any:
    related_type = _related_type(field, objects)
    related = related_type is not None
    base = related_type if related_type is not None else SCALARS[field.type]
    if field.array:
        listed = GraphQLList(base if related else GraphQLNonNull(base))
        return GraphQLNonNull(listed) if field.required else listed
    # A required value is always there, except a relation whose target was deleted (it resolves to null).
    return GraphQLNonNull(base) if field.required and not related else base


def _object_fields(schema: CompiledSchema, objects: dict[str, GraphQLObjectType]) -> dict[str, GraphQLField]:
    out = {"_id": GraphQLField(GraphQLNonNull(GraphQLID))}
    for name, field in schema.fields.items():
        out[name] = GraphQLField(_output_type(field, objects), description=field.description)
    if schema.timestamps:
        out["createdAt"] = GraphQLField(GraphQLString)
        out["updatedAt"] = GraphQLField(GraphQLString)
    return out


def _input_fields(schema: CompiledSchema, create: bool) -> dict[str, GraphQLInputField]:
    out = {}
    for name, field in schema.fields.items():
        base = SCALARS[field.type]
        kind: Any = GraphQLList(GraphQLNonNull(base)) if field.array else base
        if create and field.required and field.default is None:
            kind = GraphQLNonNull(kind)
        out[name] = GraphQLInputField(kind, description=field.description)
    return out


def _where_type(schema: CompiledSchema) -> GraphQLInputObjectType:
    def fields() -> dict[str, GraphQLInputField]:
        out: dict[str, GraphQLInputField] = {}
        candidates = dict(SPECIAL) if schema.timestamps else {"_id": SPECIAL["_id"]}
        candidates.update(schema.fields)
        for name, field in candidates.items():
            for suffix, kind in _operators(field):
                key = name if suffix == "eq" else f"{name}_{suffix}"
                # A field's own name wins over another field's operator key (fields `a` and `a_ne`),
                # and the AND/OR lists over fields of those names.
                if key in WHERE_GROUPS or (suffix != "eq" and key in candidates):
                    continue
                out[key] = GraphQLInputField(kind)
        out["AND"] = GraphQLInputField(GraphQLList(GraphQLNonNull(where)))
        out["OR"] = GraphQLInputField(GraphQLList(GraphQLNonNull(where)))
        return out

    where = GraphQLInputObjectType(f"{schema.name}__Where", fields)
    return where


def _operators(field: Field) -> list[tuple[str, Any]]:
    if field.type == "JSON":
        return [("exists", GraphQLBoolean)]
    base = SCALARS[field.type]
    ops = [("eq", base), ("ne", base)]
    if not field.array and field.type != "Boolean":
        ops += [(op, base) for op in ("lt", "lte", "gt", "gte")]
    ops += [("in", GraphQLList(GraphQLNonNull(base))), ("nin", GraphQLList(GraphQLNonNull(base)))]
    if field.array or field.type in ("String", "ObjectId", "Relation"):
        ops.append(("contains", base))
    ops.append(("exists", GraphQLBoolean))
    return ops


def where_tree(where: dict[str, Any] | None, schema: CompiledSchema) -> Any:
    """A GraphQL ``where`` input → the condition tree of ``query.py``."""
    if not where:
        return None
    items: list[Any] = []
    for key, value in where.items():
        if key in ("AND", "OR"):
            children = [where_tree(child, schema) for child in value or []]
            items.append(Group(key.lower(), tuple(c for c in children if c is not None)))
            continue
        if value is None:
            continue
        name, op = key, "eq"
        head, _, tail = key.rpartition("_")
        exact = key in schema.fields or key in SPECIAL
        if not exact and head and tail in SUFFIXES and (head in schema.fields or head in SPECIAL):
            name, op = head, tail
        items.append(Condition(name, op, value))
    return Group("and", tuple(items)) if items else None


# ---- selection → populate tree ------------------------------------------------------------------------


def _selected(info: Any, selection_set: Any) -> list[FieldNode]:
    out: list[FieldNode] = []
    for node in selection_set.selections if selection_set else ():
        if isinstance(node, FieldNode):
            out.append(node)
        elif isinstance(node, InlineFragmentNode):
            out.extend(_selected(info, node.selection_set))
        elif isinstance(node, FragmentSpreadNode):
            fragment = info.fragments.get(node.name.value)
            if fragment is not None:
                out.extend(_selected(info, fragment.selection_set))
    return out


def populate_tree(
    info: Any, snap: Snapshot, schema: CompiledSchema, selection_sets: list[Any], depth: int = 0
) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    nodes = [field for selection in selection_sets for field in _selected(info, selection)]
    for node in nodes:
        field = schema.fields.get(node.name.value)
        if field is None or field.type != "Relation" or node.selection_set is None:
            continue
        if field.model == "User":
            tree[field.name] = {}  # documents.populate gives a user's public fields, nothing beyond
            continue
        if field.model in document_access.PRINCIPAL_MODELS:
            continue
        target = snap.document_schema(field.model)
        if target is None:
            continue
        if depth + 1 > MAX_POPULATE_DEPTH:
            raise GraphQLError(f"Relations nest at most {MAX_POPULATE_DEPTH} levels deep")
        same = [n.selection_set for n in nodes if n.name.value == field.name and n.selection_set]
        tree[field.name] = populate_tree(info, snap, target, same, depth + 1)
    return tree


# ---- resolvers -------------------------------------------------------------------------------------------


def _error(exc: APIError) -> GraphQLError:
    extensions: dict[str, Any] = {"code": exc.name, "status": exc.status}
    if exc.errors:
        extensions["errors"] = exc.errors
    return GraphQLError(exc.message, extensions=extensions)


def _schema(snap: Snapshot, name: str) -> CompiledSchema:
    return snap.document_schema(name)


@dataclass
class Caller:
    """Who runs a field: the credential, and who it acts as on the field's schema (None: no access rule
    applies) with the ``scope`` it asked for."""

    identity: Any
    acting: Acting | None
    scope: str | None


def _guard(schema: CompiledSchema, operation: str, scope: str | None = None) -> Caller:
    """The schema's CMS rule for ``operation`` (the outer gate), then who the caller acts as."""
    identity = identify()
    denied = allowed(schema, operation, identity)
    if denied is not None:
        raise _error(denied)
    try:
        return Caller(identity, document_access.acting(schema, identity, scope), scope)
    except APIError as exc:
        raise _error(exc) from None


def _finish(info: Any, snap: Snapshot, schema: CompiledSchema, docs: list[dict[str, Any]], caller: Caller) -> None:
    tree = populate_tree(info, snap, schema, [n.selection_set for n in info.field_nodes])
    if tree and docs:
        documents.populate(snap, schema, docs, tree, caller.identity, caller.scope)
        _unresolved_to_null(snap, schema, docs, tree)


def _unresolved_to_null(snap: Snapshot, schema: CompiledSchema, docs: list[Any], tree: dict[str, Any]) -> None:
    """A related document populate could not show stays its id there (under access: it may not be read,
    or it is gone); here the field's type is an object, so it becomes null (see the module's docstring)."""
    for name, subtree in tree.items():
        field = schema.fields[name]
        target = None if field.model in document_access.PRINCIPAL_MODELS else snap.document_schema(field.model)
        related: list[dict[str, Any]] = []
        for doc in docs:
            if not isinstance(doc, dict) or name not in doc:
                continue
            value = doc[name]
            if isinstance(value, list):
                doc[name] = [item if isinstance(item, dict) else None for item in value]
                related += [item for item in doc[name] if item is not None]
            elif not isinstance(value, dict):
                doc[name] = None
            else:
                related.append(value)
        if subtree and target is not None and related:
            _unresolved_to_null(snap, target, related, subtree)


def _page(skip: Any, limit: Any) -> tuple[int, int]:
    skip = 0 if skip is None else skip
    limit = 25 if limit is None else limit
    if skip < 0 or not 1 <= limit <= 1000:
        raise GraphQLError("skip must be ≥ 0 and limit between 1 and 1000")
    return skip, limit


def _list_resolver(snap: Snapshot, name: str):
    def resolve(
        _root: Any,
        info: Any,
        where: Any = None,
        skip: Any = None,
        limit: Any = None,
        sort: Any = None,
        scope: str | None = None,
        search: str | None = None,
    ):
        schema = _schema(snap, name)
        caller = _guard(schema, "read", scope)
        skip, limit = _page(skip, limit)
        try:
            condition = where_tree(where, schema)
            docs, _ = documents.find(
                schema, condition, sort, skip, limit, count=False, acting=caller.acting, search=search
            )
            _finish(info, snap, schema, docs, caller)
            return docs
        except APIError as exc:
            raise _error(exc) from None

    return resolve


def _one_resolver(snap: Snapshot, name: str):
    def resolve(_root: Any, info: Any, _id: str, scope: str | None = None):
        schema = _schema(snap, name)
        caller = _guard(schema, "read", scope)
        try:
            try:
                doc = documents.get(schema, _id, caller.acting)
            except APIError as exc:
                if exc.status == 404:
                    return None  # missing, or not readable: the same null
                raise
            _finish(info, snap, schema, [doc], caller)
            return doc
        except APIError as exc:
            raise _error(exc) from None

    return resolve


def _count_resolver(snap: Snapshot, name: str):
    def resolve(_root: Any, _info: Any, where: Any = None, scope: str | None = None, search: str | None = None):
        schema = _schema(snap, name)
        caller = _guard(schema, "read", scope)
        try:
            # The list's own count (cached per query shape, caller's subjects and change numbers): exact.
            condition = where_tree(where, schema)
            _, total = documents.find_json(schema, condition, None, 0, 1, True, caller.acting, search)
            return total
        except APIError as exc:
            raise _error(exc) from None

    return resolve


def _aggregate_resolver(snap: Snapshot, name: str):
    def resolve(
        _root: Any,
        _info: Any,
        where: Any = None,
        groupBy: list[str] | None = None,  # noqa: N803 - the argument's GraphQL name
        count: bool | None = None,
        sort: str | None = None,
        limit: int | None = None,
        scope: str | None = None,
        search: str | None = None,
        **operations: Any,
    ):
        schema = _schema(snap, name)
        caller = _guard(schema, "read", scope)
        try:
            spec = aggregates.make_spec(schema, groupBy, bool(count), operations, sort)
            condition = where_tree(where, schema)
            limit = aggregates.parse_limit(limit)
            return aggregates.aggregate(schema, spec, condition, limit, caller.acting, search)
        except APIError as exc:
            raise _error(exc) from None

    return resolve


def _mutation(snap: Snapshot, name: str, operation: str, action: Any):
    def resolve(_root: Any, info: Any, scope: str | None = None, **kwargs: Any):
        schema = _schema(snap, name)
        try:
            caller = _guard(schema, operation, scope)
            check_permission(schema, operation)
            result = action(schema, caller.acting, **kwargs)
            db.commit()
        except APIError as exc:
            db.session.rollback()
            raise _error(exc) from None
        except GraphQLError:
            db.session.rollback()
            raise
        if operation != "delete":
            try:
                _finish(info, snap, schema, [result], caller)
            except APIError as exc:
                raise _error(exc) from None
        return result

    return resolve


def _create_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, data: Any = None) -> dict[str, Any]:
        return documents.create(snap, schema, [_clean(data or {})], acting=acting)[0]

    return _mutation(snap, name, "create", action)


def _update_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, _id: str, data: Any) -> dict[str, Any]:
        return documents.patch(snap, schema, _id, data, acting)

    return _mutation(snap, name, "update", action)


def _delete_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, _id: str) -> dict[str, Any]:
        documents.delete(schema, _id, acting)
        return deleted(_id)

    return _mutation(snap, name, "delete", action)


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    """On create, an explicit null means "not given"."""
    return {key: value for key, value in data.items() if value is not None}


# ---- execution ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """A GraphQL response body and the status GraphQL-over-HTTP gives it under
    ``application/graphql-response+json``: 200 once execution started, 400 for a request that could not
    be executed (no ``data`` key), 405 for a mutation sent with GET."""

    body: dict[str, Any]
    status: int = 200


def run(
    snap: Snapshot,
    source: str,
    variables: dict[str, Any] | None,
    operation_name: str | None,
    limits: Limits,
    read_only: bool = False,
) -> Outcome:
    """Parse, check and execute one operation; ``read_only`` (GET) refuses mutations with 405."""
    if len(source) > limits.length:
        return _request_error(f"The query is longer than {limits.length} characters", "QUERY_TOO_COMPLEX")
    try:
        document = parse(source, max_tokens=limits.tokens)
    except GraphQLSyntaxError as exc:
        return Outcome({"errors": [_format(exc, "GRAPHQL_PARSE_FAILED")]}, 400)
    if read_only:
        operation = get_operation_ast(document, operation_name)
        if operation is not None and operation.operation != OperationType.QUERY:
            return _request_error(
                f"GET serves queries only; send a {operation.operation.value} with POST", "METHOD_NOT_ALLOWED", 405
            )
    breach = _check_limits(document, limits)  # before validation, whose cost grows with the query
    if breach:
        return _request_error(breach, "QUERY_TOO_COMPLEX")
    schema = snap.lazy("graphql", lambda: build(snap))
    problems = validate(schema, document)
    if problems:
        return Outcome({"errors": [_format(p, "GRAPHQL_VALIDATION_FAILED") for p in problems[:20]]}, 400)
    if _long_list(variables):
        return _request_error(f"A variable holds an array longer than {MAX_ARRAY_LENGTH} elements", "INVALID_ARGUMENTS")
    result = execute(schema, document, variable_values=variables, operation_name=operation_name)
    if result.data is None and result.errors and all(error.path is None for error in result.errors):
        # An unknown operation name or variables that do not fit their types (errors without a path):
        # the request failed before execution started.
        return Outcome({"errors": [_format(e, "INVALID_ARGUMENTS") for e in result.errors]}, 400)
    out: dict[str, Any] = {"data": result.data}
    if result.errors:
        out["errors"] = [_format(error, "INVALID_ARGUMENTS") for error in result.errors]
    return Outcome(out)


def missing_query(extensions: dict[str, Any] | None) -> Outcome:
    """A request without ``query``. Apollo's automatic persisted queries send only a hash first; with no
    store of persisted queries the answer is always "not found", in the shape Apollo's link recognises
    (message and code), so it sends the query again in full."""
    if isinstance(extensions, dict) and isinstance(extensions.get("persistedQuery"), dict):
        return _request_error("PersistedQueryNotFound", "PERSISTED_QUERY_NOT_FOUND")
    return _request_error("query: Missing data for required field.", "INVALID_ARGUMENTS")


def _long_list(value: Any) -> bool:
    """Whether a JSON value holds an array longer than a document's array field may be (variables: GraphQL
    would coerce each element before anything else looks at them; ``_in`` lists have their own, lower
    bound in the query compiler)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            if len(item) > MAX_ARRAY_LENGTH:
                return True
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return False


def _format(error: GraphQLError, code: str) -> dict[str, Any]:
    """The error as GraphQL formats it, always with ``extensions.code`` (the contract's names)."""
    if error.original_error is not None and not isinstance(error.original_error, (GraphQLError, APIError)):
        log.exception("GraphQL resolver failed", exc_info=error.original_error)
        return {"message": "Internal server error", "path": error.path, "extensions": {"code": "INTERNAL_SERVER_ERROR"}}
    formatted = error.formatted
    formatted["extensions"] = {"code": code, **(formatted.get("extensions") or {})}
    return formatted


def _request_error(message: str, code: str, status: int = 400) -> Outcome:
    return Outcome({"errors": [{"message": message, "extensions": {"code": code}}]}, status)


def _check_limits(document: Any, limits: Limits) -> str | None:
    fragments = {d.name.value: d for d in document.definitions if d.kind == "fragment_definition"}
    counts = {"fields": 0, "aliases": 0}

    class Breach(Exception):
        pass

    def walk(selection_set: Any, depth: int, seen: tuple[str, ...]) -> None:
        if selection_set is None:
            return
        for node in selection_set.selections:
            if isinstance(node, FieldNode):
                counts["fields"] += 1
                if node.alias is not None:
                    counts["aliases"] += 1
                if depth + 1 > limits.depth:
                    raise Breach(f"The query is nested deeper than {limits.depth} levels")
                if counts["fields"] > limits.fields:
                    raise Breach(f"The query selects more than {limits.fields} fields")
                if counts["aliases"] > limits.aliases:
                    raise Breach(f"The query uses more than {limits.aliases} aliases")
                walk(node.selection_set, depth + 1, seen)
            elif isinstance(node, InlineFragmentNode):
                walk(node.selection_set, depth, seen)
            elif isinstance(node, FragmentSpreadNode):
                name = node.name.value
                if name in seen or name not in fragments:
                    continue  # cycles and unknown fragments are reported by validation
                walk(fragments[name].selection_set, depth, seen + (name,))

    try:
        for definition in document.definitions:
            if isinstance(definition, OperationDefinitionNode):
                walk(definition.selection_set, 0, ())
    except Breach as exc:
        return str(exc)
    return None
