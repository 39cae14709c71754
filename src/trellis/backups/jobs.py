"""Backups as jobs: where archives are kept, their records, the restore lock, running one in the background.

Archives are files in ``TRELLIS_BACKUP_PATH`` (default ``instance/backups``), each written as
``<name>.part`` and renamed once complete, so a process killed mid-way never leaves a half archive under
an archive's name. Their state is a row of ``core_backups``: ``running`` (renewed every few seconds by the
writer), ``done`` or ``failed``; a ``running`` row whose writer stopped renewing it (kill -9) is reported as
failed. A restore holds the row ``restore`` of ``core_backup_locks`` (which afterwards records how it
ended): one restore at a time across processes, and no backup starts meanwhile; a lock whose holder died
(its process gone on this host, or no renewal for ``LOCK_STALE_SECONDS``) is taken over. The admin route
restores in a background thread (202 at once); the CLI in its own.

The files: ``records.py`` (archives, names and rows), ``remote.py`` (the S3 store), ``runs.py`` (writing
backups), ``uploads.py`` (an uploaded archive), ``restore_jobs.py`` (restoring one), ``restore_lock.py``
and ``holders.py`` (who holds what, and whether it still lives). This module keeps their public names.
"""

from __future__ import annotations

from .records import (
    NAME,
    STALE_SECONDS,
    blobs_held,
    checked_name,
    delete,
    done_path,
    folder,
    listing,
    new_name,
    record,
)
from .restore_jobs import restore_from, start_restore, verified
from .restore_lock import RESTORE_LOCK, restore_running, restore_state
from .runs import backup_now, prune_scheduled, run_backup, start_backup
from .uploads import upload

__all__ = [
    "NAME",
    "RESTORE_LOCK",
    "STALE_SECONDS",
    "backup_now",
    "blobs_held",
    "checked_name",
    "delete",
    "done_path",
    "folder",
    "listing",
    "new_name",
    "prune_scheduled",
    "record",
    "restore_from",
    "restore_running",
    "restore_state",
    "run_backup",
    "start_backup",
    "start_restore",
    "upload",
    "verified",
]
