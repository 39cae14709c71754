"""Backups as jobs: where archives are kept, their records, the restore lock, running one in the background.

Archives are files in ``TRELLIS_BACKUP_PATH`` (default ``instance/backups``), each written as
``<name>.part`` and renamed once complete, so a process killed mid-way never leaves a half archive under
an archive's name. Their state is a row of ``core_backups``: ``running`` (renewed every few seconds by the
writer), ``done`` or ``failed``; a ``running`` row whose writer stopped renewing it (kill -9) is reported as
failed. A restore holds the row ``restore`` of ``core_backup_locks`` (which afterwards records how it
ended): one restore at a time across processes, and no backup starts meanwhile; a lock whose holder died
(its process gone on this host, or no renewal for ``LOCK_STALE_SECONDS``) is taken over. The admin route
restores in a background thread (202 at once); the CLI in its own.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import secrets
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from flask import Flask, current_app

from .. import audit, current, db
from ..errors import APIError, bad_request, conflict, not_found
from ..models import BackupLock, BackupRecord
from ..module_config import get as get_config
from . import archive, create, lineage, restore
from .archive import ArchiveError

log = logging.getLogger(__name__)

STALE_SECONDS = 60.0  # a running backup not renewed for this long is dead (the writer renews every 5 s)
LOCK_STALE_SECONDS = 600.0  # PostgreSQL: the restore lock is renewed every 30 s from another connection
LOCK_RENEW_SECONDS = 30.0
RESTORE_LOCK = "restore"
REMOTE_PREFIX = "trellis-backup:"  # hashed with an archive's name into its key in the S3 store
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.zip$")
_records = BackupRecord.__table__
_locks = BackupLock.__table__


def folder(app: Flask | None = None) -> Path:
    path = Path((app or current_app).config["BACKUP_PATH"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_name(scheduled: bool = False) -> str:
    stamp = db.utcnow().strftime("%Y%m%d-%H%M%S")
    return f"trellis-{stamp}-{secrets.token_hex(3)}{'-scheduled' if scheduled else ''}.zip"


def checked_name(name: str) -> str:
    if not NAME.match(name):
        raise bad_request("Not a backup name", {"name": ["letters, digits, '.', '_', '-', ending in .zip"]})
    return name


# ---- records ------------------------------------------------------------------------------------------


def _engine() -> sa.Engine:
    return current_app.extensions["trellis"].engine


def listing() -> list[dict[str, Any]]:
    """Every archive, newest first, as the admin routes show them."""
    with _engine().connect() as connection:
        rows = connection.execute(sa.select(_records).order_by(_records.c.created_at.desc())).all()
    return [_shown(row) for row in rows]


def _writer_dead(row: Any) -> bool:
    if row.heartbeat_at < db.utcnow() - timedelta(seconds=STALE_SECONDS):
        return True
    return row.holder is not None and _dead(row.holder, row.heartbeat_at)


def _shown(row: Any) -> dict[str, Any]:
    status, error = row.status, row.error
    if status == "running" and _writer_dead(row):
        status, error = "failed", "interrupted: the process writing it stopped"
    shown = {"name": row.name, "size": row.size, "createdAt": db.isoformat(row.created_at), "status": status}
    if error:
        shown["error"] = error
    return shown


def record(name: str) -> dict[str, Any]:
    with _engine().connect() as connection:
        row = connection.execute(sa.select(_records).where(_records.c.name == name)).first()
    if row is None:
        raise not_found(f"No backup named {name}")
    return _shown(row)


def done_path(name: str) -> Path:
    """The file of a finished archive (404 when there is none); one kept in S3 is fetched into the backups
    folder first (and stays there as a copy until the archive is deleted)."""
    with _engine().connect() as connection:
        row = connection.execute(sa.select(_records).where(_records.c.name == checked_name(name))).first()
    if row is None or _shown(row)["status"] != "done":
        raise not_found(f"No finished backup named {name}")
    path = folder() / name
    if not path.is_file() and row.store == "s3":
        _pull(name, path)
    if not path.is_file():
        raise not_found(f"No finished backup named {name}")
    return path


# ---- the S3 store (config backups.storage: s3) ----------------------------------------------------------


def _remote() -> Any:
    store = current_app.extensions["trellis"].hooks.hook.trellis_backup_store()
    if store is None:
        raise conflict("backups.storage is s3, but the Storage module has no S3 bucket configured")
    return store


def _remote_key(name: str) -> str:
    """The archive's key in the bucket: shaped as the Storage module's blob keys (two shard levels and 32 hex
    digits, the only keys its backends accept), from a hash of the name."""
    digest = hashlib.sha256(f"{REMOTE_PREFIX}{name}".encode()).hexdigest()[:32]
    return f"{digest[:2]}/{digest[2:4]}/{digest}"


def _push(path: Path, name: str) -> None:
    """Copy a finished archive to the S3 store (the local file is removed by the caller once it is there)."""
    writer = _remote().writer(_remote_key(name), "application/zip")
    try:
        with path.open("rb") as source:
            while chunk := source.read(archive.CHUNK):
                writer.write(chunk)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    finally:
        writer.close()


def _pull(name: str, path: Path) -> None:
    part = path.with_name(f"{name}.{secrets.token_hex(4)}.fetch")
    chunks = _remote().read(_remote_key(name))
    try:
        with part.open("wb") as out:
            for chunk in chunks:
                out.write(chunk)
        os.replace(part, path)
    except Exception as exc:
        part.unlink(missing_ok=True)
        log.error("could not fetch backup %s from S3: %s", name, exc.__class__.__name__)
        raise conflict(f"Backup {name} could not be fetched from S3 ({exc.__class__.__name__})") from None
    finally:
        chunks.close()


def delete(name: str) -> None:
    shown = record(checked_name(name))
    if shown["status"] == "running":
        raise conflict("The backup is still being written")
    with _engine().connect() as connection:
        store = connection.execute(sa.select(_records.c.store).where(_records.c.name == name)).scalar()
    if store == "s3":
        try:
            _remote().delete(_remote_key(name))
        except Exception as exc:  # the bucket's answer: the record stays, so the delete can be tried again
            raise APIError(502, f"The S3 store refused to delete {name} ({exc.__class__.__name__})") from None
    db.session.execute(_records.delete().where(_records.c.name == name))
    audit.record("backups", "backup.delete", name)
    db.session.commit()
    for path in (folder() / name, folder() / f"{name}.part"):
        path.unlink(missing_ok=True)


def blobs_held() -> bool:
    """Whether a backup is being written: stored files must then outlive their records' deletion (the
    Storage module leaves the blob to its sweep), since the backup's snapshot may still reference them."""
    fresh = db.utcnow() - timedelta(seconds=STALE_SECONDS)
    query = sa.select(_records).where(_records.c.status == "running", _records.c.heartbeat_at >= fresh)
    with _engine().connect() as connection:
        return any(not _writer_dead(row) for row in connection.execute(query))


