"""Restoring an archive: everything replaced in one transaction, files included, then every process told.

The archive has been verified as a whole (``archive.verify``) and checked against the loaded modules
(:func:`check_fits`) before anything changes. Then, in the one transaction of ``db.session``:

1. each module with files writes the archive's blobs to their backends (``trellis_restore_blobs``; each
   recorded, committed, what it was about to write before the transaction began: see ``BlobRestore``);
2. the current run-time tables are dropped and every model table emptied (children first);
3. an archive from older migrations: the tables are brought to its heads (``lineage``);
4. the archive's rows are inserted (parent tables first; within a table that references itself, parent
   rows first), then the run-time tables the restored rows describe are created and filled; an archive
   from older migrations: every later migration runs over them;
5. the event log is not copied back: it gets one marker per event family numbered above every number
   used before and in the archive, so numbers are never given twice, every family's change number moves
   (the Database module's list counts are keyed by it) and a replay from before the restore answers
   "resync required"; durable consumers (webhooks) go on from there;
6. every cache generation is bumped (``trellis.cache``): each process rebuilds its caches for its next
   request.

It commits, and only then are blobs nothing references any more removed. A failure rolls everything back
and removes the blobs step 1 wrote that were not there before: the previous state stays. A row the database
refuses is named in the error by its table and primary key. On PostgreSQL the
model tables are locked (``EXCLUSIVE``: reads go on, writes wait for the restored state).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from flask import Flask

from .. import audit, db
from .. import events as trellis_events
from ..cache import REMEMBERED
from ..db import Base
from ..models import EventRecord
from . import create, lineage, tables
from .archive import Archive, ArchiveError, cooperate
from .parts import BlobRestore
from .rows import decoder

log = logging.getLogger(__name__)

BATCH = 1000
RESTORE_FAMILY = "trellis.restore"


def check_fits(app: Flask, archive: Archive) -> None:
    """Refuse (ArchiveError) an archive holding tables of modules this process does not load. An archive from
    older migrations is checked against the tables as they were at its heads, once the restore has them."""
    with app.extensions["trellis"].engine.connect() as connection:
        if set(archive.manifest["heads"]) != set(create.current_heads(connection)):
            return
        known = {t.name for t in tables.model_tables(connection)} | tables.kept_names()
    foreign = sorted(name for name, entry in archive.tables().items() if not entry.get("runtime") and name not in known)
    if foreign:
        raise ArchiveError(f"the backup holds tables no loaded module declares: {', '.join(foreign[:10])}")


def restore(app: Flask, archive: Archive) -> dict[str, Any]:
    """Replace the whole state by the archive's (see the module docstring). Call in an app context."""
    trellis = app.extensions["trellis"]
    hooks = trellis.hooks.hook
    session = db.session
    # Before the transaction begins: on SQLite a transaction that has read cannot write once another has
    # committed (the modules' journals), so the session's reads (a module's config) end here too.
    session.rollback()
    restorers: list[BlobRestore] = [
        made for made in hooks.trellis_restore_blobs(rows=_rows(archive), blob=archive.open_blob) if made is not None
    ]
    session.rollback()
    try:
        # SQLite: foreign keys off for this transaction (an older archive's migrations recreate tables, see
        # trellis.db), checked as a whole before the commit instead.
        connection = session.connection(execution_options={db.SQLITE_FOREIGN_KEYS_OFF: True})
        archived = archive.tables()
        heads = archive.manifest["heads"]
        older = set(heads) != set(create.current_heads(connection))
        model = tables.model_tables(connection)
        if connection.dialect.name == "postgresql":
            names = ", ".join(connection.dialect.identifier_preparer.quote(t.name) for t in model)
            connection.exec_driver_sql(f"LOCK TABLE {names} IN EXCLUSIVE MODE")
        before_latest, before_families = _event_state(connection)
        generations = set(connection.execute(sa.text(f"SELECT name FROM {tables.GENERATIONS}")).scalars())
        for restorer in restorers:
            restorer.write(connection)
        for runtime in tables.runtime_tables(hooks, connection):
            connection.execute(sa.schema.DropTable(runtime.table, if_exists=True))
            if runtime.drop is not None:
                runtime.drop(connection)
        for table in reversed(model):
            if table.name not in (tables.GENERATIONS, tables.COUNTERS):
                connection.execute(table.delete())
        if older:
            counters = _counters(connection)
            lineage.downgrade_to(app, connection, heads)
            targets = _as_archived(connection, archived)
        else:
            skipped = (tables.EVENTS, tables.PENDING_EVENTS, tables.GENERATIONS, tables.COUNTERS)
            targets = [t for t in model if t.name in archived and t.name not in skipped]
        counts = {table.name: _insert(connection, archive, table) for table in targets}
        for runtime in tables.runtime_tables(hooks, connection):
            runtime.create(connection)
            if runtime.table.name in archived:
                counts[runtime.table.name] = _insert(connection, archive, runtime.table)
        if older:
            lineage.upgrade(app, connection)
            _keep_counters(connection, counters)
        archived_latest, archived_families = _archived_events(archive)
        _move_event_log(connection, max(before_latest, archived_latest), before_families | archived_families, archive)
        generations |= _archived_generations(archive) | REMEMBERED
        for name in sorted(generations):
            trellis.generations.bump(name)
        broken = _dangling_reference(connection)
        if broken is not None:
            raise ArchiveError(f"the backup cannot be restored: {broken}")
        audit.record("backups", "restore", archive.path.name, {"tables": len(counts), "migrated": older})
        session.commit()
    except BaseException:
        session.rollback()
        for restorer in restorers:
            _quietly(restorer.undo, "undoing a module's restored files")
        raise
    for restorer in restorers:
        _quietly(restorer.finish, "removing files the restored state no longer references")
    return {"tables": counts, "files": len(archive.manifest["files"]), "migrated": older}


