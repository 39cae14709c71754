"""Deleting one document, and its tuples with it. Used by REST, custom endpoints and GraphQL alike."""

from __future__ import annotations

import sqlalchemy as sa

from trellis import db, events
from trellis.access import Acting
from trellis.db import utcnow
from trellis.errors import not_found
from trellis.triggers import watching

from .. import counts, document_access
from ..registry import CompiledSchema
from .by_id import locked_by_id
from .change_events import record
from .connections import commits_alone, execute_write, write_in_transaction
from .json_sql import concat, document_sql
from .json_text import columns, to_document
from .statement_cache import dialect
from .write_access import access_parts


def delete(schema: CompiledSchema, doc_id: str, acting: Acting | None = None) -> None:
    """Delete one document (404 if there is none, or ``acting`` may not read it; 403 if it may read but
    not delete it). Its tuples go in the same transaction (PostgreSQL: the same statement)."""
    triggers = watching(schema.name, "delete")
    if dialect() == "postgresql" and triggers is None:
        _delete_one(schema, doc_id, acting, commits_alone())
        return
    document_access.require(schema, acting, doc_id, "delete")
    table = schema.documents_table
    if triggers is not None:
        row = locked_by_id(schema, doc_id)
        if row is None:
            raise not_found(f"No {schema.name} document with id {doc_id!r}")
        triggers.before(schema.name, "delete", to_document(schema, row), None)
    rows = write_in_transaction(
        schema,
        "delete",
        lambda: sa.delete(table).where(table.c.id == sa.bindparam("doc_id")).returning(*columns(table)),
        {"doc_id": doc_id},
    )
    if not rows:
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    grants = document_access.deleted(schema, [doc_id])
    previous = to_document(schema, rows[0])
    record("delete", schema, [doc_id], [previous], grants)
    if triggers is not None:
        triggers.after(schema.name, "delete", previous, None)


def _delete_one(schema: CompiledSchema, doc_id: str, acting: Acting | None, alone: bool) -> None:
    """PostgreSQL: the document, its tuples and its event ``{"document": {"_id"}, "previous": <it>,
    "grants": [[subject, relation], …]}`` (under access control) in one statement. ``alone`` under access:
    the caller's predicates in its WHERE, as for an update."""
    guarded = alone and acting is not None
    if not alone:
        document_access.require(schema, acting, doc_id, "delete")
    topic = f"{counts.family(schema.name)}.delete"
    table = schema.documents_table

    def build() -> sa.Select:
        condition = [table.c.id == sa.bindparam("doc_id")] + (
            access_parts(schema, acting, "delete") if guarded and acting is not None else []
        )
        written = sa.delete(table).where(*condition).returning(*columns(table)).cte("written")
        forget = document_access.forget(schema, written)
        parts = ['{"document":{"_id":', sa.cast(sa.func.to_json(written.c.id), sa.Text), '},"previous":']
        parts.append(document_sql(schema, *(written.c[c.name] for c in columns(table))))
        ctes = []
        if forget is not None:
            gone = forget.cte("forgotten")
            pairs = sa.func.json_agg(sa.func.json_build_array(gone.c.subject, gone.c.relation))
            held = sa.select(sa.cast(pairs, sa.Text)).where(gone.c.resource_id == written.c.id).scalar_subquery()
            parts += [',"grants":', sa.func.coalesce(held, db.sql_text("[]"))]
            ctes.append(gone)
        ctes += events.recorded_by(topic, written, concat(*parts, "}"), alone)
        return sa.select(written.c.id).add_cte(*ctes)

    shape = ("delete", alone, events.enabled(), guarded and document_access.statement_key(schema))
    parameters = {"doc_id": doc_id, "now": utcnow(), **(acting.parameters() if guarded and acting is not None else {})}
    if not execute_write(schema, shape, build, parameters, alone):
        if guarded:
            document_access.require(schema, acting, doc_id, "delete")
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    events.written(topic, alone)
