"""Which tables a backup holds: the shared metadata's (the core's and every loaded module's models) that exist
in the database, plus the run-time tables modules report through ``trellis_backup_tables``. Nothing is listed
by name: a module installed tomorrow is backed up with no change here."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..db import Base
from ..models import BackupLock, BackupRecord, CacheGeneration, EventConsumer, EventCounter, EventRecord, PendingEvent
from .parts import RuntimeTable

# The backups' own records describe archives that live outside the database: a restore keeps them as they are.
OWN = frozenset({BackupRecord.__tablename__, BackupLock.__tablename__})
# Tables a restore treats by their meaning rather than copying back (see ``restore``).
GENERATIONS = CacheGeneration.__tablename__
EVENTS = EventRecord.__tablename__
# Events not numbered yet describe the state a restore replaces: like the log, they are not copied back.
PENDING_EVENTS = PendingEvent.__tablename__
CONSUMERS = EventConsumer.__tablename__
# The change counters only grow (``trellis.events.change_number``): a restore keeps them and bumps them.
COUNTERS = EventCounter.__tablename__


def kept(table: sa.Table) -> bool:
    """Whether a restore keeps the table as it is (and a backup leaves it out): the backups' own records, and
    tables a module marks ``info={"backup": "kept"}`` because they describe this installation rather than
    its data (the Storage module's journal of blobs in its backends)."""
    return table.name in OWN or table.info.get("backup") == "kept"


def kept_names() -> set[str]:
    return {t.name for t in Base.metadata.sorted_tables if kept(t)}


def model_tables(connection: Connection) -> list[sa.Table]:
    """The metadata's tables present in the database, parents before children (foreign keys)."""
    present = set(sa.inspect(connection).get_table_names())
    return [t for t in Base.metadata.sorted_tables if t.name in present and not kept(t)]


def runtime_tables(hooks: Any, connection: Connection) -> list[RuntimeTable]:
    """The run-time tables every loaded module reports, as ``connection`` sees the database."""
    found = [table for reported in hooks.trellis_backup_tables(connection=connection) for table in reported or ()]
    names = [t.table.name for t in found]
    if len(set(names)) != len(names):
        raise RuntimeError("two modules report the same run-time table")
    return found
