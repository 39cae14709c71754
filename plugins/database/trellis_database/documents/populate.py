"""Populate: relation ids replaced by the related documents, one query per relation field and level."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from trellis import reads
from trellis.credentials import Identity
from trellis_authentication import service as users_service

from .. import document_access
from ..crud_gate import allowed
from ..registry import CompiledSchema, Snapshot
from .json_text import columns, to_document
from .relation_checks import relation_ids


def populate(
    snapshot: Snapshot,
    schema: CompiledSchema,
    docs: list[dict[str, Any]],
    tree: dict[str, Any],
    identity: Identity | None,
    scope: str | None = None,
) -> None:
    """Replace relation ids by the related documents, one query per relation field and level. A target
    under access control is read with the caller's read predicate: one it may not read stays its bare
    id. A Relation to ``User`` shows the user's public fields (``_id``, ``email``)."""
    for name, subtree in tree.items():
        field = schema.fields[name]
        ids = relation_ids(docs, name, field.array)
        if field.model == "User":
            _replace(docs, name, field.array, users_service.public_users(sorted(ids)) if ids else {}, keep_missing=True)
            continue
        target = snapshot.document_schema(field.target)
        assert target is not None  # a schema others relate to cannot be deleted, and renames follow
        denied = allowed(target, "read", identity)
        if denied is not None:
            raise denied
        if not ids:
            continue
        acting = document_access.acting(target, identity, scope if document_access.opted_in(target) else None)
        table = target.documents_table
        condition: sa.ColumnElement[bool] = table.c.id.in_(sorted(ids))
        if acting is not None:
            condition = sa.and_(condition, document_access.read_condition(target, acting))
        statement = sa.select(*columns(table)).where(condition)
        parameters = None if acting is None else acting.parameters()
        rows = reads.reading(functools.partial(_rows, statement, parameters))
        found = {row[0]: to_document(target, row) for row in rows}
        if subtree:
            populate(snapshot, target, list(found.values()), subtree, identity, scope)
        _replace(docs, name, field.array, found, keep_missing=acting is not None)


def _replace(docs: list[dict[str, Any]], name: str, array: bool, found: dict[str, Any], keep_missing: bool) -> None:
    """Put the found documents in place of their ids. ``keep_missing``: an id not found stays the id (under
    access, "not found" includes "not readable", which must not look different from a readable one that
    is gone); otherwise a missing one is dropped from an array and null alone."""
    for doc in docs:
        value = doc.get(name)
        if array and isinstance(value, list):
            doc[name] = [found.get(v, v) for v in value] if keep_missing else [found[v] for v in value if v in found]
        elif isinstance(value, str):
            doc[name] = found.get(value, value) if keep_missing else found.get(value)


def _rows(statement: sa.Select[Any], parameters: dict[str, Any] | None, connection: sa.Connection) -> Sequence[Any]:
    return connection.execute(statement, parameters).all()
