"""An uploaded archive: kept under its name once it verifies whole against this server; nothing is kept
otherwise."""

from __future__ import annotations

import errno
import os
from typing import IO, Any

import sqlalchemy as sa

from .. import audit, current, db
from ..errors import bad_request, conflict
from ..models import BackupRecord
from . import archive
from .archive import ArchiveError
from .records import NAME, folder, new_name, record
from .restore_jobs import verified

_records = BackupRecord.__table__


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
