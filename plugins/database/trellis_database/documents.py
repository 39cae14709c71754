"""Documents: validation against the schema, reads (Core rows, no ORM) and writes.

A document is ``{"_id", <fields>…, "createdAt", "updatedAt", "__v"}``; the fields are stored in
``data``, the rest in columns. A single-document write on PostgreSQL is one statement with its event
and tuples (see "writes" below), reads fetch only the base columns, and populate runs one query per
relation field and level.
"""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime
from time import monotonic
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import util as sql_util

from trellis import db, events, reads, statements
from trellis.access import Acting
from trellis.credentials import Identity
from trellis.db import new_id, utcnow
from trellis.errors import APIError, bad_request, conflict, not_found
from trellis_authentication import service as users_service

from . import counts, document_access
from . import search as full_text
from .crud_gate import allowed
from .fields import FieldError, check_value
from .query import Compiler
from .registry import CompiledSchema, Snapshot

SERVER_FIELDS = frozenset({"_id", "createdAt", "updatedAt", "__v"})
MAX_MANY = 1000
MAX_CACHED_SHAPES = 256


def dialect() -> str:
    return db.engine().dialect.name


def _in_transaction(statement: Any, parameters: Any = None) -> Any:
    """Run a statement in the session's transaction (writes, and reads that belong to a write)."""
    return db.session.connection().execute(statement, parameters)


def _write(schema: CompiledSchema, key: Any, build: Any, parameters: dict[str, Any]) -> list[Any]:
    """One row's write statement (built once per schema version) in the session's transaction; its
    ``RETURNING`` rows. See :func:`trellis.statements.execute_compiled` for why it skips SQLAlchemy's execution."""
    return statements.execute_compiled(
        db.session.connection(), _statement(schema, key, build), parameters, schema.statements
    )


def _record(
    kind: str,
    schema: CompiledSchema,
    docs: list[dict[str, Any]] | list[str],
    previous: list[dict[str, Any]] | None = None,
    grants: dict[str, list[list[str]]] | None = None,
) -> None:
    """Every document write made in a transaction passes here, once its statement has run (on PostgreSQL a
    single-document write records its event in its own statement instead: ``events.recorded_by``).

    ``kind`` is ``create``, ``update`` or ``delete``; ``docs`` are the documents written (their ids
    for a delete); ``previous`` the documents as they were (updates and deletes); ``grants`` the tuples
    a deletion removed (under access control), by id. The change is recorded in the event log
    (``database.<Schema>.<kind>``) in the same transaction; that event is also what tells cached list
    counts the schema changed (see :mod:`.counts`).
    """
    events.record_many(f"{counts.family(schema.name)}.{kind}", _event_payloads(kind, docs, previous, grants))


def _event_payloads(
    kind: str,
    docs: list[dict[str, Any]] | list[str],
    previous: list[dict[str, Any]] | None,
    grants: dict[str, list[list[str]]] | None = None,
) -> list[str]:
    """``{"document": <after>, "previous": <before>}`` as JSON text; a deleted document is ``{"_id"}``,
    and a deleted document under access control also carries ``"grants": [[subject, relation], …]``,
    the tuples removed with it: the only trace left of who could read it, which live subscriptions need
    to send its ``delete`` to those readers only."""
    if kind == "delete":
        docs = [{"_id": doc_id} for doc_id in docs]
    if previous is None:
        return [_created_payload(serialise(doc)) for doc in docs]
    tail = [
        ',"grants":' + serialise(grants.get(doc["_id"], [])) + "}" if grants else "}"
        for doc in docs  # type: ignore[union-attr]
    ]
    return [
        '{"document":' + serialise(doc) + ',"previous":' + serialise(before) + end
        for doc, before, end in zip(docs, previous, tail, strict=True)
    ]


def _created_payload(document_text: str) -> str:
    """A create's (or a deletion's) event payload around the document's JSON text."""
    return '{"document":' + document_text + "}"


def _statement(schema: CompiledSchema, key: Any, build: Any) -> Any:
    """A statement built once per compiled schema (i.e. per schema version) and query shape."""
    statement = schema.statements.get(key)
    if statement is None:
        if len(schema.statements) >= MAX_CACHED_SHAPES:  # clients choose shapes: keep the cache bounded
            schema.statements.clear()
        statement = schema.statements[key] = build()
    return statement


def columns(table: sa.Table) -> tuple[sa.Column, ...]:
    return table.c.id, table.c.data, table.c.created_at, table.c.updated_at, table.c.version


_STAMP_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'  # the same text as _stamp(), made by PostgreSQL


def text_columns(table: sa.Table, dialect_name: str) -> tuple[sa.ColumnElement, ...]:
    """The document's columns for :func:`document_json`: ``data`` as JSON text, and on PostgreSQL
    the timestamps already formatted, so a read never decodes and re-encodes the stored JSON."""
    doc_id, data, created_at, updated_at, version = columns(table)
    text = sa.cast(data, sa.Text)
    if dialect_name != "postgresql":
        return doc_id, text, created_at, updated_at, version
    # Constants as SQL text, not parameters: the statement is compiled once and run with its id only.
    utc, stamp_format = sa.literal_column("'UTC'"), sa.literal_column(f"'{_STAMP_FORMAT}'")
    created, updated = (
        sa.func.to_char(sa.func.timezone(utc, column), stamp_format) for column in (created_at, updated_at)
    )
    return doc_id, text, created, updated, version


def document_json(schema: CompiledSchema, row: Any) -> str:
    """A document as JSON text, spliced from a :func:`text_columns` row: the same keys in the same
    order as :func:`to_document`. ``data`` never holds ``_id``, the timestamps or ``__v``
    (:func:`validate` drops them), so splicing cannot repeat a key. Ids are hex and timestamps are
    formatted here or by the database (digits, ``-:.TZ``): neither needs escaping."""
    doc_id, inner = row[0], row[1].strip()[1:-1].strip()
    parts = ['{"_id":', f'"{doc_id}"' if doc_id.isalnum() else json.dumps(doc_id)]
    if inner:
        parts += [",", inner]
    if schema.timestamps:
        parts += [',"createdAt":"', _stamp(row[2]), '","updatedAt":"', _stamp(row[3]), '"']
    parts += [',"__v":', str(row[4]), "}"]
    return "".join(parts)


def to_document(schema: CompiledSchema, row: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"_id": row[0]}
    data = row[1]
    if isinstance(data, str):  # SQLite through RETURNING may hand back the text
        data = json.loads(data)
    doc.update(data)
    if schema.timestamps:
        doc["createdAt"] = _stamp(row[2])
        doc["updatedAt"] = _stamp(row[3])
    doc["__v"] = row[4]
    return doc


