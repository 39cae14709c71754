"""Expiring resumable uploads: each expired upload is removed by one process, whichever claims it first,
and every serving process runs the expiry in the background."""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from flask import Flask

from trellis import db
from trellis.work_queue import LeaseQueue

from .backends import BackendError
from .journal import SWEEP_EVERY_SECONDS
from .models import File, Upload
from .resumable import parts_of
from .uploads import progress_of, upload_backend

log = logging.getLogger(__name__)

EXPIRE_BATCH = 100
EXPIRE_LEASE_SECONDS = 600.0

_expired = LeaseQueue(
    Upload.__table__,
    # Due at ``next_attempt_at`` (its expiry), unless a request is writing to it right now.
    sa.or_(Upload.__table__.c.writer.is_(None), Upload.__table__.c.writer_until < sa.bindparam("now")),
    [Upload.__table__.c[name] for name in ("id", "claim", "file_id")],
)


def expire() -> int:
    """Remove expired uploads (a finished one's row only: its bytes are a file): each by one process, whichever
    claims it. Returns how many were removed."""
    removed = 0
    for row in _expired.claim(db.session, EXPIRE_BATCH, EXPIRE_LEASE_SECONDS):
        upload = db.session.get(Upload, row.id)
        if upload is None:
            continue
        recorded = db.session.get(File, row.id) is not None
        if row.file_id is None and not recorded:
            try:
                parts_of(upload_backend(upload)).purge(progress_of(upload))
            except BackendError as exc:  # claimed again once its lease ends
                log.warning("could not remove the parts of expired upload %s: %s", row.id, exc)
                continue
        db.session.execute(sa.delete(Upload).where(Upload.id == row.id, Upload.claim == row.claim))
        db.session.commit()
        removed += 1
    if removed:
        log.info("removed %d expired upload(s)", removed)
    return removed


def start_expiry(app: Flask, every: float = SWEEP_EVERY_SECONDS) -> None:
    """``Module.background``: :func:`expire` at start and every ``every`` seconds in each serving process."""

    def step() -> None:
        with app.app_context():
            expire()
        time.sleep(every)
