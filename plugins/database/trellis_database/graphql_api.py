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

Access control (schemas that opt in, ``docs/access.md``): every field and mutation runs with
the caller's ``acting`` (``document_access.acting``), and takes a ``scope: "Team:<id>"`` argument. Lists,
``__one`` and ``__count`` carry the read predicate in their statement; create grants ``owner``, update
needs ``edit``, delete needs ``delete`` (403), and a document the caller may not read is the NOT_FOUND
of a missing one, word for word. A related document the caller may not read resolves to **null** (in an
array: a null element): the id a REST populate keeps cannot stand where GraphQL expects an object, and
null is also what a deleted target gives, so the two cannot be told apart.

The files: ``graphql_types.py`` (the types a schema brings in, ``where``), ``graphql_schema.py`` (the
fields, built defensively), ``graphql_resolvers.py`` (what each field runs) and this one (execution).

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
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    execute_sync,
    parse,
    validate,
)
from graphql.error import GraphQLSyntaxError
from graphql.utilities import get_operation_ast

from trellis.errors import APIError

from .fields import MAX_ARRAY_LENGTH
from .graphql_resolvers import Caller, populate_tree
from .graphql_schema import build, type_names
from .graphql_types import BUILT_IN_TYPES, where_tree
from .registry import Snapshot

__all__ = [
    "BUILT_IN_TYPES",
    "Caller",
    "Limits",
    "Outcome",
    "build",
    "missing_query",
    "populate_tree",
    "run",
    "type_names",
    "where_tree",
]

log = logging.getLogger(__name__)


class Limits:
    def __init__(self, config: dict[str, Any]) -> None:
        self.length = int(config["graphqlMaxQueryLength"])
        self.tokens = int(config["graphqlMaxTokens"])
        self.depth = int(config["graphqlMaxDepth"])
        self.fields = int(config["graphqlMaxFields"])
        self.aliases = int(config["graphqlMaxAliases"])


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
    result = execute_sync(schema, document, variable_values=variables, operation_name=operation_name)
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
    formatted: dict[str, Any] = dict(error.formatted)
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
