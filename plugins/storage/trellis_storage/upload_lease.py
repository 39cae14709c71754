"""The writer lease of an upload: one request at a time appends to it (on local disk the part file's
``flock`` backs the lease up); the lease is taken, renewed while bytes flow, and released, and a request that
finds it taken answers 423 (tus clients retry it)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from trellis import db
from trellis.errors import APIError

from .models import Upload

# A request appending holds the upload this long past its last sign of life (renewed every RENEW_SECONDS while
# bytes flow): a killed process's S3 upload is free again this soon (on local disk at once: its flock is gone).
WRITER_LEASE = timedelta(seconds=15)
RENEW_SECONDS = 5.0


def lost_race() -> APIError:
    return APIError(423, "Another request is writing to this upload; try again shortly", name="LOCKED")


class Lease:
    """The writer lease of one request on one upload: taken, renewed while bytes flow, released."""

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
        self.token = db.new_id()
        self._renewed = 0.0
        self._held = False

    def take(self, *, offset: int | None, force: bool) -> bool:
        """Whether it is ours now. ``offset``: only if the upload stands there; ``force``: even if another
        request holds it (local disk: its flock proved that request dead)."""
        now = db.utcnow()
        conditions = [Upload.id == self.upload.id, Upload.file_id.is_(None), Upload.expires_at > now]
        if offset is not None:
            conditions.append(Upload.offset == offset)
        if not force:
            conditions.append(sa.or_(Upload.writer.is_(None), Upload.writer_until < now))
        db.session.commit()  # end the request's reads (SQLite: no write on an older snapshot)
        taken = db.rowcount(
            db.session.execute(
                sa.update(Upload)
                .where(*conditions)
                .values(writer=self.token, writer_until=now + WRITER_LEASE)
                .execution_options(synchronize_session=False)
            )
        )
        db.session.commit()
        self._renewed = time.monotonic()
        self._held = taken == 1
        return self._held

    def keep(self) -> None:
        """Renewed (at most every ``RENEW_SECONDS``); 423 if another request took the upload meanwhile."""
        if time.monotonic() - self._renewed < RENEW_SECONDS:
            return
        held = self._write(writer_until=db.utcnow() + WRITER_LEASE)
        db.session.commit()
        if not held:
            raise lost_race()
        self._renewed = time.monotonic()

    def settle(self, **values: Any) -> bool:
        """Record ``values`` and release the lease, if it is still ours; the caller commits, then calls
        :meth:`committed`."""
        return self._write(writer=None, writer_until=None, **values)

    def committed(self) -> None:
        """The settled values are committed: nothing left to release."""
        self._held = False

    def release(self) -> None:
        """Give the lease up (after a failure; a settled lease is released already)."""
        db.session.rollback()
        if self._held:
            self._write(writer=None, writer_until=None)
            db.session.commit()
            self._held = False

    def _write(self, **values: Any) -> bool:
        """``values`` written if the lease is still ours (whether it was); the caller commits."""
        done = db.rowcount(
            db.session.execute(
                sa.update(Upload)
                .where(Upload.id == self.upload.id, Upload.writer == self.token)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
        )
        return done == 1
