"""Writing a backup: every table from one snapshot, then the files those rows reference.

PostgreSQL: one ``REPEATABLE READ, READ ONLY`` transaction, whose snapshot is taken by its first query;
SQLite (WAL): one read transaction, whose snapshot likewise holds from its first read. Writers are never
blocked, and a write is wholly in or wholly out. Rows are read through a streaming cursor (``yield_per``)
and written to the archive as they come, so memory stays flat with the data's size. Files are read from
their backends while the snapshot is held; a file deleted meanwhile still has its blob, because deletions
of blobs wait while a backup runs (``jobs.blobs_held``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, entry_points
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.engine import Connection

from .. import db
from ..db import Base
from ..modules import ENTRY_POINT_GROUP
from . import archive, rows, tables
from .archive import cooperate

BATCH = 1000  # rows per fetch from the streaming cursor
HEARTBEAT_SECONDS = 5.0


def write(app: Flask, target: Path, heartbeat: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Write the archive of the current state to ``target``; returns its manifest. Call in an app context."""
    trellis = app.extensions["trellis"]
    engine = trellis.engine
    writer = archive.ArchiveWriter(target)
    beat = _Throttled(heartbeat)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                if engine.dialect.name == "postgresql":
                    connection.exec_driver_sql("SET TRANSACTION READ ONLY")
                manifest = _manifest(app, connection)
                listed: list[dict[str, Any]] = []
                for table in tables.model_tables(connection):
                    listed.append(_copy(writer, connection, table, beat))
                for runtime in tables.runtime_tables(trellis.hooks.hook, connection):
                    listed.append({**_copy(writer, connection, runtime.table, beat), "runtime": True})
                files = []
                by_name = {entry["name"] for entry in listed}
                for reported in trellis.hooks.hook.trellis_backup_blobs(rows=_rows_of(connection, by_name)):
                    for blob in reported or ():
                        files.append(writer.blob(blob.name, _beating(blob.read(), beat)))
                manifest.update(tables=listed, files=files)
        writer.close(manifest)
    except BaseException:
        writer.abort()
        raise
    return manifest


def _manifest(app: Flask, connection: Connection) -> dict[str, Any]:
    versions = {ep.name: ep.dist.version if ep.dist else None for ep in entry_points(group=ENTRY_POINT_GROUP)}
    loaded = [m.name for m in app.extensions["trellis"].modules]
    return {
        "format": archive.FORMAT,
        "formatVersion": archive.FORMAT_VERSION,
        "createdAt": db.isoformat(db.utcnow()),
        "trellis": _version("trellis"),
        "modules": {name: versions.get(name) for name in loaded},
        "dialect": connection.dialect.name,
        "heads": current_heads(connection),
    }


def current_heads(connection: Connection) -> list[str]:
    """The database's migration heads (Alembic's version table), as ``connection`` sees them."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return []
    return sorted(connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())


def _copy(writer: archive.ArchiveWriter, connection: Connection, table: sa.Table, beat: Callable[[], None]) -> dict:
    encode = rows.encoder()
    # The columns the database has: one whose migrations have not all run lacks the newest ones.
    present = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
    columns = [column for column in table.columns if column.name in present]

    def lines() -> Iterator[str]:
        result = connection.execution_options(yield_per=BATCH).execute(sa.select(*columns))
        for count, row in enumerate(result, start=1):
            beat()
            if count % BATCH == 0:
                cooperate()
            yield encode(list(row))

    return writer.table(table.name, [c.name for c in columns], lines())


def _rows_of(connection: Connection, backed_up: set[str]) -> Callable[[str], Iterator[dict[str, Any]]]:
    """``rows(name)`` for the blob hooks: the snapshot's rows of a backed-up table, as dicts."""

    def rows_of(name: str) -> Iterator[dict[str, Any]]:
        if name not in backed_up:
            return iter(())
        table = Base.metadata.tables.get(name)
        if table is None:
            table = sa.Table(name, sa.MetaData(), autoload_with=connection)
        result = connection.execution_options(yield_per=BATCH).execute(sa.select(table))
        return (dict(row._mapping) for row in result)

    return rows_of


def _beating(chunks: Any, beat: Callable[[], None]) -> Iterator[bytes]:
    try:
        for chunk in chunks:
            beat()
            cooperate()
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


class _Throttled:
    def __init__(self, heartbeat: Callable[[], None]) -> None:
        self._heartbeat = heartbeat
        self._next = time.monotonic() + HEARTBEAT_SECONDS

    def __call__(self) -> None:
        if time.monotonic() >= self._next:
            self._next = time.monotonic() + HEARTBEAT_SECONDS
            self._heartbeat()


def _version(distribution: str) -> str:
    try:
        return package_version(distribution)
    except PackageNotFoundError:  # a source tree that was not installed
        return "0.0.0"
