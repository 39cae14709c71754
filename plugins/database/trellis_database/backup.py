"""The module's part in backups (``trellis.backups``): its per-schema document tables, which are created at
run time and so are not in the shared metadata. A backup copies their stored columns (the generated ones
are computed again); a restore creates each table as the restored schema record describes it."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trellis.backups.parts import RuntimeTable
from trellis.hooks import hookimpl

from . import tables
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
            create = functools.partial(_create, name=name, state=state)
            found.append(RuntimeTable(tables.make_table(name, {}), create))
        return found


def _create(connection: Connection, *, name: str, state: dict[str, Any]) -> None:
    tables.create_from_state(connection, name, state)
