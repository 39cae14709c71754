"""Restoring an archive: checked against this database's migrations and modules, then restored under the
restore lock, in this thread (the CLI) or in a background thread (the admin route, 202 at once)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from flask import Flask

from ..errors import bad_request, conflict
from . import archive, create, lineage, restore
from .archive import ArchiveError
from .records import blobs_held, done_path, failure
from .restore_lock import acquire, release

log = logging.getLogger(__name__)


def verified(app: Flask, path: Path, checksums: bool = True) -> archive.Archive:
    """The archive at ``path`` checked whole (without ``checksums``: its manifest and entry list only),
    against this database's migrations and loaded modules."""
    with app.extensions["trellis"].engine.connect() as connection:
        heads = create.current_heads(connection)
    script = lineage.scripts(app)
    checked = archive.verify(path, lambda archived: lineage.check(script, archived, heads), checksums=checksums)
    restore.check_fits(app, checked)
    return checked


def restore_from(app: Flask, path: Path) -> dict[str, Any]:
    """Verify the archive, then restore it in this thread under the restore lock (the CLI; 409 while
    another restore runs). Call in an app context."""
    try:
        checked = verified(app, path)
    except ArchiveError as exc:
        raise bad_request(str(exc)) from None
    holder = acquire(path.name)
    try:
        result = restore.restore(app, checked)
    except BaseException as exc:
        release(holder, "failed", failure(exc))
        if isinstance(exc, ArchiveError):
            raise bad_request(str(exc)) from None
        raise
    release(holder, "done")
    return result


def start_restore(app: Flask, name: str) -> None:
    """Check the archive's manifest against this code (400), take the restore lock (409), then verify every
    entry and restore in a background thread; the outcome is ``restore_state()``. Call in an app context.

    The checksums are read in the background: they cost a read of the whole archive, too long to hold a
    request for when it holds gigabytes of files; a damaged entry still stops the restore before it changes
    anything, and the restore is then ``failed`` with the reason."""
    path = done_path(name)
    try:
        verified(app, path, checksums=False)
    except ArchiveError as exc:
        raise bad_request(str(exc)) from None
    holder = acquire(name)  # from here no backup starts (``records.start_record``): then none may be running
    if blobs_held():
        release(holder, "failed", "not started: a backup was being written")
        raise conflict("A backup is being written; restore once it is done")

    def work() -> None:
        with app.app_context():
            try:
                restore.restore(app, verified(app, path))
            except BaseException as exc:  # recorded as failed; a background thread has nobody else to tell
                message = failure(exc)
                log.error("restore of %s failed: %s", name, message)
                release(holder, "failed", message)
                return
            release(holder, "done")
            log.info("restored %s", name)

    threading.Thread(target=work, name=f"trellis-restore-{name}", daemon=True).start()