def _stamp(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.utcoffset():  # the driver may answer in the server's time zone
        value = value.astimezone(UTC)
    # isoformat is C code: the same fixed-width text as fields.format_datetime, several times faster.
    return value.isoformat(timespec="microseconds")[:26] + "Z"


def project(doc: dict[str, Any], select: frozenset[str] | None) -> dict[str, Any]:
    if select is None:
        return doc
    return {key: value for key, value in doc.items() if key in select}


# ---- validation --------------------------------------------------------------------------------------


def validate(schema: CompiledSchema, body: Any, mode: str) -> tuple[dict[str, Any], list[str]]:
    """Check a request body; returns (values to store, keys to remove).

    ``mode``: "create" and "replace" give the whole document (defaults filled, required checked);
    "patch" gives only the changes (``null`` removes a field).
    """
    if not isinstance(body, dict):
        raise bad_request("A document is a JSON object")
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    removed: list[str] = []
    for key in body:
        if key not in schema.fields and key not in SERVER_FIELDS:
            errors[key] = ["Unknown field"]
    for name, field in schema.fields.items():
        if name in body and body[name] is not None:
            try:
                values[name] = check_value(field, body[name])
            except FieldError as exc:
                errors[name] = [str(exc)]
        elif mode == "patch":
            if name in body:
                if field.required:
                    errors[name] = ["Required field; it cannot be removed"]
                else:
                    removed.append(name)
        elif field.default is not None:
            values[name] = field.default
        elif field.required:
            errors[name] = ["Missing data for required field."]
    if errors:
        raise bad_request("The document does not match the schema " + schema.name, errors)
    return values, removed


def check_relations(
    snapshot: Snapshot,
    schema: CompiledSchema,
    docs: list[dict[str, Any]],
    prefix: str = "",
    acting: Acting | None = None,
    doc_ids: list[str] | None = None,
) -> None:
    """Every Relation value must name an existing document of the related schema (400 otherwise). A target
    under access control must also be one the writer may read (:func:`document_access.relation_reader`),
    and a ``Team`` one it belongs to (:func:`document_access.nameable_teams`), else it is the very 400 of
    a missing id: a write must neither tell which hidden ids exist nor put a
    document into the lists of those who read a document the writer cannot. ``doc_ids`` (updates, in the
    order of ``docs``): a hidden id the document already holds in that field may stay (a PUT sends it back).
    One query per related schema, reading existence and readability together."""
    wanted: dict[str, set[str]] = {}
    for doc in docs:
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                wanted.setdefault(field.model, set()).update(_named(doc, name, field.array))
    missing: dict[str, set[str]] = {}
    hidden: dict[str, set[str]] = {}
    for model, ids in wanted.items():
        target = snapshot.document_schema(model)
        found: set[str] = set()
        if model == "User" and ids:
            found = users_service.existing_user_ids(sorted(ids))
        elif model == "Team" and ids:
            found = users_service.existing_team_ids(sorted(ids))
            teams = document_access.nameable_teams()
            hidden[model] = found - teams if teams is not None else set()
        elif target is not None and ids:
            found, hidden[model] = _existing_and_hidden(target, ids, document_access.relation_reader(target, acting))
        missing[model] = ids - found
    held = _stored_relations(schema, doc_ids) if doc_ids and any(hidden.values()) else {}
    errors: dict[str, list[str]] = {}
    for index, doc in enumerate(docs):
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                kept = held.get((doc_ids[index], name), set()) if doc_ids else set()
                refused = missing.get(field.model, set()) | (hidden.get(field.model, set()) - kept)
                gone = [i for i in _named(doc, name, field.array) if i in refused]
                if gone:
                    key = f"{prefix}{index}.{name}" if prefix else name
                    errors[key] = [f"No {field.model} document with id {gone[0]!r}"]
    if errors:
        raise bad_request("A related document does not exist", errors)


def _named(doc: dict[str, Any], name: str, array: bool) -> list[str]:
    """The ids a validated document's Relation field names."""
    return doc[name] if array else [doc[name]]


def _existing_and_hidden(target: CompiledSchema, ids: set[str], reader: Acting | None) -> tuple[set[str], set[str]]:
    """(the ids of ``target`` that exist, those of them ``reader`` may not read), read in the write's transaction."""
    table = target.table
    wanted = sa.bindparam("ids", expanding=True)
    if reader is None:
        statement = _statement(target, "existing", lambda: sa.select(table.c.id).where(table.c.id.in_(wanted)))
        return set(_in_transaction(statement, {"ids": sorted(ids)}).scalars()), set()

    def build() -> sa.Select:  # once per schema and definitions' version: the predicate is costly to build
        readable = sa.case((document_access.read_condition(target, reader), 1), else_=0)
        return sa.select(table.c.id, readable).where(table.c.id.in_(wanted))

    statement = _statement(target, ("existing", document_access.statement_key(target)), build)
    rows = _in_transaction(statement, {"ids": sorted(ids), **reader.parameters()}).all()
    return {row[0] for row in rows}, {row[0] for row in rows if not row[1]}


def _stored_relations(schema: CompiledSchema, doc_ids: list[str]) -> dict[tuple[str, str], set[str]]:
    """``(document id, field) → ids`` the stored documents name in their Relation fields."""
    table = schema.table
    rows = _in_transaction(sa.select(table.c.id, table.c.data).where(table.c.id.in_(sorted(set(doc_ids))))).all()
    held: dict[tuple[str, str], set[str]] = {}
    for doc_id, data in rows:
        stored = json.loads(data) if isinstance(data, str) else data
        for name, field in schema.fields.items():
            if field.type == "Relation":
                held[(doc_id, name)] = set(_relation_ids([stored], name, field.array))
    return held


_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (?:index '([^']+)'|\w+\.(\w+))")


def unique_conflict(schema: CompiledSchema, exc: IntegrityError) -> APIError:
    """The 409 for a unique index violation, naming the field when the database tells us which."""
    db.session.rollback()
    index = getattr(getattr(exc.orig, "diag", None), "constraint_name", None)
    if index is None:
        match = _SQLITE_UNIQUE.search(str(exc.orig))
        index = (match.group(1) or match.group(2)) if match else None
    field = schema.unique_indexes.get(index or "")
    if field is None:
        return conflict("The document conflicts with an existing one")
    return conflict(f"Another {schema.name} document already has this {field}", {field: ["Already taken"]})


# ---- reads -----------------------------------------------------------------------------------------
# Reads run on the request's read connection (`trellis.reads`: autocommit on PostgreSQL,
# no transaction), through `reads.reading`, which runs them once more if PostgreSQL restarted under them.


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
        table = schema.table
        condition = document_access.read_condition(schema, acting)
        return sa.select(*text_columns(table, dialect_name)).where(table.c.id == sa.bindparam("doc_id"), condition)

    statement = _statement(schema, ("by_id", dialect_name, document_access.statement_key(schema)), build)
    rows = statements.execute_compiled(
        connection, statement, {"doc_id": doc_id, **acting.parameters()}, schema.statements
    )
    return rows[0] if rows else None