def _as_archived(connection: sa.Connection, archived: dict[str, dict[str, Any]]) -> list[sa.Table]:
    """The archive's tables as the database has them now (at the archive's heads), parents first. A column
    the current models still declare keeps their type (its conversions: UTC datetimes, JSON)."""
    present = set(sa.inspect(connection).get_table_names())
    kept = tables.kept_names()
    missing = sorted(n for n, entry in archived.items() if not entry.get("runtime") and n not in present | kept)
    if missing:
        raise ArchiveError(f"the backup holds tables its migrations do not have here: {', '.join(missing[:10])}")
    skipped = {tables.EVENTS, tables.PENDING_EVENTS, tables.GENERATIONS, tables.COUNTERS} | kept
    wanted = [name for name, entry in archived.items() if not entry.get("runtime") and name not in skipped]
    reflected = sa.MetaData()
    reflected.reflect(connection, only=wanted)
    for table in reflected.tables.values():
        model = Base.metadata.tables.get(table.name)
        for column in table.columns:
            if model is not None and column.name in model.c:
                column.type = model.c[column.name].type
    return [table for table in reflected.sorted_tables if table.name in wanted]


def _quietly(step: Callable[[], None], what: str) -> None:
    try:
        step()
    except Exception:
        log.exception("%s failed", what)


def _rows(archive: Archive) -> Callable[[str], Iterator[dict[str, Any]]]:
    """``rows(name)`` for the blob hooks: the archive's rows of a table, as dicts by column name (values as
    JSON holds them)."""

    def rows(name: str) -> Iterator[dict[str, Any]]:
        if name not in archive.tables():
            return iter(())
        columns, lines = archive.lines(name)
        return (dict(zip(columns, values, strict=True)) for values in lines)

    return rows


