"""What a module hands the backups through its hooks (``trellis.hooks``): run-time tables and stored files.

The shared metadata already names every table a module declares as a model; these cover the rest without
the core knowing any module: the Database module's per-schema tables and the Storage module's blobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class RuntimeTable:
    """A table created at run time. ``table`` lists the columns a backup copies (columns the database
    computes itself are left out); ``create`` makes the table, indexes included, on a restore's connection;
    ``drop`` (optional) removes what ``create`` made besides the table, after the table is dropped (e.g. a
    search index kept in a table of its own)."""

    table: sa.Table
    create: Callable[[Connection], None]
    drop: Callable[[Connection], None] | None = None


@dataclass(frozen=True)
class Blob:
    """One stored file: ``name`` is its path in the archive under ``files/`` (``storage/<file id>``);
    ``read()`` gives its bytes in chunks."""

    name: str
    read: Callable[[], Iterable[bytes]]


@dataclass(frozen=True)
class BlobRestore:
    """A module's files being put back, made before the restore's transaction begins (the module records
    there, committed, what it is about to write, so a restore killed at any point leaves nothing it cannot
    find again). ``write(connection)`` writes the blobs inside the restore's transaction, before its rows
    are replaced (``connection`` still shows the rows being replaced); then exactly one of ``finish`` (after
    the commit: remove the blobs nothing references any more) and ``undo`` (the restore failed: remove what
    it wrote that was not there before) is called."""

    write: Callable[[Connection], None]
    finish: Callable[[], None]
    undo: Callable[[], None]