def _first_by_id(connection: sa.Connection, schema: CompiledSchema, doc_id: str) -> Any:
    """The hottest read: its SQL, compiled once, runs straight on the DB-API cursor
    (:func:`trellis.statements.execute_compiled`, as the writes do): one string parameter, text and integer
    columns, so SQLAlchemy's execution layer would add nothing but ~20% of the request's CPU. A dead
    connection comes out as SQLAlchemy's error with the pool renewed, and :func:`trellis.reads.reading`
    reads once more on a fresh one."""
    rows = statements.execute_compiled(
        connection, _by_id(schema, connection.dialect.name), {"doc_id": doc_id}, schema.statements
    )
    return rows[0] if rows else None


def _by_id(schema: CompiledSchema, dialect_name: str) -> sa.Select:
    def build() -> sa.Select:
        table = schema.table
        return sa.select(*text_columns(table, dialect_name)).where(table.c.id == sa.bindparam("doc_id"))

    return _statement(schema, ("by_id", dialect_name), build)


def find(
    schema: CompiledSchema,
    where: Any = None,
    sort: str | None = None,
    skip: int = 0,
    limit: int = 25,
    count: bool = True,
    acting: Acting | None = None,
    search: str | None = None,
) -> tuple[list[dict[str, Any]], int | None]:
    """One page of documents matching ``where`` (a condition tree) and the words of ``search`` (see
    :mod:`.search`), and the total before skip/limit (None when ``count`` is False); with ``acting``, only
    the documents it may read."""
    texts, total = find_json(schema, where, sort, skip, limit, count, acting, search)
    return [json.loads(text) for text in texts], total


def find_json(
    schema: CompiledSchema,
    where: Any = None,
    sort: str | None = None,
    skip: int = 0,
    limit: int = 25,
    count: bool = True,
    acting: Acting | None = None,
    search: str | None = None,
) -> tuple[list[str], int | None]:
    """:func:`find` with each document as JSON text (see :func:`document_json`).

    The page and count statements are built once per query *shape* (fields, operators, sort) on the
    compiled schema; a request only binds its values. The page also reads the schema's change number
    (see :mod:`.counts`), in the same round trip. Under access (``acting``) both statements carry the
    read predicate, and the count is remembered per caller's subjects and the change numbers of
    everything that may change what it reads (the schema's documents, its grants, and those of the
    schemas it inherits from).

    ``search`` adds :func:`.search.condition` (its query text bound as one more parameter) and, without
    ``sort``, orders by its rank, best first, then by id. Words that leave nothing to look for answer
    an empty page without a query.
    """
    dialect_name = dialect()
    compiler = Compiler(schema, dialect_name)
    shape, values = compiler.prepare(where)
    families = [] if acting is None else document_access.change_families(schema)
    searched = None if search is None else full_text.query_value(schema, search, dialect_name)
    if search is not None and searched is None:
        return [], (0 if count else None)

    # A first page's bounds are SQL text: PostgreSQL settles on a prepared statement's generic plan only
    # when LIMIT and OFFSET are constants, and otherwise plans every run (0.085 ms of a 0.14 ms page as
    # the admin, 0.33 ms of the user's walked page: pg_prepared_statements, bench/results/peer.md).
    first = limit if skip == 0 and limit <= MAX_LITERAL_LIMIT else None

    def build(acting: Acting | None) -> tuple[sa.Select, sa.Select, sa.Select | None, sa.Select | None]:
        bounds = _bounds(first)
        condition = compiler.build(shape)
        order = compiler.order_by(sort)
        if search is not None:
            parameter = sa.bindparam(full_text.PARAMETER, type_=sa.String)
            matching = full_text.condition(schema, search, dialect_name, parameter)
            condition = matching if condition is None else sa.and_(condition, matching)
            if not sort:
                order = [full_text.rank(schema, search, dialect_name, parameter).desc(), schema.table.c.id.asc()]
        table = schema.table
        # The change numbers key the count cache: a page without a count does not read them.
        numbers = [counts.CountCache.change_column(schema.name), *(events.change_number(f) for f in families)]
        wanted = [*text_columns(table, dialect_name), *(numbers if count else [])]
        walked = unguarded = None
        page = sa.select(*wanted)
        if condition is not None:
            page = page.where(condition)
        page = page.order_by(*order).offset(bounds.skip).limit(bounds.limit)
        if acting is not None:
            # The page without the read predicate, for a caller known to read everything (see page_rows);
            # it reads the change numbers the hint is checked against, with a count or without.
            unguarded = (page if count else page.add_columns(*numbers)).execution_options(**statements.PREPARE)
            readable = document_access.read_condition(schema, acting)
            if search is None:
                walked = _walked_page(table, condition, readable, order, wanted, bounds)
            condition = readable if condition is None else sa.and_(condition, readable)
            page = _deferred_page(table, condition, order, wanted, bounds)
        total = sa.select(sa.func.count()).select_from(table)
        if condition is not None:
            total = total.where(condition)
        if acting is None:
            return (
                page.execution_options(**statements.PREPARE),
                total.execution_options(**statements.PREPARE),
                None,
                None,
            )
        # Under access the deferred page and the count are planned at every run: prepared, PostgreSQL
        # settles on a generic plan after five runs, and the plan a broad caller leaves is wrong for a
        # narrow one (100,000 Items, a caller reading 1%: count 26.1 ms generic against 1.8 custom, deferred
        # page 8.2 against 3.2; bench/results/peer.md). The walked page reads at most ``walk`` rows, so its
        # generic plan serves every caller (0.12–0.18 ms against 0.25–0.36 custom).
        unprepared = page.execution_options(**statements.UNPREPARED), total.execution_options(**statements.UNPREPARED)
        return *unprepared, None if walked is None else walked.execution_options(**statements.PREPARE), unguarded

    def key(access: Any, counted: bool) -> tuple[Any, ...]:
        return ("find", dialect_name, shape, sort or "", access, counted, search is not None, first)

    access_key = None if acting is None else document_access.statement_key(schema)
    page, total_stmt, walked, unguarded = _statement(schema, key(access_key, count), lambda: build(acting))
    params = {f"p{index}": value for index, value in enumerate(values)}
    if searched is not None:
        params[full_text.PARAMETER] = searched
    caller = None
    everything = None  # the question "does the caller read every document?" (see _reads_everything)
    if acting is not None:
        params.update(acting.parameters())
        caller = (schema.table.name, acting.subjects)
        everything = _everything_query(schema, acting, access_key)

    broad = False  # the walked or unguarded page found the caller's page: it reads most of the first matches

    def page_rows(connection: sa.Connection) -> list[Any]:
        nonlocal broad
        bound = {**params, "skip": skip, "limit": limit}
        if unguarded is not None:
            rows = _unguarded_page(connection, schema, everything, families, unguarded, bound)
            if rows is not None:
                broad = True
                return rows
        if walked is not None and skip + limit <= MAX_WALKED_PAGE and _narrow.get(caller) is None:
            rows = statements.execute_compiled(
                connection, walked, {**bound, "walk": WALK * (skip + limit)}, schema.statements
            )
            if len(rows) == limit:
                broad = True
                return rows
            found = statements.execute_compiled(connection, page, bound, schema.statements)
            if len(found) > len(rows):
                # Too few readable rows near the front: the deferred join finds the page, and the caller's
                # next pages go there at once. (When the matches ran out, the walk's page was the page.)
                _narrow.put(caller, True, NARROW_SECONDS)
            return found
        # The driver's cursor, as for a get by id: SQLAlchemy's execution layer cost ~10% of a list's CPU.
        return statements.execute_compiled(connection, page, bound, schema.statements)

    def read(connection: sa.Connection) -> tuple[list[Any], int | None]:
        rows = page_rows(connection)
        if not count:
            return rows, None
        if len(rows) < limit and (rows or skip == 0):
            return rows, skip + len(rows)  # a short page tells the total without counting
        changes = _change_key(rows[0], families) if rows else None
        query = (schema.version, shape, values, searched)
        cache = counts.cache()
        if acting is not None and broad and cache.usable(changes):
            if _reads_everything(connection, schema, acting, access_key, families, changes):
                admin_total = _statement(schema, key(None, True), lambda: build(None))[1]
                caller_names = acting.parameters().keys()
                unbound = {k: v for k, v in params.items() if k not in caller_names}
                return rows, cache.count(
                    schema.table.name, query, rows[0][5], lambda: connection.execute(admin_total, unbound).scalar_one()
                )
        if acting is not None:
            query = (*query, access_key, acting.subjects)
        total = cache.count(
            schema.table.name,
            query,
            changes,
            lambda: connection.execute(total_stmt, params).scalar_one(),
        )
        return rows, total

    rows, total = reads.reading(read)
    return [document_json(schema, row) for row in rows], total


