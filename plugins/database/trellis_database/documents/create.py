"""Creating documents: one, or a batch all or nothing. Used by REST, ``/many``, custom endpoints and
GraphQL alike."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError

from trellis import db, events, statements
from trellis.access import Acting
from trellis.db import new_id, utcnow
from trellis.errors import APIError, bad_request
from trellis.triggers import Queued, watching

from .. import counts, document_access
from ..registry import CompiledSchema, Snapshot
from .change_events import created_payload, record
from .connections import commits_alone, execute_write, write_in_transaction
from .json_text import document_json, serialise, stamp, to_document
from .relation_checks import check_relations
from .statement_cache import dialect
from .uniqueness import unique_conflict, unique_within
from .validation import validate

MAX_MANY = 1000
_BASE_COLUMNS = ("id", "data", "created_at", "updated_at", "version")


def create(
    snapshot: Snapshot, schema: CompiledSchema, bodies: list[Any], many: bool = False, acting: Acting | None = None
) -> list[dict[str, Any]]:
    """Validate and insert documents (all or nothing); ``many`` numbers errors by position (``docs.<i>``).
    Under access, ``acting``'s user (or scope team) owns them, granted in the same transaction."""
    docs, text = _create(snapshot, schema, bodies, many, acting)
    return docs if text is None else [json.loads(text)]


def create_json(snapshot: Snapshot, schema: CompiledSchema, body: Any, acting: Acting | None = None) -> str:
    """:func:`create` of one document, as its JSON text: serialised once, for its event and the answer."""
    docs, text = _create(snapshot, schema, [body], False, acting)
    return text if text is not None else serialise(docs[0])


def _create(
    snapshot: Snapshot, schema: CompiledSchema, bodies: list[Any], many: bool, acting: Acting | None
) -> tuple[list[dict[str, Any]], str | None]:
    """:func:`create`'s work: the documents as dicts, or (a single document on PostgreSQL) none and the
    document's JSON text."""
    if many and not 1 <= len(bodies) <= MAX_MANY:
        raise bad_request(f"docs must hold 1 to {MAX_MANY} documents", {"docs": ["Wrong number of documents"]})
    values: list[dict[str, Any]] = []
    errors: dict[str, Any] = {}
    for index, body in enumerate(bodies):
        try:
            values.append(validate(schema, body, "create")[0])
        except APIError as exc:
            if not many:
                raise
            errors[str(index)] = exc.errors or {"_schema": [exc.message]}
    if errors:
        raise bad_request("Some documents do not match the schema " + schema.name, {"docs": errors})
    triggers = watching(schema.name, "create")
    if triggers is not None and triggers.runs_before(schema.name, "create"):  # checked as a client's body is
        values = [
            validate(schema, triggers.before(schema.name, "create", value, None), "create")[0] for value in values
        ]
    if many:
        unique_within(schema, values)
    check_relations(snapshot, schema, values, prefix="docs." if many else "", acting=acting)
    now = utcnow()
    if len(values) == 1 and dialect() == "postgresql":
        queued = triggers.queue(schema.name, "create") if triggers is not None else None
        try:
            return [], _create_one(schema, values[0], now, acting, queued)
        except IntegrityError as exc:
            raise unique_conflict(schema, exc) from None
    rows: list[dict[str, Any]] = [
        {"id": new_id(), "data": data, "created_at": now, "updated_at": now, "version": 0} for data in values
    ]
    docs = [to_document(schema, (r["id"], r["data"], now, now, 0)) for r in rows]
    try:
        if len(rows) == 1:
            write_in_transaction(schema, "insert", lambda: _insert_statement(schema), rows[0])
        else:  # one statement for the batch (an unnest of column arrays on PostgreSQL)
            statements.insert_rows(db.session.connection(), schema.documents_table, rows)
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    document_access.created(schema, acting, [r["id"] for r in rows])
    record("create", schema, docs)
    if triggers is not None:
        for doc in docs:
            triggers.after(schema.name, "create", doc, None)
    return docs, None


def _create_one(
    schema: CompiledSchema, data: dict[str, Any], now: datetime, acting: Acting | None, queued: Queued | None
) -> str:
    """PostgreSQL: the document, its event, its owner tuple and its after-triggers' runs (``queued``) in one
    statement. The document's JSON text,
    spliced around ``data``'s (:func:`.json_text.document_json`), which is also the column's value: the data
    is encoded once, and no dict of the document is made
    (``bench/results/documents.md#a-create-spliced-as-json-text``)."""
    alone = commits_alone()
    grant = document_access.owner_parameters(schema, acting)
    topic = f"{counts.family(schema.name)}.create"

    def build() -> sa.Select:
        from_text = sa.cast(sa.bindparam("data", type_=sa.Text), JSONB)  # the parameter is already JSON text
        # Both timestamps are the event's ``now``: the driver adapts a datetime once per name.
        now_parameter = sa.bindparam("now", type_=schema.documents_table.c.created_at.type)
        inserted = _insert_statement(schema, data=from_text, created_at=now_parameter, updated_at=now_parameter)
        written = inserted.returning(schema.documents_table.c.id).cte("written")
        payload = sa.bindparam("payload", type_=sa.Text)  # the event's, which the queued runs' splice too
        parts = events.recorded_by(topic, written, payload, alone)
        if grant is not None:
            parts.append(document_access.owner_grant(schema, written).cte("granted"))
        if queued is not None:
            parts.append(queued.part(written, payload))
        return sa.select(written.c.id).add_cte(*parts)

    doc_id, data_text, stamped = new_id(), serialise(data), stamp(now)
    text = document_json(schema, (doc_id, data_text, stamped, stamped, 0))
    change = created_payload(text)
    parameters = {"id": doc_id, "data": data_text, "version": 0, "now": now, "payload": change}
    parameters.update(grant or {})
    parameters.update(queued.parameters if queued is not None else {})
    shape = ("create", alone, events.enabled(), grant is not None, queued and queued.key)
    execute_write(schema, shape, build, parameters, alone)
    events.written(topic, alone)
    if queued is not None:
        queued.written(change, alone)
    return text


def _insert_statement(schema: CompiledSchema, **expressions: sa.ColumnElement[Any]) -> sa.Insert:
    """One document's INSERT, naming its columns (the generated ones are the database's), each its own
    parameter unless ``expressions`` gives its value."""
    table = schema.documents_table
    values = {name: sa.bindparam(name, type_=table.c[name].type) for name in _BASE_COLUMNS}
    return sa.insert(table).values({**values, **expressions})
