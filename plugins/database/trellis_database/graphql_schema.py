"""The GraphQL schema of the CMS-enabled schemas: a query field, ``__one``, ``__count`` and ``__aggregate`` per
schema and its create, update and delete mutations, built defensively so that one schema that cannot be
expressed never takes the others down."""

from __future__ import annotations

import functools
import logging

from graphql import (
    GraphQLArgument,
    GraphQLBoolean,
    GraphQLField,
    GraphQLID,
    GraphQLInputObjectType,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLString,
    validate_schema,
)

from . import aggregates, document_access
from .graphql_resolvers import (
    aggregate_resolver,
    count_resolver,
    create_resolver,
    delete_resolver,
    list_resolver,
    one_resolver,
    update_resolver,
)
from .graphql_types import (
    AGGREGATE_RESULT,
    BUILT_IN_TYPES,
    NAMES,
    SCOPE_ARGUMENT,
    SEARCH_ARGUMENT,
    input_fields,
    object_fields,
    where_type,
)
from .registry import CompiledSchema, Snapshot

log = logging.getLogger(__name__)


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

    One schema that cannot be expressed must never take the others down: names that clash
    are left out before building, and when the assembled schema still does not validate, each schema is
    tried alone and the ones that fail are left out (logged), so the API of the others stays up.
    """
    usable = _without_clashes([s for s in snap.schemas if s.cms_enabled])
    schema, problems = _assemble_checked(snap, usable)
    if schema is not None and not problems:
        return schema
    kept = [s for s in usable if not _assemble_checked(snap, [s])[1]]
    for left_out in sorted({s.name for s in usable} - {s.name for s in kept}):
        log.warning("schema %s is left out of GraphQL: it cannot be expressed (%s)", left_out, problems[0])
    schema, problems = _assemble_checked(snap, kept)
    if schema is None or problems:  # schemas that only fail together: serve none rather than fail every request
        log.warning("GraphQL serves no schema: %s", problems[0])
        return _assemble(snap, [])
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
            schema.name, functools.partial(object_fields, schema, objects), description=f"A document of {schema.name}"
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
        where = GraphQLArgument(where_type(schema))
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
            resolve=list_resolver(snap, schema.name),
            description=f"Documents of {schema.name}",
        )
        id_arg = {"_id": GraphQLArgument(GraphQLNonNull(GraphQLID))}
        query[f"{schema.name}__one"] = GraphQLField(
            obj,
            args={**id_arg, **scope},
            resolve=one_resolver(snap, schema.name),
            description=f"One {schema.name} document by id; null when there is none (or you may not read it)",
        )
        query[f"{schema.name}__count"] = GraphQLField(
            GraphQLNonNull(GraphQLInt),
            args={"where": where, **search, **scope},
            resolve=count_resolver(snap, schema.name),
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
            resolve=aggregate_resolver(snap, schema.name),
            description=f"Groups of the {schema.name} documents you may read, with count, sum, avg, min, max",
        )
        id_arg = {**id_arg, **scope}
        if schema.fields:  # an input object needs at least one field: a schema without any takes no data
            data = GraphQLInputObjectType(
                f"{schema.name}__Input",
                functools.partial(input_fields, schema, create=True),
                description=f"A new {schema.name} document (required fields non-null)",
            )
            patch = GraphQLInputObjectType(
                f"{schema.name}__Patch",
                functools.partial(input_fields, schema, create=False),
                description=f"Changes to a {schema.name} document (null removes)",
            )
            mutation[f"create{schema.name}"] = GraphQLField(
                obj,
                args={"data": GraphQLArgument(GraphQLNonNull(data)), **scope},
                resolve=create_resolver(snap, schema.name),
            )
            mutation[f"update{schema.name}"] = GraphQLField(
                obj,
                args={**id_arg, "data": GraphQLArgument(GraphQLNonNull(patch))},
                resolve=update_resolver(snap, schema.name),
            )
        else:
            mutation[f"create{schema.name}"] = GraphQLField(obj, args=scope, resolve=create_resolver(snap, schema.name))
        mutation[f"delete{schema.name}"] = GraphQLField(
            deleted, args=id_arg, resolve=delete_resolver(snap, schema.name)
        )
    return GraphQLSchema(
        query=GraphQLObjectType("Query", query),
        mutation=GraphQLObjectType("Mutation", mutation) if mutation else None,
    )