def _everything_query(schema: CompiledSchema, acting: Acting, access_key: Any) -> tuple[Any, ...]:
    """The key of :func:`_reads_everything`'s answer for ``acting`` (``access_key``:
    :func:`.document_access.statement_key`)."""
    return ("reads everything", schema.version, access_key, acting.subjects)


def _change_key(row: Any, families: list[str]) -> Any:
    """The change numbers a page row carries after the document's five columns: the schema's alone, or
    with those of ``families``, joined by dots."""
    return row[5] if not families else ".".join(str(n) for n in row[5:])


def _reads_everything(
    connection: sa.Connection,
    schema: CompiledSchema,
    acting: Acting,
    access_key: Any,
    families: list[str],
    changes: Any,
) -> bool:
    """Whether ``acting`` may read every document of ``schema`` at the change numbers ``changes`` (those of
    the schema and of ``families``, read by the page; ``access_key``: :func:`.document_access.statement_key`):
    then its count of any query is the admin's, which is counted without the read predicate and kept for
    every caller alike, and its next pages may be read without the predicate (:func:`_unguarded_page`).

    A count under access joins the caller's tuples with the matches: for a caller who may read all of
    100,000 Items (one ``editor`` tuple each) a list cost PostgreSQL ~74 ms where the admin's cost ~4
    (``bench/results/peer.md``), and each query and change number counted again. This asks once per
    caller and change numbers — both counts of the whole table, and the change numbers, in one statement,
    one snapshot — and keeps the answer beside the counts (:mod:`.counts`). It is kept only when the
    statement read the same change numbers as the page: the answer is then true of that very moment, so a
    write that commits in between (a grant revoked, a document made) can never stand for an earlier one.
    Only callers whose page came from the walk or from :func:`_unguarded_page` ask (they read most of the
    first matches); narrow callers never pay for it. A true answer is also kept in this process as the
    caller's page hint (:func:`_broad`)."""
    query = _everything_query(schema, acting, access_key)
    if _broad(schema).get(query) == str(changes):
        return True  # this process found it so at these very numbers: no lookup (~13 µs of a list, py-spy)
    cache = counts.cache()
    known = cache.known(schema.table.name, query, changes)
    if known is not None:
        _note_broad(schema, query, changes, bool(known))
        return bool(known)
    asked, mine = (schema.table.name, query, str(changes)), threading.Event()
    answer = _ASKING.setdefault(asked, mine)  # one step: two threads cannot both think they ask first
    if answer is not mine:  # another request of this process is asking: wait for its answer
        answer.wait(ASK_WAIT_SECONDS)
        return bool(cache.known(schema.table.name, query, changes))  # none kept: count as the caller
    try:
        statement = _everything_statement(schema, acting, access_key, families)
        readable, total, *numbers = connection.execute(statement, acting.parameters()).one()
        if ".".join(str(n) for n in numbers) != str(changes):
            return False  # a write came between the page and this statement: count as the caller
        cache.keep(schema.table.name, query, changes, int(readable == total))
        _note_broad(schema, query, changes, readable == total)
        return readable == total
    finally:
        del _ASKING[asked]
        mine.set()


# Questions of _reads_everything being asked in this process, and how long another request for the same
# answer waits for it. Under the peer benchmark's 16 connections a new change number made all 16 ask at
# once, each ~150 ms of PostgreSQL: ~2.4 s of CPU, where one question is enough.
_ASKING: dict[Any, threading.Event] = {}
ASK_WAIT_SECONDS = 10.0


def _everything_statement(schema: CompiledSchema, acting: Acting, access_key: Any, families: list[str]) -> sa.Select:
    """:func:`_reads_everything`'s statement: the caller's count of the whole table, the admin's, and the
    change numbers of the schema and of ``families`` (built once per definitions' version)."""

    def build() -> sa.Select:
        table = schema.table
        readable = document_access.read_condition(schema, acting)
        numbers = [counts.CountCache.change_column(schema.name), *(events.change_number(f) for f in families)]
        return sa.select(
            sa.select(sa.func.count()).select_from(table).where(readable).scalar_subquery(),
            sa.select(sa.func.count()).select_from(table).scalar_subquery(),
            *numbers,
        )

    return _statement(schema, ("everything", dialect(), access_key), build)


def _unguarded_page(
    connection: sa.Connection,
    schema: CompiledSchema,
    query: tuple[Any, ...],
    families: list[str],
    page: sa.Select,
    bound: dict[str, Any],
) -> list[Any] | None:
    """The page read without the read predicate, for a caller that this process last found reading every
    document of ``schema`` (``query``: :func:`_everything_query`); None when that cannot be shown for the
    page's own snapshot, and the caller's page is to be read with the predicate.

    The page reads the change numbers of the schema and of ``families``, as the predicated page does. When
    they are the ones at which the caller read everything, or ones at which the shared answer
    (:mod:`.counts`) says so, nothing the predicate reads has changed since: it is true of every row, so
    this page is the caller's. Without the predicate a broad caller's page costs PostgreSQL what the
    admin's does: the walked page probed the caller's tuples once per row (0.13 ms against 0.07 of
    execution, 100,000 Items, ``bench/results/peer.md``). A page that comes back empty is the caller's
    too (it reads a subset). After a write the first page is read twice (this one, then the predicated
    one), until the count path asks the question again."""
    known = _broad(schema).get(query)
    if known is None or not events.enabled():
        return None
    rows = statements.execute_compiled(connection, page, bound, schema.statements)
    if not rows:
        return rows
    changes = _change_key(rows[0], families)
    if str(changes) == known:
        return rows
    answer = counts.cache().known(schema.table.name, query, changes)
    _note_broad(schema, query, changes, bool(answer))
    return rows if answer else None


