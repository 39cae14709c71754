"""What an unfinished resumable upload has stored, looked at directly in its backend: its bytes read back (for a
backup) and whether they are all there. An upload restored from an archive that did not hold its bytes (one made
before backups carried them, or an S3 upload past its first part) has a row and an offset but nothing behind
them: its client is told so with a clear 410, never a failed write."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from trellis import db
from trellis.errors import APIError

from . import placement
from .backends import Backend, BackendError, LocalBackend, derived_key, s3_errors
from .models import Upload

# The columns of an upload's row that say where its bytes are (a row of the model or of an archive, as a mapping).
WHERE = ("id", "backend", "location", "key", "offset", "s3_upload_id", "tail_key", "tail_size")


def part_key(row: Mapping[str, Any]) -> str | None:
    """The one object that holds all of an upload's bytes so far: the local part file, or an S3 upload's
    unfinished part while no part has gone into its multipart upload. None when its bytes are spread over
    S3 parts, which S3 cannot read back before the upload is completed."""
    if row["backend"] == "local":
        return derived_key(row["key"], "tus")
    if row["s3_upload_id"] is None and row["tail_key"] is not None and row["tail_size"] == row["offset"]:
        return str(row["tail_key"])
    return None


def reader(backend: Backend, row: Mapping[str, Any]) -> Callable[[], Iterable[bytes]] | None:
    """The upload's ``offset`` bytes as chunks (for a backup), or None when they cannot be read back."""
    key = part_key(row)
    if key is None or not row["offset"]:
        return None
    sources = [key, row["key"]] if isinstance(backend, LocalBackend) else [key]
    return functools.partial(_read_first, backend, sources, int(row["offset"]))


def _read_first(backend: Backend, keys: list[str], size: int) -> Iterable[bytes]:
    """The first ``size`` bytes of the first of ``keys`` stored. A local part file renamed to its blob (the upload
    finished meanwhile, or it is a partial upload a final one took) is read there. Gone altogether (ended while the
    backup ran): nothing, which a restore takes as bytes it does not have."""
    for key in keys:
        try:
            return backend.read(key, 0, size)
        except BackendError:
            continue
    return iter(())


def missing(backend: Backend, row: Mapping[str, Any]) -> bool:
    """Whether bytes the upload's row counts as stored are not in its backend. A backend that cannot be asked
    (S3 unreachable) is not taken as missing: the append that follows reports that failure itself."""
    offset = int(row["offset"])
    if not offset:
        return False
    if isinstance(backend, LocalBackend):
        for key in (derived_key(row["key"], "tus"), row["key"]):
            try:
                if backend.path(key).stat().st_size >= offset:
                    return False
            except FileNotFoundError:
                continue
        return True
    try:
        return _s3_missing(backend, row)
    except BackendError:
        return False


def _s3_missing(backend: Any, row: Mapping[str, Any]) -> bool:
    client, bucket = backend.client, backend.location
    with s3_errors("read"):
        if row["tail_key"] is not None and row["tail_size"] and not _s3_exists(client, bucket, row["tail_key"]):
            return True
        if row["s3_upload_id"] is None:
            return False
        try:
            client.list_parts(Bucket=bucket, Key=row["key"], UploadId=row["s3_upload_id"], MaxParts=1)
        except client.exceptions.NoSuchUpload:
            return not _s3_exists(client, bucket, row["key"])  # completed, not yet recorded: the object is there
    return False


def _s3_exists(client: Any, bucket: str, key: str) -> bool:
    return _s3_head(client, bucket, key) is not None


def _s3_head(client: Any, bucket: str, key: str) -> int | None:
    """The object's size, None when there is none."""
    try:
        return int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
    except client.exceptions.ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def s3_size(backend: Any, key: str) -> int | None:
    """The size of the object at ``key`` in an S3 backend, None when there is none."""
    with s3_errors("read"):
        return _s3_head(backend.client, backend.location, key)


def lost(upload: Upload, *, where: Mapping[str, Any] | None = None) -> bool:
    """Whether an unfinished upload's counted bytes are not in its backend (``where``: its row as it was read,
    when the session's copy may have expired). A partial upload taken by a final one is left to the final's
    checks: its bytes go once the file is made."""
    if upload.file_id is not None or upload.concat_into is not None:
        return False
    row = where or as_row(upload)
    return _missing(row) and _unchanged(row)


def _unchanged(row: Mapping[str, Any]) -> bool:
    """Whether the upload's row still says what was looked at: a request that stored a chunk meanwhile may have
    removed the S3 unfinished part the old row named, and the bytes are then where its new row says."""
    db.session.commit()  # a fresh read of the row
    columns = [Upload.__table__.c[name] for name in WHERE]
    now = db.session.execute(sa.select(*columns).where(Upload.id == row["id"])).mappings().first()
    return now is not None and all(now[name] == row[name] for name in WHERE)


def require(upload: Upload, *, where: Mapping[str, Any] | None = None) -> None:
    """410 when :func:`lost`."""
    if lost(upload, where=where):
        raise gone(upload.id)


def _missing(row: Mapping[str, Any]) -> bool:
    return missing(placement.backend_at(placement.config(), row["backend"], row["location"]), row)


def require_partials(owner: str, ids: list[str]) -> None:
    """410 when a partial upload a final one is (or is about to be) made of has lost its bytes; the partial
    uploads of a file made already have given theirs up and are not looked at."""
    parts = db.session.scalars(sa.select(Upload).where(Upload.id.in_(ids), Upload.owner == owner)).all()
    finals = {part.concat_into for part in parts if part.concat_into is not None}
    made = set(db.session.scalars(sa.select(Upload.id).where(Upload.id.in_(finals), Upload.file_id.is_not(None))))
    for part in parts:
        if part.concat_into not in made and _missing(row := as_row(part)) and _unchanged(row):
            raise gone(part.id)


def gone(upload_id: str) -> APIError:
    return APIError(
        410,
        f"The bytes stored for upload {upload_id} are gone (it was restored from a backup that did not hold them): "
        "start the upload again",
        name="GONE",
    )


def as_row(upload: Upload) -> dict[str, Any]:
    """An ``Upload`` as the mapping the functions here take."""
    return {name: getattr(upload, name) for name in WHERE}