def _start_record(name: str, scheduled: bool) -> None:
    """Insert the ``running`` row (409 when the name is taken, as when another process runs this schedule)."""
    if restore_running():
        raise conflict("A restore is running; start the backup once it is done")
    now = db.utcnow()
    try:
        db.session.execute(
            _records.insert().values(
                name=name, status="running", scheduled=scheduled, created_at=now, heartbeat_at=now, holder=_holder()
            )
        )
        audit.record("backups", "backup.create", name, {"scheduled": scheduled})
        db.session.commit()
    except sa.exc.IntegrityError:
        db.session.rollback()
        raise conflict(f"A backup named {name} exists already") from None


def _finish(name: str, **values: Any) -> None:
    with _engine().begin() as connection:
        connection.execute(_records.update().where(_records.c.name == name).values(heartbeat_at=db.utcnow(), **values))


def _heartbeat(name: str) -> None:
    try:
        _finish(name)
    except sa.exc.SQLAlchemyError as exc:  # a restore holding SQLite's write lock: the next beat tries again
        log.warning("could not renew backup %s: %s", name, exc.__class__.__name__)


# ---- backup ------------------------------------------------------------------------------------------


def run_backup(app: Flask, name: str, output: Path | None = None) -> dict[str, Any]:
    """Write the backup ``name`` whose ``running`` row exists, into the backups folder (or ``output``);
    marks it done or failed. Returns the manifest. Call in an app context."""
    target = output or folder(app) / name
    part = target.with_name(target.name + ".part")
    remote = output is None and get_config("backups")["storage"] == "s3"
    try:
        manifest = create.write(app, part, heartbeat=lambda: _heartbeat(name))
        if remote:
            _push(part, name)
        os.replace(part, target)
    except BaseException as exc:
        part.unlink(missing_ok=True)
        message = _failure(exc)
        log.error("backup %s failed: %s", name, message)
        _quietly_finish(name, status="failed", error=message)
        raise
    size = target.stat().st_size
    if remote:
        target.unlink()
    _finish(name, status="done", size=size, store="s3" if remote else "local")
    log.info("backup %s written: %d tables, %d files", name, len(manifest["tables"]), len(manifest["files"]))
    return manifest