def _broad(schema: CompiledSchema) -> _CallerHints:
    """The change numbers at which callers last read every document of ``schema``, as this process found
    (:func:`_reads_everything`): hints that :func:`_unguarded_page` checks against the page it reads. Kept
    in the schema's statement cache, so any change to the schemas (one this schema inherits from included)
    drops them; each lives ``counts.TTL_SECONDS`` from when it was noted, which bounds writes made behind
    Trellis's back (they record no event) as the counts' expiry does."""
    hints = schema.statements.get("broad callers")
    if hints is None:
        hints = schema.statements["broad callers"] = _CallerHints()
    return hints


def _note_broad(schema: CompiledSchema, query: tuple[Any, ...], changes: Any, everything: bool) -> None:
    """Keep (or drop) the hint that the caller of ``query`` reads everything at ``changes``."""
    if everything:
        _broad(schema).put(query, str(changes), counts.TTL_SECONDS)
    else:
        _broad(schema).drop(query)


class _Bounds(NamedTuple):
    skip: sa.ColumnElement[int]
    limit: sa.ColumnElement[int]
    walk: sa.ColumnElement[int]


def _bounds(first: int | None) -> _Bounds:
    """A page statement's OFFSET, LIMIT and walk (:func:`_walked_page`): bound parameters (``skip``,
    ``limit``, ``walk``), or for a first page of ``first`` rows constants written into the SQL."""
    if first is None:
        return _Bounds(sa.bindparam("skip"), sa.bindparam("limit"), sa.bindparam("walk"))
    return _Bounds(sa.literal_column("0"), sa.literal_column(str(first)), sa.literal_column(str(WALK * first)))


def _deferred_page(
    table: sa.Table, condition: Any, order: list[sa.ColumnElement], wanted: list[sa.ColumnElement], bounds: _Bounds
) -> sa.Select:
    """A page under access as a deferred join: the walk along the sort order selects ids only (an
    index-only scan of the sort index, each row's read predicate an index-only probe of the tuples), and
    the page's rows are fetched by id after. At 2% readable the walk passes ~50 rows per row it returns;
    reading each one's heap row only to drop it was most of the page's time (``bench/results/access.md``:
    0.68× the time on the same data). ``n`` keeps the walk's order for the outer query."""
    walk = sa.select(table.c.id, sa.func.row_number().over(order_by=order).label("n"))
    if condition is not None:
        walk = walk.where(condition)
    ids = walk.order_by(*order).offset(bounds.skip).limit(bounds.limit).subquery("page_ids")
    return sa.select(*wanted).join_from(table, ids, table.c.id == ids.c.id).order_by(ids.c.n)


# A caller's page under access is first looked for among the first WALK × (skip + limit) matches in sort
# order, reading their rows directly (:func:`_walked_page`); when fewer than a page of those are readable,
# the deferred join finds it, and when it finds more than the walk did, the caller's next pages go straight
# there for NARROW_SECONDS. (A page short because the matches ran out is no sign of a narrow caller: the
# peer benchmark's `price < 1`, which matches nothing, sent its broad user to the deferred join and its
# counts to the tuple join for a minute.)
WALK = 2
MAX_WALKED_PAGE = 100  # deeper pages take the deferred join at once
MAX_LITERAL_LIMIT = 100  # first pages up to this size have their bounds in the SQL (see find_json)
NARROW_SECONDS = 60.0


def _walked_page(
    table: sa.Table,
    condition: Any,
    readable: sa.ColumnElement[bool],
    order: list[sa.ColumnElement],
    wanted: list[sa.ColumnElement],
    bounds: _Bounds,
) -> sa.Select:
    """A page under access for a caller who may read most of what matches: the first ``walk`` matches in
    sort order, their rows read directly (an index scan that stops after ``walk`` rows), then the read
    predicate on each and the page. When it returns a whole page, that page is exact (the readable
    rows among the first matches are the first readable matches); otherwise the caller reads too little
    of this schema for it and :func:`_deferred_page` runs. For a caller who may read every Item (the peer
    benchmark's user) it took 0.81–0.86 ms of PostgreSQL where the deferred join took 1.05–1.22 (the
    twenty rows fetched again by id, the window, a larger plan); for one who reads a random 2% the
    failed walk cost 0.9–1.1 ms before the deferred join's 6.0–6.2 (pgbench, 2026-11-27,
    ``bench/results/peer.md``)."""
    walk = sa.select(table)
    if condition is not None:
        walk = walk.where(condition)
    walk = walk.order_by(*order).limit(bounds.walk).subquery("walk")
    adapt = sql_util.ClauseAdapter(walk).traverse
    return (
        sa.select(*(adapt(column) for column in wanted))
        .where(adapt(readable))
        .order_by(*(adapt(term) for term in order))
        .offset(bounds.skip)
        .limit(bounds.limit)
    )


class _CallerHints:
    """Hints of this process about callers, each until a moment, bounded (all dropped when full): a hint
    only chooses which statement reads a page, never what the page holds."""

    def __init__(self) -> None:
        self._until: dict[Any, tuple[Any, float]] = {}

    def get(self, key: Any) -> Any:
        """The hint's value, or None when there is none or it is over."""
        found = self._until.get(key)
        if found is None:
            return None
        if found[1] > monotonic():
            return found[0]
        self._until.pop(key, None)
        return None

    def put(self, key: Any, value: Any, seconds: float) -> None:
        if len(self._until) >= MAX_CALLER_HINTS:
            self._until.clear()
        self._until[key] = (value, monotonic() + seconds)

    def drop(self, key: Any) -> None:
        self._until.pop(key, None)


MAX_CALLER_HINTS = 10_000
# Callers whose last walked page came back short, per schema (the page is the same whichever statement
# finds it): their next pages go to the deferred join at once.
_narrow = _CallerHints()


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
        ids = _relation_ids(docs, name, field.array)
        if field.model == "User":
            _replace(docs, name, field.array, users_service.public_users(sorted(ids)) if ids else {}, keep_missing=True)
            continue
        target = snapshot.document_schema(field.model)
        denied = allowed(target, "read", identity)
        if denied is not None:
            raise denied
        if not ids:
            continue
        acting = document_access.acting(target, identity, scope if document_access.opted_in(target) else None)
        table = target.table
        condition = table.c.id.in_(sorted(ids))
        if acting is not None:
            condition = sa.and_(condition, document_access.read_condition(target, acting))
        statement = sa.select(*columns(table)).where(condition)
        parameters = None if acting is None else acting.parameters()
        rows = reads.reading(lambda connection, s=statement, p=parameters: connection.execute(s, p).all())
        found = {row[0]: to_document(target, row) for row in rows}
        if subtree:
            populate(snapshot, target, list(found.values()), subtree, identity, scope)
        _replace(docs, name, field.array, found, keep_missing=acting is not None)


