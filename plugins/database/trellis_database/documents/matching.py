"""Writes over every document matching a condition tree, for custom endpoints: delete them, lock them for
an update, or find one the caller may read but not write."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from trellis.access import Acting
from trellis.triggers import watching

from .. import document_access
from ..query import Compiler
from ..registry import CompiledSchema
from .change_events import record
from .connections import in_transaction
from .json_text import columns, to_document
from .statement_cache import dialect
from .write_access import with_access


def delete_matching(schema: CompiledSchema, where: Any, acting: Acting | None = None) -> int:
    """Delete every document matching ``where`` (a condition tree) that ``acting`` may delete; returns how many."""
    table = schema.documents_table
    condition = with_access(schema, Compiler(schema, dialect()).where(where), acting, "delete")
    parameters = None if acting is None else acting.parameters()
    triggers = watching(schema.name, "delete")
    if triggers is not None:  # each document as it is before it goes, locked meanwhile
        found = sa.select(*columns(table)).order_by(table.c.id).with_for_update()
        for row in in_transaction(found if condition is None else found.where(condition), parameters).all():
            triggers.before(schema.name, "delete", to_document(schema, row), None)
    statement = sa.delete(table).returning(*columns(table))
    if condition is not None:
        statement = statement.where(condition)
    rows = in_transaction(statement, parameters).all()
    grants = document_access.deleted(schema, [row[0] for row in rows])
    gone = [to_document(schema, row) for row in rows]
    if rows:
        record("delete", schema, [row[0] for row in rows], gone, grants)
    if triggers is not None:
        for doc in gone:
            triggers.after(schema.name, "delete", doc, None)
    return len(rows)


def locked_matching(
    schema: CompiledSchema, where: Any, limit: int, acting: Acting | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(id, data)`` of up to ``limit`` documents matching ``where`` that ``acting`` may edit, locked for an
    update in this transaction (custom endpoints read them to compute their assignments)."""
    table = schema.documents_table
    condition = with_access(schema, Compiler(schema, dialect()).where(where), acting, "edit")
    statement = sa.select(table.c.id, table.c.data).order_by(table.c.id).limit(limit).with_for_update()
    if condition is not None:
        statement = statement.where(condition)
    rows = in_transaction(statement, None if acting is None else acting.parameters()).all()
    return [(doc_id, data) for doc_id, data in rows]


def denied_matching(schema: CompiledSchema, where: Any, acting: Acting, permission: str) -> str | None:
    """The id of one document matching ``where`` that ``acting`` may read but not ``permission``, or None:
    a bulk write (custom endpoints) refuses with 403 rather than skip it, as a single document's route would."""
    table = schema.documents_table
    condition = Compiler(schema, dialect()).where(where)
    parts = [
        document_access.read_condition(schema, acting),
        # coalesce: a field-backed relation over a NULL column makes the predicate NULL, not false
        sa.not_(sa.func.coalesce(document_access.read_condition(schema, acting, permission), sa.false())),
    ]
    statement = sa.select(table.c.id).where(*([condition] if condition is not None else []), *parts).limit(1)
    return in_transaction(statement, acting.parameters()).scalar()