def _insert(connection: sa.Connection, archive: Archive, table: sa.Table) -> int:
    """Insert the archive's rows of ``table`` in batches. A table that references itself gets its rows
    parents first (:func:`_parents_first`), each with its references set: a row written with its parent
    left out for a while may break a constraint the final state keeps (a sub-team named like a root team
    against the unique index of root names); such a table's rows are held in memory to be ordered. Columns
    the archive lacks take their defaults."""
    names, lines = archive.lines(table.name)
    columns = [table.c[name] for name in names if name in table.c]
    keep = [i for i, name in enumerate(names) if name in table.c]
    decode = decoder(columns)
    rows: Iterator[dict[str, Any]] = (decode([values[i] for i in keep]) for values in lines)
    later: list[dict[str, Any]] = []
    if _self_references(table):
        ordered, later = _parents_first(table, list(rows))
        rows = iter(ordered)
    batch: list[dict[str, Any]] = []
    count = 0
    for row in rows:
        batch.append(row)
        count += 1
        if len(batch) >= BATCH:
            _write(connection, table, table.insert(), batch)
            batch = []
            cooperate()
    if batch:
        _write(connection, table, table.insert(), batch)
    if later:
        pk = list(table.primary_key.columns)
        targets = sorted({key for update in later for key in update if not key.startswith("pk_")})
        update = (
            table.update()
            .where(*(c == sa.bindparam(f"pk_{c.key}") for c in pk))
            .values({key: sa.bindparam(key) for key in targets})
        )
        _write(connection, table, update, later)
    return count


def _self_references(table: sa.Table) -> list[sa.ForeignKeyConstraint]:
    return [fk for fk in table.foreign_key_constraints if fk.referred_table is table]


