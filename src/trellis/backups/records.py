"""Archives and their records: the backups folder and archive names, the ``core_backups`` rows (``running``,
renewed by the writer, ``done`` or ``failed``; a ``running`` row whose writer stopped is shown failed), and
whether a backup is being written right now."""

from __future__ import annotations

import errno
import logging
import re
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app

from .. import audit, db
from ..errors import APIError, bad_request, conflict, not_found
from ..models import BackupRecord
from . import remote
from .archive import ArchiveError
from .holders import dead, new_holder
from .restore_lock import restore_running

log = logging.getLogger(__name__)

STALE_SECONDS = 60.0  # a running backup not renewed for this long is dead (the writer renews every 5 s)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.zip$")
_records = BackupRecord.__table__


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


def listing() -> list[dict[str, Any]]:
    """Every archive, newest first, as the admin routes show them."""
    with db.engine().connect() as connection:
        rows = connection.execute(sa.select(_records).order_by(_records.c.created_at.desc())).all()
    return [_shown(row) for row in rows]


def writer_dead(row: Any) -> bool:
    if row.heartbeat_at < db.utcnow() - timedelta(seconds=STALE_SECONDS):
        return True
    return row.holder is not None and dead(row.holder, row.heartbeat_at)


def _shown(row: Any) -> dict[str, Any]:
    status, error = row.status, row.error
    if status == "running" and writer_dead(row):
        status, error = "failed", "interrupted: the process writing it stopped"
    shown = {"name": row.name, "size": row.size, "createdAt": db.isoformat(row.created_at), "status": status}
    if error:
        shown["error"] = error
    return shown


def record(name: str) -> dict[str, Any]:
    with db.engine().connect() as connection:
        row = connection.execute(sa.select(_records).where(_records.c.name == name)).first()
    if row is None:
        raise not_found(f"No backup named {name}")
    return _shown(row)


def done_path(name: str) -> Path:
    """The file of a finished archive (404 when there is none); one kept in S3 is fetched into the backups
    folder first (and stays there as a copy until the archive is deleted)."""
    with db.engine().connect() as connection:
        row = connection.execute(sa.select(_records).where(_records.c.name == checked_name(name))).first()
    if row is None or _shown(row)["status"] != "done":
        raise not_found(f"No finished backup named {name}")
    path = folder() / name
    if not path.is_file() and row.store == "s3":
        remote.pull(name, path)
    if not path.is_file():
        raise not_found(f"No finished backup named {name}")
    return path


def delete(name: str) -> None:
    shown = record(checked_name(name))
    if shown["status"] == "running":
        raise conflict("The backup is still being written")
    with db.engine().connect() as connection:
        store = connection.execute(sa.select(_records.c.store).where(_records.c.name == name)).scalar()
    if store == "s3":
        try:
            remote.store().delete(remote.key(name))
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
    with db.engine().connect() as connection:
        return any(not writer_dead(row) for row in connection.execute(query))


def start_record(name: str, scheduled: bool) -> None:
    """Insert the ``running`` row (409 when the name is taken, as when another process runs this schedule)."""
    if restore_running():
        raise conflict("A restore is running; start the backup once it is done")
    now = db.utcnow()
    try:
        db.session.execute(
            _records.insert().values(
                name=name, status="running", scheduled=scheduled, created_at=now, heartbeat_at=now, holder=new_holder()
            )
        )
        audit.record("backups", "backup.create", name, {"scheduled": scheduled})
        db.session.commit()
    except sa.exc.IntegrityError:
        db.session.rollback()
        raise conflict(f"A backup named {name} exists already") from None


def finish(name: str, **values: Any) -> None:
    """Write ``values`` to the backup's row with a fresh heartbeat (no values: the heartbeat alone)."""
    with db.engine().begin() as connection:
        connection.execute(_records.update().where(_records.c.name == name).values(heartbeat_at=db.utcnow(), **values))


def heartbeat(name: str) -> None:
    try:
        finish(name)
    except sa.exc.SQLAlchemyError as exc:  # a restore holding SQLite's write lock: the next beat tries again
        log.warning("could not renew backup %s: %s", name, exc.__class__.__name__)


def failure(exc: BaseException) -> str:
    """What a failed backup or restore records as its error."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return "no space left on the disk of the backups folder"
    if isinstance(exc, APIError):
        return exc.message
    if isinstance(exc, ArchiveError):
        return str(exc)
    return f"{exc.__class__.__name__}: {str(exc)[:300]}"