def _relation_ids(docs: list[dict[str, Any]], name: str, array: bool) -> set[str]:
    ids: set[str] = set()
    for doc in docs:
        value = doc.get(name)
        if array and isinstance(value, list):
            ids.update(v for v in value if isinstance(v, str))
        elif isinstance(value, str):
            ids.add(value)
    return ids


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


# ---- writes ----------------------------------------------------------------------------------------
# One function per kind of write (create, update, delete), used by REST, `/many`, custom endpoints and
# GraphQL alike. Each validates and writes with a statement built once per schema version and shape.
#
# PostgreSQL: a single-document write is ONE statement. Its data-modifying CTEs write the document, its
# event row (and the family's change counter), and under access control its owner tuple (create) or the
# removal of its tuples (delete): all of it commits or none of it, as PostgreSQL runs a statement
# atomically. When the session has no transaction open, the statement runs on the request's autocommit
# connection (`trellis.reads`) and commits on its own: one round trip, no BEGIN/COMMIT (see `_alone`).
# Work that needs several statements (a relation check, several documents, a caller that wrote already
# or opened a transaction) runs the same statement in the session's transaction, which the caller
# commits. SQLite keeps its transaction (in-process: no round trip to save) and `_record`.


def _alone() -> bool:
    """Whether a single-document write may commit on its own: PostgreSQL, and no transaction open in the
    session (nothing read or written before it must commit with it). The caller's ``db.session.commit()``
    then has nothing to do."""
    return dialect() == "postgresql" and not db.in_transaction()


def _execute(schema: CompiledSchema, key: Any, build: Any, parameters: dict[str, Any], alone: bool) -> list[Any]:
    """Run a write statement built once per schema version and ``key``: on the autocommit connection
    when ``alone``, else in the session's transaction. Its rows (``RETURNING``)."""
    connection = reads.connection() if alone else db.session.connection()
    return statements.execute_compiled(connection, _statement(schema, key, build), parameters, schema.statements)


def _has_relations(schema: CompiledSchema, values: list[dict[str, Any]]) -> bool:
    """Whether the documents name related documents: their check reads, in the write's transaction."""
    return any(field.type == "Relation" and name in doc for doc in values for name, field in schema.fields.items())


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
    if many:
        _unique_within(schema, values)
    check_relations(snapshot, schema, values, prefix="docs." if many else "", acting=acting)
    now = utcnow()
    if len(values) == 1 and dialect() == "postgresql":
        try:
            return [], _create_one(schema, values[0], now, acting)
        except IntegrityError as exc:
            raise unique_conflict(schema, exc) from None
    rows = [{"id": new_id(), "data": data, "created_at": now, "updated_at": now, "version": 0} for data in values]
    docs = [to_document(schema, (r["id"], r["data"], now, now, 0)) for r in rows]
    try:
        if len(rows) == 1:
            _write(schema, "insert", lambda: _insert_statement(schema), rows[0])
        else:  # one statement for the batch (an unnest of column arrays on PostgreSQL)
            statements.insert_rows(db.session.connection(), schema.table, rows)
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    document_access.created(schema, acting, [r["id"] for r in rows])
    _record("create", schema, docs)
    return docs, None


def _create_one(schema: CompiledSchema, data: dict[str, Any], now: datetime, acting: Acting | None) -> str:
    """PostgreSQL: the document, its event and its owner tuple in one statement. The document's JSON text,
    spliced around ``data``'s (:func:`document_json`), which is also the column's value: the data is
    encoded once, and no dict of the document is made (14.7 → 9.8 µs of Python per create, timeit)."""
    alone = _alone()
    grant = document_access.owner_parameters(schema, acting)
    topic = f"{counts.family(schema.name)}.create"

    def build() -> sa.Select:
        from_text = sa.cast(sa.bindparam("data", type_=sa.Text), JSONB)  # the parameter is already JSON text
        # Both timestamps are the event's ``now``: the driver adapts a datetime once per name, 2.7 µs each.
        stamp = sa.bindparam("now", type_=schema.table.c.created_at.type)
        inserted = _insert_statement(schema, data=from_text, created_at=stamp, updated_at=stamp)
        written = inserted.returning(schema.table.c.id).cte("written")
        parts = events.recorded_by(topic, written, sa.bindparam("payload", type_=sa.Text), alone)
        if grant is not None:
            parts.append(document_access.owner_grant(schema, written).cte("granted"))
        return sa.select(written.c.id).add_cte(*parts)

    doc_id, data_text, stamp = new_id(), serialise(data), _stamp(now)
    text = document_json(schema, (doc_id, data_text, stamp, stamp, 0))
    parameters = {"id": doc_id, "data": data_text, "version": 0, "now": now, "payload": _created_payload(text)}
    parameters.update(grant or {})
    _execute(schema, ("create", alone, events.enabled(), grant is not None), build, parameters, alone)
    events.written(topic, alone)
    return text


def _insert_statement(schema: CompiledSchema, **expressions: sa.ColumnElement[Any]) -> sa.Insert:
    """One document's INSERT, naming its columns (the generated ones are the database's), each its own
    parameter unless ``expressions`` gives its value."""
    table = schema.table
    values = {name: sa.bindparam(name, type_=table.c[name].type) for name in _BASE_COLUMNS}
    return sa.insert(table).values({**values, **expressions})


_BASE_COLUMNS = ("id", "data", "created_at", "updated_at", "version")


def _unique_within(schema: CompiledSchema, values: list[dict[str, Any]]) -> None:
    for name, field in schema.fields.items():
        if not field.unique:
            continue
        seen: dict[Any, int] = {}
        for index, data in enumerate(values):
            if name in data:
                if data[name] in seen:
                    raise conflict(
                        f"Two documents of the batch share the same {name}",
                        {"docs": {str(index): {name: ["Already taken (in this batch)"]}}},
                    )
                seen[data[name]] = index


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
    JSON text, which is the answer: decoding the JSONB into a dict only to encode it again cost ~5% of an
    update's server CPU (py-spy, ``bench/request_cpu.py``, 2026-11-26)."""
    written = _update(snapshot, schema, [(doc_id, body)], mode, acting)[0]
    return written if isinstance(written, str) else serialise(written)


