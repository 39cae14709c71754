"""Documents: validation against the schema, reads (Core rows, no ORM) and writes.

A document is ``{"_id", <fields>…, "createdAt", "updatedAt", "__v"}``; the fields are stored in
``data``, the rest in columns. Writes are single statements where possible (``UPDATE … RETURNING``),
reads fetch only the base columns, and populate runs one query per relation field and level.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask import has_app_context
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError, IntegrityError

from trellis import db
from trellis.credentials import Identity
from trellis.db import new_id, utcnow
from trellis.errors import APIError, bad_request, conflict, not_found

from . import counts, readers
from .access import allowed
from .fields import FieldError, check_value
from .query import Compiler
from .registry import CompiledSchema, Snapshot

SERVER_FIELDS = frozenset({"_id", "createdAt", "updatedAt", "__v"})
MAX_MANY = 1000
MAX_CACHED_SHAPES = 256


def dialect() -> str:
    return db.session.get_bind().dialect.name


def run(statement: Any, parameters: Any = None) -> Any:
    """Execute a Core statement on the session's connection (its transaction), skipping the ORM layer.

    In a read-only document request (see :mod:`.readers`) it runs on that request's autocommit
    connection instead. A write marks its table, so the cached counts of that table are dropped
    once the transaction commits (see :mod:`.counts`).
    """
    connection = readers.current() if has_app_context() else None
    if connection is not None:
        return connection.execute(statement, parameters)
    session = db.session()
    if getattr(statement, "is_dml", False):
        counts.touched(session, statement.table.name)
    return session.connection().execute(statement, parameters)


def columns(table: sa.Table) -> tuple[sa.Column, ...]:
    return table.c.id, table.c.data, table.c.created_at, table.c.updated_at, table.c.version


_STAMP_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'  # the same text as _stamp(), made by PostgreSQL


def text_columns(table: sa.Table, dialect_name: str) -> tuple[sa.ColumnElement, ...]:
    """The document's columns for :func:`document_json`: ``data`` as JSON text, and on PostgreSQL
    the timestamps already formatted, so a read never decodes and re-encodes the stored JSON."""
    data = sa.cast(table.c.data, sa.Text)
    if dialect_name != "postgresql":
        return table.c.id, data, table.c.created_at, table.c.updated_at, table.c.version
    # Constants as SQL text, not parameters: the statement is compiled once and run with its id only.
    utc, stamp_format = sa.literal_column("'UTC'"), sa.literal_column(f"'{_STAMP_FORMAT}'")
    created, updated = (sa.func.to_char(sa.func.timezone(utc, column), stamp_format)
                        for column in (table.c.created_at, table.c.updated_at))
    return table.c.id, data, created, updated, table.c.version


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


def check_relations(snapshot: Snapshot, schema: CompiledSchema, docs: list[dict[str, Any]],
                    prefix: str = "") -> None:
    """Every Relation value must name an existing document of the related schema (400 otherwise)."""
    wanted: dict[str, set[str]] = {}
    for doc in docs:
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                ids = doc[name] if field.array else [doc[name]]
                wanted.setdefault(field.model, set()).update(ids)
    missing: dict[str, set[str]] = {}
    for model, ids in wanted.items():
        target = snapshot.document_schema(model)
        found: set[str] = set()
        if target is not None and ids:
            table = target.table
            found = set(run(sa.select(table.c.id).where(table.c.id.in_(list(ids)))).scalars())
        missing[model] = ids - found
    errors: dict[str, list[str]] = {}
    for index, doc in enumerate(docs):
        for name, field in schema.fields.items():
            if field.type == "Relation" and name in doc:
                ids = doc[name] if field.array else [doc[name]]
                gone = [i for i in ids if i in missing.get(field.model, ())]
                if gone:
                    key = f"{prefix}{index}.{name}" if prefix else name
                    errors[key] = [f"No {field.model} document with id {gone[0]!r}"]
    if errors:
        raise bad_request("A related document does not exist", errors)


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


def get(schema: CompiledSchema, doc_id: str) -> dict[str, Any]:
    return json.loads(get_json(schema, doc_id))


def get_json(schema: CompiledSchema, doc_id: str) -> str:
    """One document as JSON text (404 if there is none)."""
    row = _first_by_id(schema, doc_id)
    if row is None:
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    return document_json(schema, row)


def _first_by_id(schema: CompiledSchema, doc_id: str) -> Any:
    """The hottest read: on PostgreSQL the compiled SQL runs straight on the DB-API cursor.

    The statement has one string parameter and its columns are plain text and an integer (see
    :func:`text_columns`), so SQLAlchemy's execution layer adds nothing here but its per-call cost.
    A failure is left to SQLAlchemy, as on every other path.
    """
    connection = readers.current() if has_app_context() else None
    connection = connection or db.session.connection()
    if connection.dialect.name != "postgresql":
        return connection.execute(_by_id(schema, connection.dialect.name), {"doc_id": doc_id}).first()
    sql = schema.statements.get("by_id_sql")
    if sql is None:
        sql = schema.statements["by_id_sql"] = str(_by_id(schema, "postgresql").compile(dialect=connection.dialect))
    raw = connection.pooled.dbapi_connection if isinstance(connection, readers.Reader) else connection.connection.dbapi_connection
    try:
        with raw.cursor() as cursor:
            cursor.execute(sql, {"doc_id": doc_id})
            return cursor.fetchone()
    except raw.Error as exc:  # type: ignore[union-attr]
        if isinstance(connection, readers.Reader):
            # Autocommit: safe to run again through SQLAlchemy, which wraps the error (the stale-table
            # retry relies on that) and, when the connection is dead, renews the pool's other ones.
            return connection.execute(_by_id(schema, "postgresql"), {"doc_id": doc_id}).first()
        # In a transaction (aborted now): wrap the original error as SQLAlchemy would.
        raise DBAPIError.instance(sql, {"doc_id": doc_id}, exc, connection.dialect.loaded_dbapi.Error) from exc


def _by_id(schema: CompiledSchema, dialect_name: str) -> sa.Select:
    stmt = schema.statements.get("by_id")
    if stmt is None:  # built once per compiled schema: the hottest read skips statement construction
        table = schema.table
        stmt = sa.select(*text_columns(table, dialect_name)).where(table.c.id == sa.bindparam("doc_id"))
        schema.statements["by_id"] = stmt
    return stmt


def find(schema: CompiledSchema, where: Any = None, sort: str | None = None, skip: int = 0, limit: int = 25,
         count: bool = True) -> tuple[list[dict[str, Any]], int]:
    """One page of documents matching ``where`` (a condition tree) and the total before skip/limit."""
    texts, total = find_json(schema, where, sort, skip, limit, count)
    return [json.loads(text) for text in texts], total


def find_json(schema: CompiledSchema, where: Any = None, sort: str | None = None, skip: int = 0, limit: int = 25,
              count: bool = True) -> tuple[list[str], int]:
    """:func:`find` with each document as JSON text (see :func:`document_json`).

    The statements are built once per query *shape* (fields, operators, sort) and cached on the
    compiled schema; each request only binds its values.
    """
    dialect_name = dialect()
    compiler = Compiler(schema, dialect_name)
    shape, values = compiler.prepare(where)
    key = ("find", shape, sort or "")
    statements = schema.statements.get(key)
    if statements is None:
        condition = compiler.build(shape)
        order = compiler.order_by(sort)
        table = schema.table
        page = sa.select(*text_columns(table, dialect_name))
        total = sa.select(sa.func.count()).select_from(table)
        if condition is not None:
            page, total = page.where(condition), total.where(condition)
        page = page.order_by(*order).offset(sa.bindparam("skip")).limit(sa.bindparam("limit"))
        if len(schema.statements) >= MAX_CACHED_SHAPES:  # clients choose shapes: keep the cache bounded
            schema.statements.clear()
        statements = schema.statements[key] = (page, total)
    page, total_stmt = statements
    params = {f"p{index}": value for index, value in enumerate(values)}
    rows = run(page, {**params, "skip": skip, "limit": limit}).all()
    if not count:
        total = len(rows)
    elif len(rows) < limit and (rows or skip == 0):
        total = skip + len(rows)  # a short page tells the total without counting
    else:
        total = counts.cached(schema.table.name, (schema.version, shape, values),
                              lambda: run(total_stmt, params).scalar_one())
    return [document_json(schema, row) for row in rows], total


def populate(snapshot: Snapshot, schema: CompiledSchema, docs: list[dict[str, Any]], tree: dict[str, Any],
             identity: Identity | None) -> None:
    """Replace relation ids by the related documents, one query per relation field and level."""
    for name, subtree in tree.items():
        field = schema.fields[name]
        target = snapshot.document_schema(field.model)
        denied = allowed(target, "read", identity)
        if denied is not None:
            raise denied
        ids: set[str] = set()
        for doc in docs:
            value = doc.get(name)
            if field.array and isinstance(value, list):
                ids.update(v for v in value if isinstance(v, str))
            elif isinstance(value, str):
                ids.add(value)
        if not ids:
            continue
        table = target.table
        rows = run(sa.select(*columns(table)).where(table.c.id.in_(sorted(ids)))).all()
        found = {row[0]: to_document(target, row) for row in rows}
        if subtree:
            populate(snapshot, target, list(found.values()), subtree, identity)
        for doc in docs:
            value = doc.get(name)
            if field.array and isinstance(value, list):
                doc[name] = [found[v] for v in value if v in found]
            elif isinstance(value, str):
                doc[name] = found.get(value)


# ---- writes ----------------------------------------------------------------------------------------


def insert(snapshot: Snapshot, schema: CompiledSchema, bodies: list[Any], many: bool = False) -> list[dict[str, Any]]:
    """Validate and insert documents in the caller's transaction (all or nothing)."""
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
    check_relations(snapshot, schema, values, prefix="docs." if many else "")
    now = utcnow()
    rows = [{"id": new_id(), "data": data, "created_at": now, "updated_at": now, "version": 0} for data in values]
    try:
        run(sa.insert(schema.table), rows)
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    return [to_document(schema, (r["id"], r["data"], now, now, 0)) for r in rows]


