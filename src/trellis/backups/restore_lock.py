"""The restore lock: the row ``restore`` of ``core_backup_locks``, one restore at a time across processes (and
no backup starts meanwhile); afterwards it records how the restore ended. A lock whose holder died is taken
over; on PostgreSQL a thread renews it while the restore runs."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import sqlalchemy as sa

from .. import db
from ..errors import conflict
from ..models import BackupLock
from .holders import LOCK_STALE_SECONDS, dead, new_holder

log = logging.getLogger(__name__)

LOCK_RENEW_SECONDS = 30.0
RESTORE_LOCK = "restore"
_locks = BackupLock.__table__


def _latest_restore() -> Any:
    with db.engine().connect() as connection:
        return connection.execute(sa.select(_locks).where(_locks.c.name == RESTORE_LOCK)).first()


def restore_running() -> bool:
    row = _latest_restore()
    return row is not None and row.status == "running" and not dead(row.holder, row.heartbeat_at)


def restore_state() -> dict[str, Any] | None:
    """The latest restore as the admin routes show it (None before the first): a running restore whose
    process died is ``failed``; its transaction died with it, so the previous state is in place."""
    row = _latest_restore()
    if row is None:
        return None
    status, error = row.status, row.error
    if status == "running" and dead(row.holder, row.heartbeat_at):
        status, error = "failed", "interrupted: the process restoring it stopped; the previous state is in place"
    shown = {"name": row.backup, "status": status, "startedAt": db.isoformat(row.started_at)}
    if row.finished_at is not None:
        shown["finishedAt"] = db.isoformat(row.finished_at)
    if error:
        shown["error"] = error
    return shown


def acquire(backup: str) -> str:
    """Take the restore lock for ``backup`` (409 while a live holder has it); returns the holder's id.

    The row is replaced only if it is still the one read (same holder and status): of two processes that
    read the same finished or dead row, PostgreSQL lets one update it and the other then finds no match."""
    holder, now = new_holder(), db.utcnow()
    values = {
        "holder": holder,
        "heartbeat_at": now,
        "backup": backup,
        "status": "running",
        "error": None,
        "started_at": now,
        "finished_at": None,
    }
    engine = db.engine()
    with engine.begin() as connection:
        row = connection.execute(sa.select(_locks).where(_locks.c.name == RESTORE_LOCK)).first()
        if row is None:
            try:
                with connection.begin_nested():
                    connection.execute(_locks.insert().values(name=RESTORE_LOCK, **values))
            except sa.exc.IntegrityError:
                raise conflict("Another restore is running") from None
        else:
            if row.status == "running" and not dead(row.holder, row.heartbeat_at):
                raise conflict("Another restore is running")
            taken = connection.execute(
                _locks.update()
                .where(_locks.c.name == RESTORE_LOCK, _locks.c.holder == row.holder, _locks.c.status == row.status)
                .values(**values)
            )
            if taken.rowcount != 1:
                raise conflict("Another restore is running")
    if engine.dialect.name == "postgresql":  # SQLite: the holder's process id says whether it lives
        ended = _RENEWALS[holder] = threading.Event()
        threading.Thread(target=_renew, args=(engine, holder, ended), daemon=True, name="trellis-lock-renewal").start()
    return holder


# This process's renewal threads, by holder: :func:`release` ends one at once. Otherwise it would sleep up
# to LOCK_RENEW_SECONDS after its restore, then find the row released (or, its database gone, log failures
# until LOCK_STALE_SECONDS).
_RENEWALS: dict[str, threading.Event] = {}


def release(holder: str, status: str, error: str | None = None) -> None:
    """Record the restore's outcome; the lock is free from then on (and the renewal stops)."""
    try:
        with db.engine().begin() as connection:
            connection.execute(
                _locks.update()
                .where(_locks.c.name == RESTORE_LOCK, _locks.c.holder == holder)
                .values(status=status, error=error, finished_at=db.utcnow())
            )
    except sa.exc.SQLAlchemyError:
        log.exception("could not record the end of the restore")
    ended = _RENEWALS.pop(holder, None)
    if ended is not None:
        ended.set()


def _renew(engine: sa.Engine, holder: str, ended: threading.Event) -> None:
    """Renew the running restore's heartbeat until ``ended`` is set or its row is no longer running under
    ``holder`` (another process took it over as dead)."""
    running = (_locks.c.name == RESTORE_LOCK) & (_locks.c.holder == holder) & (_locks.c.status == "running")
    renewed = time.monotonic()
    while not ended.wait(LOCK_RENEW_SECONDS):
        try:
            with engine.begin() as connection:
                if connection.execute(_locks.update().where(running).values(heartbeat_at=db.utcnow())).rowcount != 1:
                    return
            renewed = time.monotonic()
        except sa.exc.SQLAlchemyError as exc:
            if time.monotonic() - renewed > LOCK_STALE_SECONDS:
                return  # others have taken the lock as dead by now: nothing left to renew
            log.warning("could not renew the restore lock: %s", exc.__class__.__name__)
