"""A backup's and a restore's uploads in progress (tus): the bytes each unfinished upload (partial uploads of the
``concatenation`` extension included) has stored so far go into the archive as ``storage/uploads/<id>``, and a
restore puts them back where the restored row looks for them, so HEAD answers the archive's offset and a PATCH
from there continues.

An upload only ever appends, so the first ``offset`` bytes of an upload are the same wherever and whenever they
were read: bytes already there that cover the archive's offset are left as they are, and a part made longer by a
restore still serves the previous state if the restore rolls back. The bytes the restored state no longer counts
(uploads it drops or holds at another place: an upload finished since the backup is unfinished again) are
removed once it commits, through the journal like a dropped file's blob."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

from sqlalchemy import select

from trellis import reads
from trellis.backups.parts import Blob, BlobRestore
from trellis.hooks import hookimpl

from . import stored_parts
from .backends import Backend, LocalBackend, S3Backend
from .journal import delete_committed, delete_entries, forget, journal_on
from .models import Upload
from .placement import MODULE, READ_CHUNK, backend_at, config

log = logging.getLogger(__name__)

PREFIX = f"{MODULE}/uploads/"
UPLOADS = Upload.__tablename__


def _unfinished(rows: Callable[[str], Iterator[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    return (row for row in rows(UPLOADS) if row["file_id"] is None)


def backup_parts(rows: Callable[[str], Iterator[dict[str, Any]]]) -> Iterator[Blob]:
    """The stored bytes of every unfinished upload of a backup's snapshot that can be read back."""
    cfg = config()
    for row in _unfinished(rows):
        read = stored_parts.reader(backend_at(cfg, row["backend"], row["location"]), row)
        if read is not None:
            yield Blob(PREFIX + row["id"], read)


def _held(row: Mapping[str, Any]) -> set[tuple[str, str | None, str, str | None]]:
    """What an unfinished upload's row holds in its backend: its part (local) or unfinished part (S3), and its
    S3 multipart upload, as (backend, location, key, multipart upload id or None)."""
    held: set[tuple[str, str | None, str, str | None]] = set()
    place = (row["backend"], row["location"])
    if row["backend"] == "local":
        held.add((*place, stored_parts.part_key(row) or "", None))
        return held
    if row["tail_key"] is not None:
        held.add((*place, row["tail_key"], None))
    if row["s3_upload_id"] is not None:
        held.add((*place, row["key"], row["s3_upload_id"]))
    return held


def restore_parts(rows: Callable[[str], Iterator[dict[str, Any]]], blob: Callable[[str], BinaryIO]) -> BlobRestore:
    """Put back the stored bytes of the restored unfinished uploads (see the module docstring), crash-safe as the
    files' blobs are (``blob_backups.restore_blobs``): a part the restore creates is journaled, committed, before
    its transaction begins; the parts it drops are journaled in it and removed after the commit."""
    cfg = config()
    restored = [dict(row) for row in _unfinished(rows)]
    wanted: list[tuple[dict[str, Any], Backend, str]] = []
    for row in restored:
        key = stored_parts.part_key(row)
        if key is not None and row["offset"]:
            wanted.append((row, backend_at(cfg, row["backend"], row["location"]), key))
    sizes = [_size(backend, key) for _, backend, key in wanted]
    new = [(backend, key) for (_, backend, key), size in zip(wanted, sizes, strict=True) if size is None]
    with reads.transaction() as connection:
        journal = journal_on(connection, "restore", new)
    entries = {(backend.name, backend.location, key): entry for (backend, key), entry in zip(new, journal, strict=True)}
    written: list[tuple[Backend, str, str]] = []
    gone: list[tuple[Backend, str, str]] = []
    aborted: list[tuple[Backend, str, str]] = []

    def write(connection: Any) -> None:
        for (row, backend, key), size in zip(wanted, sizes, strict=True):
            if (size is None or size < row["offset"]) and _put(backend, key, row, blob):
                entry = entries.get((backend.name, backend.location, key))
                if entry is not None:
                    written.append((backend, key, entry))
        delete_entries(connection, journal)
        table = Upload.__table__
        columns = [table.c[name] for name in stored_parts.WHERE]
        before = connection.execute(select(*columns).where(table.c.file_id.is_(None))).mappings()
        kept = set().union(*(_held(row) for row in restored))
        dropped = set().union(*(_held(row) for row in before)) - kept
        files = [(backend_at(cfg, name, location), key) for name, location, key, multipart in dropped if not multipart]
        gone.extend((b, k, e) for (b, k), e in zip(files, journal_on(connection, "delete", files), strict=True))
        aborted.extend((backend_at(cfg, n, loc), key, multipart) for n, loc, key, multipart in dropped if multipart)

    def finish() -> None:
        delete_committed(gone)
        # Only the multipart upload goes, never the object at its key: that may be a restored file's blob.
        for backend, key, multipart in aborted:
            if isinstance(backend, S3Backend):
                with contextlib.suppress(Exception):  # best effort: S3 keeps nothing of it readable anyway
                    backend.client.abort_multipart_upload(Bucket=backend.location, Key=key, UploadId=multipart)

    def undo() -> None:
        removing = {entry for _, _, entry in written}
        forget([entry for entry in journal if entry not in removing])
        delete_committed(written)

    return BlobRestore(write=write, finish=finish, undo=undo)


def _size(backend: Backend, key: str) -> int | None:
    """How many bytes are stored at ``key`` (None: nothing). The bytes an upload stored there are the archive's
    as far as they go (an upload only appends; an S3 unfinished part is never rewritten)."""
    if isinstance(backend, LocalBackend):
        try:
            return backend.path(key).stat().st_size
        except FileNotFoundError:
            return None
    return stored_parts.s3_size(backend, key)


def _put(backend: Backend, key: str, row: Mapping[str, Any], blob: Callable[[str], BinaryIO]) -> bool:
    """The archive's bytes of ``row``'s upload written at ``key``, streamed; False (nothing written) when the
    archive does not hold all of them."""
    offset = int(row["offset"])
    try:
        source = blob(PREFIX + row["id"])
    except KeyError:
        return False
    writer = backend.writer(key, "application/octet-stream")
    try:
        with source:
            copied = 0
            while copied < offset and (chunk := source.read(min(READ_CHUNK, offset - copied))):
                writer.write(chunk)
                copied += len(chunk)
        if copied < offset:
            writer.abort()
            log.warning("the backup holds %d of the %d bytes of upload %s: not restored", copied, offset, row["id"])
            return False
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return True


class UploadBackupHooks:
    """The backup hooks for uploads in progress (the files' blobs are ``blob_backups``)."""

    @hookimpl
    def trellis_backup_blobs(self, rows: Any) -> Any:
        """A backup holds the bytes stored so far of every unfinished upload in its snapshot."""
        return backup_parts(rows)

    @hookimpl
    def trellis_restore_blobs(self, rows: Any, blob: Any) -> Any:
        """A restore puts them back, so the restored uploads continue from the archive's offsets."""
        return restore_parts(rows, blob)
