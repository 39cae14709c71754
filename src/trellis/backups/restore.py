"""Restoring an archive: everything replaced in one transaction, files included, then every process told.

The archive has been verified as a whole (``archive.verify``) and checked against the loaded modules
(:func:`check_fits`) before anything changes. Then, in the one transaction of ``db.session``:

1. each module with files writes the archive's blobs to their backends (``trellis_restore_blobs``; each
   recorded, committed, what it was about to write before the transaction began: see ``BlobRestore``);
2. the current run-time tables are dropped and every model table emptied (children first);
3. an archive from older migrations: the tables are brought to its heads (``lineage``);
4. the archive's rows are inserted (parents first; a table's references to itself are set after its
   rows are in), then the run-time tables the restored rows describe are created and filled; an archive
   from older migrations: every later migration runs over them;
5. the event log is not copied back: it gets one marker per event family numbered above every number
   used before and in the archive, so numbers are never given twice, every family's change number moves
   (the Database module's list counts are keyed by it) and a replay from before the restore answers
   "resync required"; durable consumers (webhooks) go on from there;
6. every cache generation is bumped (``trellis.cache``): each process rebuilds its caches for its next
   request.

It commits, and only then are blobs nothing references any more removed. A failure rolls everything back
and removes the blobs step 1 wrote that were not there before: the previous state stays. On PostgreSQL the
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
        broken = db.foreign_key_violation(connection)
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
    """Insert the archive's rows of ``table`` in batches; references of the table to itself are set once
    every row is in (a child may come before its parent). Columns the archive lacks take their defaults."""
    names, lines = archive.lines(table.name)
    columns = [table.c[name] for name in names if name in table.c]
    keep = [i for i, name in enumerate(names) if name in table.c]
    decode = decoder(columns)
    self_refs = [fk.parent for fk in table.foreign_keys if fk.column.table is table and fk.parent.nullable]
    pk = list(table.primary_key.columns)
    later: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []
    count = 0
    for values in lines:
        row = decode([values[i] for i in keep])
        if self_refs and any(row.get(c.key) is not None for c in self_refs):
            later.append({**{f"pk_{c.key}": row[c.key] for c in pk}, **{c.key: row[c.key] for c in self_refs}})
            row.update({c.key: None for c in self_refs})
        batch.append(row)
        count += 1
        if len(batch) >= BATCH:
            connection.execute(table.insert(), batch)
            batch = []
            cooperate()
    if batch:
        connection.execute(table.insert(), batch)
    if later:
        update = (
            table.update()
            .where(*(c == sa.bindparam(f"pk_{c.key}") for c in pk))
            .values({c.key: sa.bindparam(c.key) for c in self_refs})
        )
        connection.execute(update, later)
    return count


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
    markers = [
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