def _quietly_finish(name: str, **values: Any) -> None:
    try:
        _finish(name, **values)
    except sa.exc.SQLAlchemyError:
        log.exception("could not record the end of backup %s", name)


def _failure(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return "no space left on the disk of the backups folder"
    if isinstance(exc, APIError):
        return exc.message
    if isinstance(exc, ArchiveError):
        return str(exc)
    return f"{exc.__class__.__name__}: {str(exc)[:300]}"


def start_backup(app: Flask, scheduled: bool = False, name: str | None = None) -> str:
    """Record a new backup and write it in a background thread; returns its name."""
    name = name or new_name(scheduled)
    _start_record(name, scheduled)
    _sweep_parts(app)

    def work() -> None:
        with app.app_context():
            try:
                run_backup(app, name)
            except Exception:  # recorded as failed; a background thread has nobody else to tell
                pass
            finally:
                if scheduled:
                    prune_scheduled(app)

    threading.Thread(target=work, name=f"trellis-backup-{name}", daemon=True).start()
    return name


def _sweep_parts(app: Flask) -> None:
    """Remove the part files of backups whose writer died (kill -9 leaves them behind)."""
    with _engine().connect() as connection:
        rows = connection.execute(sa.select(_records).where(_records.c.status.in_(("running", "failed")))).all()
    for row in rows:
        if row.status == "failed" or _writer_dead(row):
            (folder(app) / f"{row.name}.part").unlink(missing_ok=True)


def backup_now(app: Flask, output: Path | None = None) -> tuple[str, dict[str, Any]]:
    """Write a backup in this thread (the CLI); returns its name and manifest."""
    name = output.name if output is not None else new_name()
    _start_record(name if NAME.match(name) else new_name(), False)
    return name, run_backup(app, name, output)


def prune_scheduled(app: Flask) -> None:
    """Keep the newest ``keep`` finished scheduled backups (config ``backups.keep``); remove the others."""
    keep = get_config("backups")["keep"]
    query = (
        sa.select(_records.c.name)
        .where(_records.c.scheduled.is_(True), _records.c.status == "done")
        .order_by(_records.c.created_at.desc())
        .offset(keep)
    )
    with _engine().connect() as connection:
        names = connection.execute(query).scalars().all()
    for name in names:
        delete(name)


# ---- upload ------------------------------------------------------------------------------------------


def upload(stream: IO[bytes], filename: str | None) -> dict[str, Any]:
    """Keep an uploaded archive once it verifies (400 otherwise: nothing is kept)."""
    name = filename if filename and NAME.match(filename) else new_name()
    target = folder() / name
    part = target.with_name(name + ".part")
    if target.exists():
        raise conflict(f"A backup named {name} exists already")
    try:
        with part.open("wb") as out:
            while chunk := stream.read(archive.CHUNK):
                out.write(chunk)
        verified(current.app(), part)
    except ArchiveError as exc:
        part.unlink(missing_ok=True)
        raise bad_request(str(exc)) from None
    except OSError as exc:
        part.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise conflict("No space left on the disk of the backups folder") from None
        raise
    now = db.utcnow()
    try:
        db.session.execute(
            _records.insert().values(
                name=name, status="done", scheduled=False, size=part.stat().st_size, created_at=now, heartbeat_at=now
            )
        )
        audit.record("backups", "backup.upload", name, {"size": part.stat().st_size})
        db.session.commit()
    except sa.exc.IntegrityError:
        db.session.rollback()
        part.unlink(missing_ok=True)
        raise conflict(f"A backup named {name} exists already") from None
    os.replace(part, target)
    return record(name)


# ---- restore -----------------------------------------------------------------------------------------


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
    holder = _acquire(path.name)
    try:
        result = restore.restore(app, checked)
    except BaseException as exc:
        _release(holder, "failed", _failure(exc))
        if isinstance(exc, ArchiveError):
            raise bad_request(str(exc)) from None
        raise
    _release(holder, "done")
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
    holder = _acquire(name)  # from here no backup starts (``_start_record``): then none may be running
    if blobs_held():
        _release(holder, "failed", "not started: a backup was being written")
        raise conflict("A backup is being written; restore once it is done")

    def work() -> None:
        with app.app_context():
            try:
                restore.restore(app, verified(app, path))
            except BaseException as exc:  # recorded as failed; a background thread has nobody else to tell
                message = _failure(exc)
                log.error("restore of %s failed: %s", name, message)
                _release(holder, "failed", message)
                return
            _release(holder, "done")
            log.info("restored %s", name)

    threading.Thread(target=work, name=f"trellis-restore-{name}", daemon=True).start()


def _holder() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(4)}"