def _update(
    snapshot: Snapshot, schema: CompiledSchema, changes: list[tuple[str, Any]], mode: str, acting: Acting | None
) -> list[str] | list[dict[str, Any]]:
    """:func:`update`'s work: the documents written, as JSON text (PostgreSQL) or as dicts (SQLite, which
    also needs them for the event)."""
    checked = [(doc_id, *validate(schema, body, mode)) for doc_id, body in changes]
    postgresql = dialect() == "postgresql"
    # One document, nothing to check in a transaction: one statement that commits alone, whose access
    # predicate is part of its WHERE (read by the statement, a miss tells 404 from 403 afterwards).
    alone = len(checked) == 1 and not _has_relations(schema, [values for _, values, _ in checked]) and _alone()
    if not alone:
        for doc_id, _, _ in checked:
            document_access.require(schema, acting, doc_id, "edit")
    check_relations(
        snapshot, schema, [values for _, values, _ in checked], acting=acting, doc_ids=[i for i, _, _ in checked]
    )
    now = utcnow()
    docs, previous = [], []
    try:
        for doc_id, values, removed in checked:
            key, data, params = _data_change(schema, mode, values, removed)
            if postgresql:
                docs.append(_update_one(schema, key, data, {**params, "doc_id": doc_id, "now": now}, acting, alone))
                continue
            before = _locked_by_id(schema, doc_id)
            rows = _write(
                schema,
                key,
                lambda data=data: _update_statement(schema, data()),
                {**params, "doc_id": doc_id, "now": now},
            )
            if not rows:
                raise not_found(f"No {schema.name} document with id {doc_id!r}")
            docs.append(to_document(schema, rows[0]))
            previous.append(to_document(schema, before))
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    if not postgresql:
        _record("update", schema, docs, previous)
    return docs


def _update_one(
    schema: CompiledSchema, key: Any, data: Any, parameters: dict[str, Any], acting: Acting | None, alone: bool
) -> str:
    """PostgreSQL: ``UPDATE … FROM (SELECT …) old … RETURNING <after>, <old>``, both as JSON text
    (:func:`_document_sql`), with the event ``{"document": <after>, "previous": <old>}`` made from them in
    the same statement. ``old`` must be the very version this update replaces. First without a lock: the
    UPDATE finds the row by its address (``ctid``, one page read) and requires ``old``'s version; a
    concurrent update that committed after ``old`` was read fails that check when PostgreSQL re-reads the
    row's newest version, and nothing is written. Only then (or for a missing document) the statement runs
    again with ``old`` read ``FOR UPDATE``, which waits for the row and reads its newest version. The lock
    of every update (its WAL record, a second descent of the primary key) was 12% of the UPDATE's own
    PostgreSQL CPU (pgbench, 16 clients: 502 → 444 µs); the whole statement, with its event row and counter,
    and the JSON made once: 803 → 745 µs, within pgbench's noise there (2026-11-28,
    ``bench/event_log_layout``).

    ``alone`` under access: the caller's read and edit predicates in the ``old`` subquery; a miss is then
    told apart (404 or 403) by a read. Returns ``<after>``, which is also the answer: made once, by the
    database, rather than once for the event and again, from the row's columns, by :func:`document_json`."""
    guarded = alone and acting is not None
    topic = f"{counts.family(schema.name)}.update"
    table = schema.table

    def build(locked: bool) -> sa.Select:
        old = sa.select(*columns(table)).where(table.c.id == sa.bindparam("doc_id"))
        if guarded:
            old = old.where(*_access_parts(schema, acting, "edit"))
        if locked:
            old_row = old.with_for_update().subquery("old")
            same = [table.c.id == old_row.c.id]
        else:
            address = sa.literal_column(f'"{table.name}".ctid')
            old_row = old.add_columns(address.label("address")).subquery("old")
            same = [address == old_row.c.address, table.c.version == old_row.c.version]
        after = _document_sql(schema, *columns(table)).label("document")
        before = _document_sql(schema, *(old_row.c[c.name] for c in columns(table))).label("previous")
        written = _update_values(schema, data()).where(*same).returning(after, before).cte("written")
        payload = _concat('{"document":', written.c.document, ',"previous":', written.c.previous, "}")
        parts = events.recorded_by(topic, written, payload, alone)
        return sa.select(written.c.document).add_cte(*parts)  # the old row stays in SQL

    shape = (key, alone, events.enabled(), guarded and document_access.statement_key(schema))
    values = {**parameters, **(acting.parameters() if guarded else {})}
    rows = _execute(schema, (*shape, False), lambda: build(False), values, alone)
    if not rows:  # a missing document, one out of reach, or a concurrent update: again, with the lock
        rows = _execute(schema, (*shape, True), lambda: build(True), values, alone)
    if not rows:
        if guarded:
            document_access.require(schema, acting, parameters["doc_id"], "edit")
        raise not_found(f"No {schema.name} document with id {parameters['doc_id']!r}")
    events.written(topic, alone)
    return rows[0][0]


def _access_parts(schema: CompiledSchema, acting: Acting, permission: str) -> list[sa.ColumnElement[bool]]:
    """The caller may read the document and hold ``permission`` on it (parameters: ``acting.parameters()``)."""
    return [document_access.read_condition(schema, acting), document_access.read_condition(schema, acting, permission)]


def _concat(*parts: Any) -> sa.ColumnElement[str]:
    """SQL ``a || b || …``; a str part is a constant (an SQL string literal: compiled once)."""
    items = [db.sql_text(p) if isinstance(p, str) else p for p in parts]
    result = items[0]
    for item in items[1:]:
        result = result.op("||", return_type=sa.Text)(item)
    return result


def _document_sql(schema: CompiledSchema, *row: Any) -> sa.ColumnElement[str]:
    """:func:`document_json` in SQL, over the columns of a row a statement wrote (its event's payload):
    the same keys in the same order. ``data`` is PostgreSQL's text of the JSONB (``{"a": 1}``)."""
    doc_id, data, created, updated, version = row
    # The JSONB's text is made once (PostgreSQL does not share a repeated sub-expression): the braces cut
    # off by substr and left(…, -1); the empty test on the JSONB itself.
    inner_text = sa.func.left(sa.func.substr(sa.cast(data, sa.Text), sa.literal_column("2")), sa.literal_column("-1"))
    inner = sa.case(
        (sa.type_coerce(data, JSONB) == sa.literal_column("'{}'::jsonb"), sa.literal_column("''")),
        else_=_concat(",", inner_text),
    )
    parts: list[Any] = ['{"_id":', sa.cast(sa.func.to_json(doc_id), sa.Text), inner]
    if schema.timestamps:
        stamp_format, utc = sa.literal_column(f"'{_STAMP_FORMAT}'"), sa.literal_column("'UTC'")
        created_text, updated_text = (
            sa.func.to_char(sa.func.timezone(utc, c), stamp_format) for c in (created, updated)
        )
        parts += [',"createdAt":"', created_text, '","updatedAt":"', updated_text, '"']
    parts += [',"__v":', sa.cast(version, sa.Text), "}"]
    return _concat(*parts)


