"""A document read by its id, the hottest read. Reads run on the request's read connection
(:mod:`trellis.reads`: autocommit on PostgreSQL, no transaction), through ``reads.reading``, which runs
them once more if PostgreSQL restarted under them."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from trellis import reads, statements
from trellis.access import Acting

from .. import document_access
from ..registry import CompiledSchema
from .connections import in_transaction
from .json_text import columns, document_json, text_columns
from .statement_cache import cached_statement


def get(schema: CompiledSchema, doc_id: str, acting: Acting | None = None) -> dict[str, Any]:
    return json.loads(get_json(schema, doc_id, acting))


def get_json(schema: CompiledSchema, doc_id: str, acting: Acting | None = None) -> str:
    """One document as JSON text (404 if there is none, or if ``acting`` may not read it: the same answer)."""
    if acting is None:
        row = reads.reading(lambda connection: _first_by_id(connection, schema, doc_id))
    else:
        row = reads.reading(lambda connection: _first_readable(connection, schema, doc_id, acting))
    if row is None:
        raise document_access.missing(schema, doc_id)
    return document_json(schema, row)


def _first_readable(connection: sa.Connection, schema: CompiledSchema, doc_id: str, acting: Acting) -> Any:
    """:func:`_first_by_id` under access: the same statement with the read predicate, one round trip."""
    dialect_name = connection.dialect.name

    def build() -> sa.Select:
        table = schema.documents_table
        condition = document_access.read_condition(schema, acting)
        return sa.select(*text_columns(table, dialect_name)).where(table.c.id == sa.bindparam("doc_id"), condition)

    statement = cached_statement(schema, ("by_id", dialect_name, document_access.statement_key(schema)), build)
    rows = statements.execute_compiled(
        connection, statement, {"doc_id": doc_id, **acting.parameters()}, schema.statements
    )
    return rows[0] if rows else None


def _first_by_id(connection: sa.Connection, schema: CompiledSchema, doc_id: str) -> Any:
    """Its SQL, compiled once, runs straight on the DB-API cursor (:func:`trellis.statements.execute_compiled`,
    as the writes do): one string parameter, text and integer columns, so SQLAlchemy's execution layer would
    add nothing but CPU (``bench/results/documents.md#a-get-by-id-on-the-drivers-cursor``). A dead connection
    comes out as SQLAlchemy's error with the pool renewed, and :func:`trellis.reads.reading` reads once more
    on a fresh one."""
    rows = statements.execute_compiled(
        connection, _by_id(schema, connection.dialect.name), {"doc_id": doc_id}, schema.statements
    )
    return rows[0] if rows else None


def _by_id(schema: CompiledSchema, dialect_name: str) -> sa.Select:
    def build() -> sa.Select:
        table = schema.documents_table
        return sa.select(*text_columns(table, dialect_name)).where(table.c.id == sa.bindparam("doc_id"))

    return cached_statement(schema, ("by_id", dialect_name), build)


def locked_by_id(schema: CompiledSchema, doc_id: str) -> Any:
    """The row of a document about to be written, in the write's transaction, locked until it ends
    (PostgreSQL ``FOR UPDATE``; SQLite's one writer holds the lock); None when there is none."""
    table = schema.documents_table
    statement = cached_statement(
        schema,
        "locked",
        lambda: sa.select(*columns(table)).where(table.c.id == sa.bindparam("doc_id")).with_for_update(),
    )
    return in_transaction(statement, {"doc_id": doc_id}).first()