def _unique_within(schema: CompiledSchema, values: list[dict[str, Any]]) -> None:
    for name, field in schema.fields.items():
        if not field.unique:
            continue
        seen: dict[Any, int] = {}
        for index, data in enumerate(values):
            if name in data:
                if data[name] in seen:
                    raise conflict(f"Two documents of the batch share the same {name}",
                                   {"docs": {str(index): {name: ["Already taken (in this batch)"]}}})
                seen[data[name]] = index


def replace(snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any) -> dict[str, Any]:
    values, _ = validate(schema, body, "replace")
    check_relations(snapshot, schema, [values])
    return _update(schema, doc_id, values)


def patch(snapshot: Snapshot, schema: CompiledSchema, doc_id: str, body: Any) -> dict[str, Any]:
    values, removed = validate(schema, body, "patch")
    check_relations(snapshot, schema, [values])
    return _update(schema, doc_id, merge_expression(schema.table, values, removed))


def merge_expression(table: sa.Table, values: dict[str, Any], removed: Iterable[str]) -> sa.ColumnElement:
    """``data`` with ``values`` set and ``removed`` keys dropped, computed by the database."""
    removed = list(removed)
    if dialect() == "postgresql":
        merged = sa.type_coerce(table.c.data, JSONB)
        if values:
            merged = merged.op("||")(sa.cast(sa.literal(json.dumps(values)), JSONB))
        if removed:
            merged = merged.op("-")(sa.cast(sa.literal(removed), sa.ARRAY(sa.Text)))
        return sa.type_coerce(merged, JSONB)
    merged = table.c.data
    if removed:
        merged = sa.func.json_remove(merged, *[f"$.{name}" for name in removed])
    if values:
        args: list[Any] = []
        for name, value in values.items():
            args += [f"$.{name}", sa.func.json(json.dumps(value))]
        merged = sa.func.json_set(merged, *args)
    return merged


def _update(schema: CompiledSchema, doc_id: str, data: Any) -> dict[str, Any]:
    table = schema.table
    stmt = (
        sa.update(table)
        .where(table.c.id == doc_id)
        .values(data=data, updated_at=utcnow(), version=table.c.version + 1)
        .returning(*columns(table))
    )
    try:
        row = run(stmt).first()
    except IntegrityError as exc:
        raise unique_conflict(schema, exc) from None
    if row is None:
        raise not_found(f"No {schema.name} document with id {doc_id!r}")
    return to_document(schema, row)


def delete(schema: CompiledSchema, doc_id: str) -> None:
    table = schema.table
    result = run(sa.delete(table).where(table.c.id == doc_id))
    if result.rowcount == 0:
        raise not_found(f"No {schema.name} document with id {doc_id!r}")


def serialise(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