def _locked_by_id(schema: CompiledSchema, doc_id: str) -> Any:
    """The row before an update (SQLite: its one writer holds the lock, and RETURNING cannot name ``old``)."""
    table = schema.table
    statement = _statement(
        schema, "before", lambda: sa.select(*columns(table)).where(table.c.id == sa.bindparam("doc_id"))
    )
    return _in_transaction(statement, {"doc_id": doc_id}).first()


def patch(
    snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any, acting: Acting | None = None
) -> dict[str, Any]:
    return update(snapshot, schema, [(doc_id, body)], "patch", acting)[0]


def _update_values(schema: CompiledSchema, data: Any) -> sa.Update:
    table = schema.table
    return sa.update(table).values(
        data=data, updated_at=sa.bindparam("now", type_=table.c.updated_at.type), version=table.c.version + 1
    )


def _update_statement(schema: CompiledSchema, data: Any) -> sa.Update:
    """SQLite: ``UPDATE … SET data = <data> … WHERE id = :doc_id RETURNING <the document>``."""
    table = schema.table
    return _update_values(schema, data).where(table.c.id == sa.bindparam("doc_id")).returning(*columns(table))


def _data_change(
    schema: CompiledSchema, mode: str, values: dict[str, Any], removed: list[str]
) -> tuple[Any, Any, dict]:
    """(cache key, builder of the new ``data`` expression, parameters). A replace binds the document; a
    merge is done by the database. PostgreSQL: one expression per schema, ``data || :set - :unset``;
    SQLite: ``json_set``/``json_remove`` per set of changed keys."""
    table = schema.table
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


def delete(schema: CompiledSchema, doc_id: str, acting: Acting | None = None) -> None:
    """Delete one document (404 if there is none, or ``acting`` may not read it; 403 if it may read but
    not delete it). Its tuples go in the same transaction (PostgreSQL: the same statement)."""
    if dialect() == "postgresql":
        _delete_one(schema, doc_id, acting, _alone())
        return
    document_access.require(schema, acting, doc_id, "delete")
    table = schema.table
    rows = _write(
        schema,
        "delete",
        lambda: sa.delete(table).where(table.c.id == sa.bindparam("doc_id")).returning(*columns(table)),
        {"doc_id": doc_id},
    )
    if not rows:
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    grants = document_access.deleted(schema, [doc_id])
    _record("delete", schema, [doc_id], [to_document(schema, rows[0])], grants)


def _delete_one(schema: CompiledSchema, doc_id: str, acting: Acting | None, alone: bool) -> None:
    """PostgreSQL: the document, its tuples and its event ``{"document": {"_id"}, "previous": <it>,
    "grants": [[subject, relation], …]}`` (under access control) in one statement. ``alone`` under access:
    the caller's predicates in its WHERE, as for an update."""
    guarded = alone and acting is not None
    if not alone:
        document_access.require(schema, acting, doc_id, "delete")
    topic = f"{counts.family(schema.name)}.delete"
    table = schema.table

    def build() -> sa.Select:
        condition = [table.c.id == sa.bindparam("doc_id")] + (
            _access_parts(schema, acting, "delete") if guarded else []
        )
        written = sa.delete(table).where(*condition).returning(*columns(table)).cte("written")
        forget = document_access.forget(schema, written)
        parts = ['{"document":{"_id":', sa.cast(sa.func.to_json(written.c.id), sa.Text), '},"previous":']
        parts.append(_document_sql(schema, *(written.c[c.name] for c in columns(table))))
        ctes = []
        if forget is not None:
            gone = forget.cte("forgotten")
            pairs = sa.func.json_agg(sa.func.json_build_array(gone.c.subject, gone.c.relation))
            held = sa.select(sa.cast(pairs, sa.Text)).where(gone.c.resource_id == written.c.id).scalar_subquery()
            parts += [',"grants":', sa.func.coalesce(held, db.sql_text("[]"))]
            ctes.append(gone)
        ctes += events.recorded_by(topic, written, _concat(*parts, "}"), alone)
        return sa.select(written.c.id).add_cte(*ctes)

    shape = ("delete", alone, events.enabled(), guarded and document_access.statement_key(schema))
    parameters = {"doc_id": doc_id, "now": utcnow(), **(acting.parameters() if guarded else {})}
    if not _execute(schema, shape, build, parameters, alone):
        if guarded:
            document_access.require(schema, acting, doc_id, "delete")
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    events.written(topic, alone)


def delete_matching(schema: CompiledSchema, where: Any, acting: Acting | None = None) -> int:
    """Delete every document matching ``where`` (a condition tree) that ``acting`` may delete; returns how many."""
    table = schema.table
    condition = _with_access(schema, Compiler(schema, dialect()).where(where), acting, "delete")
    statement = sa.delete(table).returning(*columns(table))
    if condition is not None:
        statement = statement.where(condition)
    rows = _in_transaction(statement, None if acting is None else acting.parameters()).all()
    grants = document_access.deleted(schema, [row[0] for row in rows])
    if rows:
        _record("delete", schema, [row[0] for row in rows], [to_document(schema, row) for row in rows], grants)
    return len(rows)


def locked_matching(
    schema: CompiledSchema, where: Any, limit: int, acting: Acting | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(id, data)`` of up to ``limit`` documents matching ``where`` that ``acting`` may edit, locked for an
    update in this transaction (custom endpoints read them to compute their assignments)."""
    table = schema.table
    condition = _with_access(schema, Compiler(schema, dialect()).where(where), acting, "edit")
    statement = sa.select(table.c.id, table.c.data).order_by(table.c.id).limit(limit).with_for_update()
    if condition is not None:
        statement = statement.where(condition)
    rows = _in_transaction(statement, None if acting is None else acting.parameters()).all()
    return [(doc_id, data) for doc_id, data in rows]


def denied_matching(schema: CompiledSchema, where: Any, acting: Acting, permission: str) -> str | None:
    """The id of one document matching ``where`` that ``acting`` may read but not ``permission``, or None:
    a bulk write (custom endpoints) refuses with 403 rather than skip it, as a single document's route would."""
    table = schema.table
    condition = Compiler(schema, dialect()).where(where)
    parts = [
        document_access.read_condition(schema, acting),
        # coalesce: a field-backed relation over a NULL column makes the predicate NULL, not false
        sa.not_(sa.func.coalesce(document_access.read_condition(schema, acting, permission), sa.false())),
    ]
    statement = sa.select(table.c.id).where(*([condition] if condition is not None else []), *parts).limit(1)
    return _in_transaction(statement, acting.parameters()).scalar()


def _with_access(
    schema: CompiledSchema, condition: Any, acting: Acting | None, permission: str
) -> sa.ColumnElement[bool] | None:
    """``condition`` AND the caller may read the document AND hold ``permission`` on it."""
    if acting is None:
        return condition
    parts = [document_access.read_condition(schema, acting), document_access.read_condition(schema, acting, permission)]
    return sa.and_(*([condition] if condition is not None else []), *parts)


def serialise(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