def _parents_first(table: sa.Table, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows in an order where every row the table's references point to comes before the rows pointing
    to it (the archive's order otherwise), and the updates still to run after them.

    Only a cycle of rows (possible where a database checks its references at commit) has no such order:
    one reference of it is written NULL, and set by an update once every row is in. A reference to a row
    the archive lacks is left as it is, for the database's checks to name."""
    constraints = _self_references(table)
    provided: list[dict[tuple[Any, ...], int]] = []
    for fk in constraints:
        referred = [element.column.key for element in fk.elements]
        provided.append({tuple(row[key] for key in referred): i for i, row in enumerate(rows)})

    def parents(i: int) -> Iterator[tuple[sa.ForeignKeyConstraint, int]]:
        for fk, index in zip(constraints, provided, strict=True):
            key = tuple(rows[i].get(column.key) for column in fk.columns)
            j = None if None in key else index.get(key)
            if j is not None and j != i:
                yield fk, j

    state = [0] * len(rows)  # 0: not placed, 1: its parents being placed, 2: placed
    order: list[int] = []
    cut: dict[int, list[sa.ForeignKeyConstraint]] = {}
    for start in range(len(rows)):
        if state[start]:
            continue
        state[start] = 1
        stack = [(start, parents(start))]
        while stack:
            i, pending = stack[-1]
            for fk, j in pending:
                if state[j] == 0:
                    state[j] = 1
                    stack.append((j, parents(j)))
                    break
                if state[j] == 1 and all(column.nullable for column in fk.columns):
                    cut.setdefault(i, []).append(fk)
            else:
                stack.pop()
                state[i] = 2
                order.append(i)
    later = []
    pk = list(table.primary_key.columns)
    for i, broken in cut.items():
        row = rows[i]
        update = {f"pk_{c.key}": row[c.key] for c in pk}
        for fk in broken:
            for column in fk.columns:
                update[column.key] = row[column.key]
                row[column.key] = None
        later.append(update)
    return [rows[i] for i in order], later


def _write(connection: sa.Connection, table: sa.Table, statement: Any, rows: list[dict[str, Any]]) -> None:
    """Run ``statement`` over ``rows``; a row the database refuses is named (its table and primary key) in
    the ArchiveError raised, found by running the batch again a row at a time."""
    try:
        with connection.begin_nested():
            connection.execute(statement, rows)
        return
    except sa.exc.DBAPIError as exc:
        if not isinstance(exc, sa.exc.IntegrityError | sa.exc.DataError):
            raise
        failure = exc
    for row in rows:
        try:
            with connection.begin_nested():
                connection.execute(statement, [row])
        except (sa.exc.IntegrityError, sa.exc.DataError) as exc:
            raise ArchiveError(_refused(table, row, exc)) from None
    raise ArchiveError(_refused(table, None, failure)) from None  # refused only as a whole


def _row_name(table: sa.Table, row: dict[str, Any] | None) -> str:
    if row is None:
        return f"table {table.name}"
    key = ", ".join(f"{c.name}={row.get(c.key, row.get(f'pk_{c.key}'))}" for c in table.primary_key.columns)
    return f"table {table.name}, row {key}"


def _refused(table: sa.Table, row: dict[str, Any] | None, exc: sa.exc.DBAPIError) -> str:
    """The database's reason, its first line only: the lines after it quote the row's values."""
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else exc.__class__.__name__
    return f"the backup cannot be restored: {_row_name(table, row)}: {reason[:300]}"


def _dangling_reference(connection: sa.Connection) -> str | None:
    """SQLite (its checks off for the restore): the first row pointing to a missing row, named by its table
    and primary key. Other databases checked every statement as it ran."""
    if connection.dialect.name != "sqlite":
        return None
    found = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
    if found is None:
        return None
    name, rowid, parent = found[0], found[1], found[2]
    keys = sa.inspect(connection).get_pk_constraint(name)["constrained_columns"]
    row = None
    if rowid is not None and keys:
        quote = connection.dialect.identifier_preparer.quote
        query = f"SELECT {', '.join(quote(k) for k in keys)} FROM {quote(name)} WHERE rowid = ?"
        row = connection.exec_driver_sql(query, (rowid,)).first()
    which = "a row" if row is None else "row " + ", ".join(f"{k}={v}" for k, v in zip(keys, row, strict=True))
    return f"table {name}, {which}: references a missing row of {parent}"


def _event_state(connection: sa.Connection) -> tuple[int, set[str]]:
    events = EventRecord.__table__
    latest = connection.execute(sa.select(sa.func.max(events.c.event_id))).scalar() or 0
    families = set(connection.execute(sa.select(events.c.family).distinct()).scalars())
    return latest, families


def _archived_events(archive: Archive) -> tuple[int, set[str]]:
    if tables.EVENTS not in archive.tables():
        return 0, set()
    names, lines = archive.lines(tables.EVENTS)
    at_id, at_family = names.index("event_id"), names.index("family")
    latest, families = 0, set()
    for values in lines:
        latest = max(latest, values[at_id] or 0)
        families.add(values[at_family])
    return latest, families


def _archived_generations(archive: Archive) -> set[str]:
    if tables.GENERATIONS not in archive.tables():
        return set()
    names, lines = archive.lines(tables.GENERATIONS)
    at = names.index("name")
    return {values[at] for values in lines}


def _move_event_log(connection: sa.Connection, used: int, families: set[str], archive: Archive) -> None:
    """One marker per family above every number used, and durable consumers placed after them.

    A marker's topic is its two-segment family, which no subscription pattern (three segments) matches:
    live consumers never see one. It is the family's oldest kept event, so ``trellis.events.complete_after``
    tells a replay from before the restore that it must resync."""
    events = EventRecord.__table__
    now = db.utcnow()
    payload = json.dumps({"restored": archive.path.name})
    markers: list[dict[str, Any]] = [
        {"event_id": used + i, "topic": family, "family": family, "payload": payload, "created_at": now}
        for i, family in enumerate(sorted(families | {RESTORE_FAMILY}), start=1)
    ]
    connection.execute(events.insert(), markers)
    trellis_events.count_commit(connection, [marker["family"] for marker in markers])  # every change number moves
    last = used + len(markers)
    connection.execute(sa.text(f"UPDATE {tables.CONSUMERS} SET last_event_id = :last"), {"last": last})


def _counters(connection: sa.Connection) -> list[dict[str, Any]]:
    """The change counters' rows (``trellis.events.change_number``), read before an older archive's
    downgrades may drop their table."""
    table = Base.metadata.tables[tables.COUNTERS]
    return [dict(row) for row in connection.execute(sa.select(table)).mappings()]


def _keep_counters(connection: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Put the counters back as they were before the restore: the upgrade re-created their table seeded
    from the (emptied) event log, which would take every change number back and let a count cached
    under an old number answer again. The event log's move then bumps each of them once more."""
    table = Base.metadata.tables[tables.COUNTERS]
    connection.execute(table.delete())
    if rows:
        connection.execute(table.insert(), rows)
