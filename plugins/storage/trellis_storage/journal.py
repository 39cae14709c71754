"""The journal of blobs that may have no record (an upload not yet recorded, a deleted or dropped file's),
and the sweep that settles what a killed process left: every entry stays until its blob is either
referenced by a committed record or gone."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import delete, insert, select

from trellis import db, reads
from trellis.background import ThrottledWarning, start_loop
from trellis.backups.jobs import blobs_held, restore_running

from .backends import Backend, BackendError, remove_stale_parts
from .models import File, PendingBlob
from .placement import backend_at, config

log = logging.getLogger(__name__)

# S3 cannot tell a running upload from a killed one: an upload's entry is settled once it is this old
# (no upload takes a day), and a killed upload's multipart parts wait that long.
S3_UPLOAD_GRACE = timedelta(days=1)
SWEEP_BATCH = 1000
SWEEP_EVERY_SECONDS = 600.0


def journal(reason: str, blobs: list[tuple[Backend, str]]) -> list[str]:
    """Journal entries for ``blobs`` in the session's transaction (the caller commits); their ids."""
    return journal_on(db.session, reason, blobs)


def journal_on(connection: Any, reason: str, blobs: list[tuple[Backend, str]]) -> list[str]:
    """Journal entries for ``blobs`` through ``connection`` (a connection or the session); their ids."""
    rows: list[dict[str, Any]] = [
        {
            "id": db.new_id(),
            "reason": reason,
            "backend": b.name,
            "location": b.location,
            "key": k,
            "created_at": db.utcnow(),
        }
        for b, k in blobs
    ]
    for start in range(0, len(rows), SWEEP_BATCH):
        connection.execute(insert(PendingBlob), rows[start : start + SWEEP_BATCH])
    return [row["id"] for row in rows]


def delete_entries(connection: Any, ids: list[str]) -> None:
    for start in range(0, len(ids), SWEEP_BATCH):  # bounded: SQLite limits a statement's parameters
        connection.execute(delete(PendingBlob).where(PendingBlob.id.in_(ids[start : start + SWEEP_BATCH])))


def forget(ids: list[str]) -> None:
    """Drop settled journal entries in a short transaction of their own (the session's may have just ended)."""
    if not ids:
        return
    try:
        with reads.transaction() as connection:
            delete_entries(connection, ids)
    except Exception as exc:  # the sweep finds the entries again; settling twice is harmless
        log.warning("could not drop %d storage journal entries: %s", len(ids), exc.__class__.__name__)


def delete_blob(backend: Backend, key: str) -> bool:
    """Whether the blob is gone; a failure is logged, and the journal keeps the entry for the sweep."""
    try:
        backend.delete(key)
    except BackendError as exc:
        # The record is gone (or was never written); an orphan blob is garbage, not data loss.
        log.error("could not delete stored blob %s from %s: %s", key, backend.name, exc)
        return False
    return True


def delete_committed(blobs: list[tuple[Backend, str, str]]) -> None:
    """After the deleting transaction commits: the blobs, then the journal entries of those gone. While a
    backup runs they stay (its snapshot may still list the files): the journal keeps them for the sweep."""
    if blobs_held():
        return
    forget([entry for backend, key, entry in blobs if delete_blob(backend, key)])


def sweep() -> int:
    """Remove what killed processes left: every local root's part files whose writer is gone, and the blobs of
    journal entries nobody holds (a dead upload's, a deleted file's whose removal did not happen). Returns
    how many entries were settled; entries a live process holds are left alone."""
    cfg = config()
    for root in {current_app.config["STORAGE_PATH"], cfg["local"].get("path")} - {None}:
        remove_stale_parts(root)
    # Plain rows, not ORM objects (the rollback would expire those), oldest first.
    entries = db.session.execute(
        select(*PendingBlob.__table__.columns).order_by(PendingBlob.created_at).limit(SWEEP_BATCH)
    ).all()
    db.session.rollback()  # each entry is judged in a transaction begun after its files are locked
    return sum(_settle(entry, cfg) for entry in entries)


def _settle(entry: Any, cfg: dict[str, Any]) -> bool:
    if entry.reason == "delete" and blobs_held():
        return False  # a running backup's snapshot may still list the deleted file
    if entry.reason == "restore" and restore_running():
        return False  # its records are not committed yet; a dead restore's entries are settled
    backend = backend_at(cfg, entry.backend, entry.location)
    with backend.writing(entry.key) as live:
        if live is None:  # S3: a deleted file's blob is garbage at once, an upload's once it is old enough
            live = entry.reason == "upload" and entry.created_at > db.utcnow() - S3_UPLOAD_GRACE
        if live:
            return False
        # Looked at only now: the upload may have saved its record, settling this entry, meanwhile.
        open_entry = db.session.execute(select(PendingBlob.id).where(PendingBlob.id == entry.id)).first()
        file_id = entry.key.rsplit("/", 1)[-1]
        recorded = db.session.execute(select(File.id).where(File.id == file_id)).first()
        db.session.rollback()  # the delete below starts afresh (SQLite: no write on an old read snapshot)
        try:
            if open_entry and not recorded:
                backend.purge(entry.key)
        except BackendError as exc:
            log.warning("could not remove leftover blob %s from %s: %s", entry.key, entry.backend, exc)
            return False
        db.session.execute(delete(PendingBlob).where(PendingBlob.id == entry.id))
        db.session.commit()
    if open_entry and not recorded:
        log.info("removed leftover blob %s (%s) from %s", entry.key, entry.reason, entry.backend)
    return True


def start_sweeper(app: Flask) -> None:
    """``Module.background``: ``sweep`` at start and every ``SWEEP_EVERY_SECONDS`` in each serving process."""

    def step() -> None:
        with app.app_context():
            sweep()
        time.sleep(SWEEP_EVERY_SECONDS)

    # The database is away, or not migrated yet: the next pass tries again.
    start_loop("storage-sweep", "storage sweep", step, ThrottledWarning(log), retry_seconds=SWEEP_EVERY_SECONDS)