def _dead(holder: str, heartbeat: Any) -> bool:
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname()[:40] and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return heartbeat < db.utcnow() - timedelta(seconds=LOCK_STALE_SECONDS)


def _latest_restore() -> Any:
    with _engine().connect() as connection:
        return connection.execute(sa.select(_locks).where(_locks.c.name == RESTORE_LOCK)).first()


def restore_running() -> bool:
    row = _latest_restore()
    return row is not None and row.status == "running" and not _dead(row.holder, row.heartbeat_at)


def restore_state() -> dict[str, Any] | None:
    """The latest restore as the admin routes show it (None before the first): a running restore whose
    process died is ``failed``; its transaction died with it, so the previous state is in place."""
    row = _latest_restore()
    if row is None:
        return None
    status, error = row.status, row.error
    if status == "running" and _dead(row.holder, row.heartbeat_at):
        status, error = "failed", "interrupted: the process restoring it stopped; the previous state is in place"
    shown = {"name": row.backup, "status": status, "startedAt": db.isoformat(row.started_at)}
    if row.finished_at is not None:
        shown["finishedAt"] = db.isoformat(row.finished_at)
    if error:
        shown["error"] = error
    return shown


def _acquire(backup: str) -> str:
    """Take the restore lock for ``backup`` (409 while a live holder has it); returns the holder's id.

    The row is replaced only if it is still the one read (same holder and status): of two processes that
    read the same finished or dead row, PostgreSQL lets one update it and the other then finds no match."""
    holder, now = _holder(), db.utcnow()
    values = {
        "holder": holder,
        "heartbeat_at": now,
        "backup": backup,
        "status": "running",
        "error": None,
        "started_at": now,
        "finished_at": None,
    }
    engine = _engine()
    with engine.begin() as connection:
        row = connection.execute(sa.select(_locks).where(_locks.c.name == RESTORE_LOCK)).first()
        if row is None:
            try:
                with connection.begin_nested():
                    connection.execute(_locks.insert().values(name=RESTORE_LOCK, **values))
            except sa.exc.IntegrityError:
                raise conflict("Another restore is running") from None
        else:
            if row.status == "running" and not _dead(row.holder, row.heartbeat_at):
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


# This process's renewal threads, by holder: :func:`_release` ends one at once. Otherwise it would sleep up
# to LOCK_RENEW_SECONDS after its restore, then find the row released (or, its database gone, log failures
# until LOCK_STALE_SECONDS).
_RENEWALS: dict[str, threading.Event] = {}


def _release(holder: str, status: str, error: str | None = None) -> None:
    """Record the restore's outcome; the lock is free from then on (and the renewal stops)."""
    try:
        with _engine().begin() as connection:
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
