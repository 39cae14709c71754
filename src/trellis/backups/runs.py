"""Writing backups: one in this thread (the CLI) or in a background thread (the admin route, the schedule),
into ``<name>.part`` renamed once complete (and copied to the S3 store when configured), and pruning the
scheduled ones beyond ``backups.keep``."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Flask

from .. import db
from ..models import BackupRecord
from ..module_config import get as get_config
from . import create, remote
from .records import NAME, delete, failure, finish, folder, heartbeat, new_name, start_record, writer_dead

log = logging.getLogger(__name__)
_records = BackupRecord.__table__


def run_backup(app: Flask, name: str, output: Path | None = None) -> dict[str, Any]:
    """Write the backup ``name`` whose ``running`` row exists, into the backups folder (or ``output``);
    marks it done or failed. Returns the manifest. Call in an app context."""
    target = output or folder(app) / name
    part = target.with_name(target.name + ".part")
    to_s3 = output is None and get_config("backups")["storage"] == "s3"
    try:
        manifest = create.write(app, part, heartbeat=lambda: heartbeat(name))
        if to_s3:
            remote.push(part, name)
        os.replace(part, target)
    except BaseException as exc:
        part.unlink(missing_ok=True)
        message = failure(exc)
        log.error("backup %s failed: %s", name, message)
        _quietly_finish(name, status="failed", error=message)
        raise
    size = target.stat().st_size
    if to_s3:
        target.unlink()
    finish(name, status="done", size=size, store="s3" if to_s3 else "local")
    log.info("backup %s written: %d tables, %d files", name, len(manifest["tables"]), len(manifest["files"]))
    return manifest


def _quietly_finish(name: str, **values: Any) -> None:
    try:
        finish(name, **values)
    except sa.exc.SQLAlchemyError:
        log.exception("could not record the end of backup %s", name)


def start_backup(app: Flask, scheduled: bool = False, name: str | None = None) -> str:
    """Record a new backup and write it in a background thread; returns its name."""
    name = name or new_name(scheduled)
    start_record(name, scheduled)
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
    with db.engine().connect() as connection:
        rows = connection.execute(sa.select(_records).where(_records.c.status.in_(("running", "failed")))).all()
    for row in rows:
        if row.status == "failed" or writer_dead(row):
            (folder(app) / f"{row.name}.part").unlink(missing_ok=True)


def backup_now(app: Flask, output: Path | None = None) -> tuple[str, dict[str, Any]]:
    """Write a backup in this thread (the CLI); returns its name and manifest."""
    name = output.name if output is not None else new_name()
    start_record(name if NAME.match(name) else new_name(), False)
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
    with db.engine().connect() as connection:
        names = connection.execute(query).scalars().all()
    for name in names:
        delete(name)
