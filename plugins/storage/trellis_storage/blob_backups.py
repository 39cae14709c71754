"""A backup's blobs and a restore's: every file record's blob read from its backend, and the blobs of a
restore's records written back, crash-safe through the journal."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from sqlalchemy import select

from trellis import reads
from trellis.backups.parts import Blob, BlobRestore

from .backends import Backend
from .journal import delete_committed, delete_entries, forget, journal_on
from .models import File
from .placement import MODULE, READ_CHUNK, backend_at, config, s3_backend


def backup_blobs(rows: Callable[[str], Iterator[dict[str, Any]]]) -> Iterator[Blob]:
    """The blob of every file record of a backup's snapshot, read from the backend that holds it."""
    cfg = config()
    for row in rows(File.__tablename__):
        backend = backend_at(cfg, row["backend"], row["location"])
        yield Blob(f"{MODULE}/{row['id']}", functools.partial(backend.read, row["key"]))


def restore_blobs(rows: Callable[[str], Iterator[dict[str, Any]]], blob: Callable[[str], BinaryIO]) -> BlobRestore:
    """Put back the blobs of a restore's file records (a blob's key names its file, so a file present before
    and after is the same bytes), crash-safe across processes through the journal:

    - now, before the restore's transaction, one ``restore`` entry per blob to write is committed: a restore
      killed from here on leaves entries the sweep settles (the blobs no committed record references go);
    - ``write``, in the restore's transaction: the blobs are written, their entries removed and the blobs of
      the files the restore drops journaled as ``delete`` — all of which commits or rolls back with the rows;
    - ``finish`` (committed): those dropped files' blobs removed; ``undo`` (rolled back): the blobs written
      that were not there before removed. Whatever a killed process skipped, the sweep does."""
    cfg = config()
    wanted = [
        (row["id"], (row["backend"], row["location"], row["key"]), row["content_type"])
        for row in rows(File.__tablename__)
    ]
    with reads.transaction() as connection:
        journal = journal_on(connection, "restore", [(backend_at(cfg, n, loc), k) for _, (n, loc, k), _ in wanted])
    table = File.__table__
    written: list[tuple[Backend, str, str]] = []
    gone: list[tuple[Backend, str, str]] = []

    def write(connection: Any) -> None:
        before = {tuple(r) for r in connection.execute(select(table.c.backend, table.c.location, table.c.key))}
        restored: set[tuple[str, str | None, str]] = set()
        for (file_id, place, content_type), entry in zip(wanted, journal, strict=True):
            backend, key = backend_at(cfg, place[0], place[1]), place[2]
            writer = backend.writer(key, content_type)
            try:
                with blob(f"{MODULE}/{file_id}") as source:
                    while chunk := source.read(READ_CHUNK):
                        writer.write(chunk)
                writer.commit()
            except BaseException:
                writer.abort()
                raise
            writer.close()
            restored.add(place)
            if place not in before:
                written.append((backend, key, entry))
        delete_entries(connection, journal)
        dropped = [(backend_at(cfg, name, location), key) for name, location, key in before - restored]
        gone.extend((b, k, e) for (b, k), e in zip(dropped, journal_on(connection, "delete", dropped), strict=True))

    def undo() -> None:
        removing = {entry for _, _, entry in written}
        forget([entry for entry in journal if entry not in removing])
        delete_committed(written)

    return BlobRestore(write=write, finish=lambda: delete_committed(gone), undo=undo)


def backup_store() -> Backend | None:
    """The backups' archive store (``backups.storage: s3``): the S3 backend of the configured bucket."""
    cfg = config()
    return s3_backend(cfg, cfg["s3"]["bucket"]) if cfg["s3"]["bucket"] else None
