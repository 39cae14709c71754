"""Updating documents: a replace (PUT) or a merge (PATCH), one or several. Used by REST, ``/many``, custom
endpoints and GraphQL alike."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError

from trellis import events
from trellis.access import Acting
from trellis.db import utcnow
from trellis.errors import not_found
from trellis.triggers import Triggers, watching

from .. import counts, document_access
from ..registry import CompiledSchema, Snapshot
from .by_id import locked_by_id
from .change_events import record
from .connections import commits_alone, execute_write, write_in_transaction
from .json_sql import concat, document_sql
from .json_text import columns, serialise, to_document
from .relation_checks import check_relations, has_relations
from .statement_cache import dialect
from .uniqueness import unique_conflict
from .validation import validate
from .write_access import access_parts


def update(
    snapshot: Snapshot,
    schema: CompiledSchema,
    changes: list[tuple[str, Any]],
    mode: str,
    acting: Acting | None = None,
) -> list[dict[str, Any]]:
    """Validate and apply ``(doc_id, body)`` changes: ``mode`` "replace" (PUT: the whole document) or
    "patch" (PATCH: a merge, ``null`` removes). A missing document is a 404; under access, so is one
    ``acting`` may not read, and one it may read but not edit is a 403."""
    return [
        json.loads(text) if isinstance(text, str) else text for text in _update(snapshot, schema, changes, mode, acting)
    ]


def update_json(
    snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any, mode: str, acting: Acting | None = None
) -> str:
    """:func:`update` of one document, as its JSON text. On PostgreSQL the statement returns the document as
    JSON text, which is the answer: not decoded into a dict only to be encoded again
    (``bench/results/documents.md#an-update-answered-as-text``)."""
    written = _update(snapshot, schema, [(doc_id, body)], mode, acting)[0]
    return written if isinstance(written, str) else serialise(written)


def patch(
    snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any, acting: Acting | None = None
) -> dict[str, Any]:
    return update(snapshot, schema, [(doc_id, body)], "patch", acting)[0]


def _update(
    snapshot: Snapshot, schema: CompiledSchema, changes: list[tuple[str, Any]], mode: str, acting: Acting | None
) -> list[str] | list[dict[str, Any]]:
    """:func:`update`'s work: the documents written, as JSON text (PostgreSQL) or as dicts (SQLite, which
    also needs them for the event)."""
    triggers = watching(schema.name, "update")
    if triggers is not None:
        return _update_triggered(snapshot, schema, changes, mode, acting, triggers)
    checked = [(doc_id, *validate(schema, body, mode)) for doc_id, body in changes]
    postgresql = dialect() == "postgresql"
    # One document, nothing to check in a transaction: one statement that commits alone, whose access
    # predicate is part of its WHERE (read by the statement, a miss tells 404 from 403 afterwards).
    alone = len(checked) == 1 and not has_relations(schema, [values for _, values, _ in checked]) and commits_alone()
    if not alone:
        for doc_id, _, _ in checked:
            document_access.require(schema, acting, doc_id, "edit")
    check_relations(
        snapshot, schema, [values for _, values, _ in checked], acting=acting, doc_ids=[i for i, _, _ in checked]
    )
    now = utcnow()
    texts: list[str] = []  # PostgreSQL's answers
    docs: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    try:
        for doc_id, values, removed in checked:
            key, data, params = _data_change(schema, mode, values, removed)
            if postgresql:
                texts.append(_update_one(schema, key, data, {**params, "doc_id": doc_id, "now": now}, acting, alone))
                continue
            before = locked_by_id(schema, doc_id)
            rows = write_in_transaction(
                schema,
                key,
                functools.partial(_update_statement, schema, data),
                {**params, "doc_id": doc_id, "now": now},
            )
            if not rows:
                raise not_found(f"No {schema.name} document with id {doc_id!r}")
            docs.append(to_document(schema, rows[0]))
            previous.append(to_document(schema, before))
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    if postgresql:
        return texts
    record("update", schema, docs, previous)
    return docs


def _update_triggered(
    snapshot: Snapshot,
    schema: CompiledSchema,
    changes: list[tuple[str, Any]],
    mode: str,
    acting: Acting | None,
    triggers: Triggers,
) -> list[dict[str, Any]]:
    """An update a trigger watches, in the session's transaction: each document read and locked, given to the
    before-triggers as it will be stored, their answer checked as a replacing body and written whole; the
    after-triggers queued with it."""
    written: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    for doc_id, body in changes:
        values, removed = validate(schema, body, mode)
        document_access.require(schema, acting, doc_id, "edit")
        row = locked_by_id(schema, doc_id)
        if row is None:
            raise not_found(f"No {schema.name} document with id {doc_id!r}")
        before = to_document(schema, row)
        stored = {name: before[name] for name in schema.fields if name in before} if mode == "patch" else {}
        stored.update(values)
        for name in removed:
            stored.pop(name, None)
        answer = triggers.before(schema.name, "update", {"_id": doc_id, **stored}, before)
        data = validate(schema, answer, "replace")[0]
        check_relations(snapshot, schema, [data], acting=acting, doc_ids=[doc_id])
        key, build, parameters = _data_change(schema, "replace", data, [])
        try:
            rows = write_in_transaction(
                schema,
                key,
                functools.partial(_update_statement, schema, build),
                {**parameters, "doc_id": doc_id, "now": utcnow()},
            )
        except IntegrityError as exc:
            raise unique_conflict(schema, exc) from None
        written.append(to_document(schema, rows[0]))
        previous.append(before)
    record("update", schema, written, previous)
    for doc, before in zip(written, previous, strict=True):
        triggers.after(schema.name, "update", doc, before)
    return written


def _update_one(
    schema: CompiledSchema, key: Any, data: Any, parameters: dict[str, Any], acting: Acting | None, alone: bool
) -> str:
    """PostgreSQL: ``UPDATE … FROM (SELECT …) old … RETURNING <after>, <old>``, both as JSON text
    (:func:`.json_sql.document_sql`), with the event ``{"document": <after>, "previous": <old>}`` made from
    them in the same statement. ``old`` must be the very version this update replaces. First without a lock:
    the UPDATE finds the row by its address (``ctid``, one page read) and requires ``old``'s version; a
    concurrent update that committed after ``old`` was read fails that check when PostgreSQL re-reads the
    row's newest version, and nothing is written. Only then (or for a missing document) the statement runs
    again with ``old`` read ``FOR UPDATE``, which waits for the row and reads its newest version: most
    updates skip the lock's cost (``bench/results/documents.md#an-update-without-the-row-lock``).

    ``alone`` under access: the caller's read and edit predicates in the ``old`` subquery; a miss is then
    told apart (404 or 403) by a read. Returns ``<after>``, which is also the answer: made once, by the
    database, rather than once for the event and again, from the row's columns, by
    :func:`.json_text.document_json`."""
    guarded = alone and acting is not None
    topic = f"{counts.family(schema.name)}.update"
    table = schema.documents_table

    def build(locked: bool) -> sa.Select:
        old = sa.select(*columns(table)).where(table.c.id == sa.bindparam("doc_id"))
        if guarded and acting is not None:
            old = old.where(*access_parts(schema, acting, "edit"))
        if locked:
            old_row = old.with_for_update().subquery("old")
            same = [table.c.id == old_row.c.id]
        else:
            address: sa.ColumnClause[Any] = sa.literal_column(f'"{table.name}".ctid')
            old_row = old.add_columns(address.label("address")).subquery("old")
            same = [address == old_row.c.address, table.c.version == old_row.c.version]
        after = document_sql(schema, *columns(table)).label("document")
        before = document_sql(schema, *(old_row.c[c.name] for c in columns(table))).label("previous")
        written = _update_values(schema, data()).where(*same).returning(after, before).cte("written")
        payload = concat('{"document":', written.c.document, ',"previous":', written.c.previous, "}")
        parts = events.recorded_by(topic, written, payload, alone)
        return sa.select(written.c.document).add_cte(*parts)  # the old row stays in SQL

    shape = (key, alone, events.enabled(), guarded and document_access.statement_key(schema))
    values = {**parameters, **(acting.parameters() if guarded and acting is not None else {})}
    rows = execute_write(schema, (*shape, False), lambda: build(False), values, alone)
    if not rows:  # a missing document, one out of reach, or a concurrent update: again, with the lock
        rows = execute_write(schema, (*shape, True), lambda: build(True), values, alone)
    if not rows:
        if guarded:
            document_access.require(schema, acting, parameters["doc_id"], "edit")
        raise not_found(f"No {schema.name} document with id {parameters['doc_id']!r}")
    events.written(topic, alone)
    return rows[0][0]


def _update_values(schema: CompiledSchema, data: Any) -> sa.Update:
    table = schema.documents_table
    return sa.update(table).values(
        data=data, updated_at=sa.bindparam("now", type_=table.c.updated_at.type), version=table.c.version + 1
    )


def _update_statement(schema: CompiledSchema, data: Callable[[], Any]) -> sa.Update:
    """SQLite: ``UPDATE … SET data = <data> … WHERE id = :doc_id RETURNING <the document>`` (``data``: the
    builder of the new ``data`` expression)."""
    table = schema.documents_table
    return _update_values(schema, data()).where(table.c.id == sa.bindparam("doc_id")).returning(*columns(table))


def _data_change(
    schema: CompiledSchema, mode: str, values: dict[str, Any], removed: list[str]
) -> tuple[Any, Any, dict]:
    """(cache key, builder of the new ``data`` expression, parameters). A replace binds the document; a
    merge is done by the database. PostgreSQL: one expression per schema, ``data || :set - :unset``;
    SQLite: ``json_set``/``json_remove`` per set of changed keys."""
    table = schema.documents_table
    if mode == "replace":
        return "replace", lambda: sa.bindparam("data", type_=table.c.data.type), {"data": values}
    if dialect() == "postgresql":

        def merged() -> Any:
            merged = sa.type_coerce(table.c.data, JSONB).op("||")(sa.cast(sa.bindparam("set", type_=JSONB), JSONB))
            merged = merged.op("-")(sa.cast(sa.bindparam("unset", type_=sa.ARRAY(sa.Text)), sa.ARRAY(sa.Text)))
            return sa.type_coerce(merged, JSONB)

        return "patch", merged, {"set": values, "unset": removed}
    names = tuple(values)

    def merged_sqlite() -> Any:
        merged: Any = table.c.data
        if removed:
            merged = sa.func.json_remove(merged, *[f"$.{name}" for name in removed])
        if names:
            args: list[Any] = []
            for index, name in enumerate(names):
                args += [f"$.{name}", sa.func.json(sa.bindparam(f"v{index}"))]
            merged = sa.func.json_set(merged, *args)
        return merged

    parameters = {f"v{index}": json.dumps(values[name]) for index, name in enumerate(names)}
    return ("patch", names, tuple(removed)), merged_sqlite, parameters
