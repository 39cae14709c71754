"""The module's part in backups (``trellis.backups``): its per-schema document tables, which are created at
run time and so are not in the shared metadata. A backup copies their stored columns (the generated ones
are computed again, and so is the search index); a restore creates each table as the restored schema record
describes it."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trellis.backups.parts import RuntimeTable
from trellis.hooks import hookimpl

from . import search, tables
from .models import SchemaRecord


class BackupHooks:
    @hookimpl
    def trellis_backup_tables(self, connection: Connection) -> list[RuntimeTable]:
        """One table per schema record that has one, as ``connection`` sees the records."""
        records = connection.execute(sa.select(SchemaRecord.__table__.c.storage)).scalars()
        found = []
        for storage in records:
            name = (storage or {}).get("table")
            if not name:
                continue
            state = {field: tables.ColumnState(**column) for field, column in (storage.get("columns") or {}).items()}
            searching = search.State.of(storage.get("search"))
            create = functools.partial(_create, name=name, state=state, searching=searching)
            drop = functools.partial(search.drop, state=searching)
            found.append(RuntimeTable(tables.make_table(name, {}), create, drop))
        return found


def _create(connection: Connection, *, name: str, state: dict[str, Any], searching: search.State | None) -> None:
    """The table, then its search index (SQLite: the FTS5 table and triggers, filled as the rows go in)."""
    tables.create_from_state(connection, name, state)
    search.create(connection, name, searching)
