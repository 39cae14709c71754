"""The resolvers of the GraphQL fields: each runs the REST path's gate and service call for the caller, then
populates the relations its selection asks for, one level per query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import FieldNode, FragmentSpreadNode, GraphQLError, InlineFragmentNode

from trellis import db
from trellis.access import Acting
from trellis.credentials import identify
from trellis.errors import APIError
from trellis.http import deleted

from . import aggregates, document_access, documents
from .crud_gate import allowed, check_permission
from .graphql_types import where_tree
from .query import MAX_POPULATE_DEPTH
from .registry import CompiledSchema, Snapshot

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
        target = snap.document_schema(field.target)
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
    schema = snap.document_schema(name)
    assert schema is not None  # GraphQL's types are built from this snapshot's schemas
    return schema


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
    or it is gone); here the field's type is an object, so it becomes null (see ``graphql_api``'s docstring)."""
    for name, subtree in tree.items():
        field = schema.fields[name]
        target = None if field.target in document_access.PRINCIPAL_MODELS else snap.document_schema(field.target)
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


def list_resolver(snap: Snapshot, name: str):
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


def one_resolver(snap: Snapshot, name: str):
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


def count_resolver(snap: Snapshot, name: str):
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


def aggregate_resolver(snap: Snapshot, name: str):
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


def create_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, data: Any = None) -> dict[str, Any]:
        return documents.create(snap, schema, [_clean(data or {})], acting=acting)[0]

    return _mutation(snap, name, "create", action)


def update_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, _id: str, data: Any) -> dict[str, Any]:
        return documents.patch(snap, schema, _id, data, acting)

    return _mutation(snap, name, "update", action)


def delete_resolver(snap: Snapshot, name: str):
    def action(schema: CompiledSchema, acting: Acting | None, _id: str) -> dict[str, Any]:
        documents.delete(schema, _id, acting)
        return deleted(_id)

    return _mutation(snap, name, "delete", action)


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    """On create, an explicit null means "not given"."""
    return {key: value for key, value in data.items() if value is not None}
