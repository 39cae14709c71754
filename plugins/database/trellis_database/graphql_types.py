"""The GraphQL types a CMS schema brings in: the scalars, the document object, its create and patch inputs,
and the ``where`` input with its translation into the query compiler's condition tree."""

from __future__ import annotations

from typing import Any

from graphql import (
    GraphQLArgument,
    GraphQLBoolean,
    GraphQLField,
    GraphQLFloat,
    GraphQLID,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLString,
)
from graphql.utilities import value_from_ast_untyped

from . import aggregates, document_access
from .fields import Field
from .query import Condition, Group
from .registry import CompiledSchema

JSONScalar = GraphQLScalarType(
    "JSON",
    description="Any JSON value",
    serialize=lambda value: value,
    parse_value=lambda value: value,
    parse_literal=value_from_ast_untyped,
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


def _related_type(field: Field, objects: dict[str, GraphQLObjectType]) -> GraphQLObjectType | None:
    """The object a Relation field resolves to: a user's public fields, a schema's document; a team (and a
    schema left out of GraphQL) stays its id (None)."""
    if field.type != "Relation":
        return None
    if field.model == "User":
        return PUBLIC_USER
    if field.model in document_access.PRINCIPAL_MODELS:
        return None
    return objects.get(field.target)


def _output_type(field: Field, objects: dict[str, GraphQLObjectType]) -> Any:
    related_type = _related_type(field, objects)
    related = related_type is not None
    base = related_type if related_type is not None else SCALARS[field.type]
    if field.array:
        listed = GraphQLList(base if related else GraphQLNonNull(base))
        return GraphQLNonNull(listed) if field.required else listed
    # A required value is always there, except a relation whose target was deleted (it resolves to null).
    return GraphQLNonNull(base) if field.required and not related else base


def object_fields(schema: CompiledSchema, objects: dict[str, GraphQLObjectType]) -> dict[str, GraphQLField]:
    out = {"_id": GraphQLField(GraphQLNonNull(GraphQLID))}
    for name, field in schema.fields.items():
        out[name] = GraphQLField(_output_type(field, objects), description=field.description)
    if schema.timestamps:
        out["createdAt"] = GraphQLField(GraphQLString)
        out["updatedAt"] = GraphQLField(GraphQLString)
    return out


def input_fields(schema: CompiledSchema, create: bool) -> dict[str, GraphQLInputField]:
    out = {}
    for name, field in schema.fields.items():
        base = SCALARS[field.type]
        kind: Any = GraphQLList(GraphQLNonNull(base)) if field.array else base
        if create and field.required and field.default is None:
            kind = GraphQLNonNull(kind)
        out[name] = GraphQLInputField(kind, description=field.description)
    return out


def where_type(schema: CompiledSchema) -> GraphQLInputObjectType:
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
    ops: list[tuple[str, GraphQLInputType]] = [("eq", base), ("ne", base)]
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
