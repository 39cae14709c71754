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

from trellis import db, events
from trellis.access import Acting
from trellis.db import utcnow
from trellis.errors import not_found
from trellis.triggers import Queued, Triggers, watching

from .. import counts, document_access
from ..registry import CompiledSchema, Snapshot
from .by_id import get_json, locked_by_id
from .change_events import record
from .connections import commits_alone, execute_write, write_in_transaction
from .json_sql import concat, document_sql
from .json_text import columns, serialise, to_document
from .relation_checks import check_relations, has_relations
from .statement_cache import dialect
from .uniqueness import unique_conflict
from .validation import validate
from .write_access import access_parts

RACES = 3  # lock-free tries of a watched update whose document other writes changed while its triggers ran


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
    if triggers is not None and triggers.runs_before(schema.name, "update"):
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
                queued = triggers.queue(schema.name, "update") if triggers is not None else None
                parameters = {**params, "doc_id": doc_id, "now": now}
                text = _update_one(schema, key, data, parameters, acting, alone, queued)
                assert text is not None  # None answers only an update of an expected version
                texts.append(text)
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
    if triggers is not None:  # after-triggers only
        for doc, before in zip(docs, previous, strict=True):
            triggers.after(schema.name, "update", doc, before)
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
    after-triggers queued with it. On PostgreSQL one document with no transaction open is written by one
    statement (:func:`_update_watched_alone`)."""
    if len(changes) == 1 and dialect() == "postgresql" and acting is None and not db.in_transaction():
        text = _update_watched_alone(snapshot, schema, *changes[0], mode, triggers)
        if text is not None:
            return [json.loads(text)]
    written: list[dict[str, Any]] = []
    previous: list[dict[str, Any]] = []
    for doc_id, body in changes:
        values, removed = validate(schema, body, mode)
        document_access.require(schema, acting, doc_id, "edit")
        row = locked_by_id(schema, doc_id)
        if row is None:
            raise not_found(f"No {schema.name} document with id {doc_id!r}")
        before = to_document(schema, row)
        data = _triggered_data(snapshot, schema, doc_id, values, removed, mode, before, acting, triggers)
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


def _triggered_data(
    snapshot: Snapshot,
    schema: CompiledSchema,
    doc_id: str,
    values: dict[str, Any],
    removed: list[str],
    mode: str,
    before: dict[str, Any],
    acting: Acting | None,
    triggers: Triggers,
) -> dict[str, Any]:
    """The data to store: the change applied to ``before``, given to the before-triggers, their answer checked
    as a replacing body is."""
    stored = {name: before[name] for name in schema.fields if name in before} if mode == "patch" else {}
    stored.update(values)
    for name in removed:
        stored.pop(name, None)
    answer = triggers.before(schema.name, "update", {"_id": doc_id, **stored}, before)
    data = validate(schema, answer, "replace")[0]
    check_relations(snapshot, schema, [data], acting=acting, doc_ids=[doc_id])
    return data


def _update_watched_alone(
    snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any, mode: str, triggers: Triggers
) -> str | None:
    """PostgreSQL, an administrator's update of one document a trigger watches, no transaction open: the
    document read without a lock, the triggers run, then one statement writes it only if it is still the
    version they saw, with its event and its after-triggers' runs. If another write changed it meanwhile,
    again from the read, so that the triggers see the newer version (what they wrote through ``ctx.db``,
    in the session's transaction the write joined, is rolled back with the lost try). None after RACES
    lost races: the caller then takes the row lock, which always wins."""
    values, removed = validate(schema, body, mode)
    for _ in range(RACES):
        before = json.loads(get_json(schema, doc_id))
        data = _triggered_data(snapshot, schema, doc_id, values, removed, mode, before, None, triggers)
        key, build, parameters = _data_change(schema, "replace", data, [])
        alone = commits_alone()
        parameters.update(doc_id=doc_id, now=utcnow(), expected=before["__v"])
        queued = triggers.queue(schema.name, "update")
        text = _update_one(schema, key, build, parameters, None, alone, queued)
        if text is not None:
            return text
        if not alone:
            db.session.rollback()
    return None


def _update_one(
    schema: CompiledSchema,
    key: Any,
    data: Any,
    parameters: dict[str, Any],
    acting: Acting | None,
    alone: bool,
    queued: Queued | None = None,
) -> str | None:
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
    :func:`.json_text.document_json`.

    With an ``expected`` version among the parameters (an update its triggers saw at that version), only that
    version is written, never waiting for the lock: None when it is no longer the newest. ``queued``: the
    after-triggers' runs, queued by the same statement, which then returns ``<old>`` as well."""
    guarded = alone and acting is not None
    expected = "expected" in parameters
    topic = f"{counts.family(schema.name)}.update"
    table = schema.documents_table

    def build(locked: bool) -> sa.Select:
        old = sa.select(*columns(table)).where(table.c.id == sa.bindparam("doc_id"))
        if expected:
            old = old.where(table.c.version == sa.bindparam("expected", type_=table.c.version.type))
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
        if queued is None:
            return sa.select(written.c.document).add_cte(*parts)  # the old row stays in SQL
        parts.append(queued.part(written, payload))
        return sa.select(written.c.document, written.c.previous).add_cte(*parts)

    shape: tuple[Any, ...] = (key, alone, events.enabled(), guarded and document_access.statement_key(schema), expected)
    values = {**parameters, **(acting.parameters() if guarded and acting is not None else {})}
    if queued is not None:
        shape += (queued.key,)
        values.update(queued.parameters)
    rows = execute_write(schema, (*shape, False), lambda: build(False), values, alone)
    if not rows and expected:
        return None
    if not rows:  # a missing document, one out of reach, or a concurrent update: again, with the lock
        rows = execute_write(schema, (*shape, True), lambda: build(True), values, alone)
    if not rows:
        if guarded:
            document_access.require(schema, acting, parameters["doc_id"], "edit")
        raise not_found(f"No {schema.name} document with id {parameters['doc_id']!r}")
    events.written(topic, alone)
    if queued is not None:
        queued.written('{"document":' + rows[0][0] + ',"previous":' + rows[0][1] + "}", alone)
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
