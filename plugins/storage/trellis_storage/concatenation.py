"""tus ``concatenation``: partial uploads, and the final upload made of them (the parallel uploads of
tus-js-client and Uppy).

- A **partial** upload is created, appended to and inspected like any other, but never becomes a file by itself
  (its bytes are not sniffed: its start is not the file's).
- The **final** upload is created by naming the caller's complete partial uploads, in order; it claims them
  (``concat_into``) in the transaction that creates it, so no partial goes into two files. It is an upload of
  their total length whose bytes are copied from them, in order, through the same append as a client's chunks
  (``uploads.fill``): its progress is recorded as it goes, and any process can take it further from there (the
  creation request repeated, or a HEAD). Its last byte makes the file as any upload's does (one record, the
  type sniffed from the file's first bytes, the final upload's name, folder and visibility). Then the partial
  uploads' bytes are removed (their rows go when they expire); a refused final upload (type, size) removes them
  too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import sqlalchemy as sa

from trellis import db
from trellis.errors import APIError, bad_request, conflict, provider_error

from . import uploads
from .backends import BackendError, Chunks
from .models import Upload
from .resumable import parts_of

_UPLOAD_PATH = re.compile(r"/storage/uploads/([0-9a-f]{32})/?$")


def parse(header: str) -> list[str] | None:
    """``Upload-Concat``: ``partial`` → None; ``final;<url> <url> …`` → the partial uploads' ids, in order."""
    value = header.strip()
    if value == "partial":
        return None
    kind, separator, rest = value.partition(";")
    if kind.strip() != "final" or not separator:
        raise bad_request(
            "Upload-Concat must be partial, or final; followed by the partial uploads' URLs",
            {"Upload-Concat": ["Not partial or final;<urls>"]},
        )
    ids = []
    for url in rest.split():
        found = _UPLOAD_PATH.search(urlsplit(url).path)
        if found is None:
            raise bad_request(f"Upload-Concat: {url!r} is not an upload's URL", {"Upload-Concat": ["Not an upload"]})
        ids.append(found.group(1))
    if not ids:
        raise bad_request("Upload-Concat: final names no partial upload", {"Upload-Concat": ["No partial upload"]})
    if len(set(ids)) != len(ids):
        raise bad_request("Upload-Concat: a partial upload is named twice", {"Upload-Concat": ["Named twice"]})
    return ids


def create_final(owner: str, ids: list[str], metadata: dict[str, str], metadata_header: str) -> Upload:
    """The final upload of ``ids`` (the caller's complete partial uploads), made into its file. The same request
    repeated (its client did not hear the answer) continues, or answers, the final upload it created."""
    before = _final_of(owner, ids)
    if before is not None:
        return complete(before)
    partials = _partials(owner, ids)
    length, expires = sum(part.length for part in partials), min(part.expires_at for part in partials)
    final = uploads.create(
        owner, length, metadata, metadata_header, concat="final", concat_parts=ids, commit=False
    )  # its reads are over: the insert and the claim below are one fresh write transaction
    final.expires_at = final.next_attempt_at = expires  # it expires with the first of its parts to expire
    db.session.flush()
    claimed = db.rowcount(
        db.session.execute(
            sa.update(Upload)
            .where(Upload.id.in_(ids), Upload.owner == owner, Upload.concat == "partial", Upload.concat_into.is_(None))
            .values(concat_into=final.id)
            .execution_options(synchronize_session=False)
        )
    )
    if claimed != len(ids):  # another final upload took one meanwhile
        db.session.rollback()
        raise conflict("A partial upload named in Upload-Concat is part of another final upload")
    db.session.commit()
    return complete(final)


def _final_of(owner: str, ids: list[str]) -> Upload | None:
    """The final upload these partial uploads already went into (all of them, in this order), if any."""
    claims = set(db.session.execute(sa.select(Upload.concat_into).where(Upload.id.in_(ids))).scalars())
    if len(claims) != 1 or None in claims:
        return None
    final = db.session.get(Upload, claims.pop(), populate_existing=True)
    if final is None or final.owner != owner or final.concat_parts != ids:
        return None
    return final


def _partials(owner: str, ids: list[str]) -> list[Upload]:
    fresh = sa.select(Upload).where(Upload.id.in_(ids)).execution_options(populate_existing=True)
    found = {part.id: part for part in db.session.execute(fresh).scalars()}
    partials = []
    for upload_id in ids:
        part = found.get(upload_id)
        if part is None or part.owner != owner or (part.file_id is None and part.expires_at <= db.utcnow()):
            raise bad_request(f"Upload-Concat: no upload {upload_id} of yours", {"Upload-Concat": ["Unknown upload"]})
        if part.concat != "partial":
            raise bad_request(
                f"Upload-Concat: {upload_id} is not a partial upload", {"Upload-Concat": ["Not a partial upload"]}
            )
        if part.offset != part.length:
            raise bad_request(
                f"Upload-Concat: the partial upload {upload_id} has {part.offset} of its {part.length} bytes",
                {"Upload-Concat": ["A partial upload is not complete"]},
            )
        if part.concat_into is not None:
            raise conflict(f"The partial upload {upload_id} is part of another final upload")
        partials.append(part)
    return partials


def complete(final: Upload) -> Upload:
    """Copy what the final upload is missing from its partial uploads, make its file, remove the partials."""
    final_id, ids = final.id, list(final.concat_parts or ())
    try:
        if final.file_id is None:
            final = _copy(final)
    except APIError as exc:
        if exc.status in (400, 413, 415):  # the final upload was refused and removed: its parts can never be used
            _remove_parts(final_id, ids)
        raise
    _remove_parts(final_id, ids)
    return final


def _copy(final: Upload) -> Upload:
    start = 0
    for part_id in final.concat_parts or ():
        part = db.session.get(Upload, part_id, populate_existing=True)
        if part is None or part.concat_into != final.id:
            raise APIError(410, f"The partial upload {part_id} of this final upload expired", name="GONE")
        end = start + part.length
        if final.offset < end:
            final = _copy_part(final, part, final.offset - start, end - final.offset)
        start = end
    return uploads.finish(final) if final.file_id is None else final


def _copy_part(final: Upload, part: Upload, skip: int, count: int) -> Upload:
    """The bytes ``[skip, skip + count)`` of ``part`` appended to ``final`` (recorded as one chunk)."""
    backend = uploads.upload_backend(part)
    try:
        parts_of(backend).finish(uploads.progress_of(part))  # its stored bytes as one blob (again harmless)
        chunks = backend.read(part.key, skip, skip + count)
    except BackendError as exc:
        raise provider_error(f"Reading the partial upload {part.id} failed: {exc}") from None
    try:
        return uploads.fill(final, final.offset, _Stream(chunks), count, None)
    finally:
        chunks.close()


class _Stream:
    """A blob's chunks as the stream ``uploads.fill`` reads a request body from."""

    def __init__(self, chunks: Chunks) -> None:
        self._chunks = chunks

    def read(self, size: int = -1) -> bytes:
        return next(self._chunks, b"")


def _remove_parts(final_id: str, ids: list[str]) -> None:
    """The partial uploads' bytes go. Their rows stay until they expire, still naming the final upload, so the
    creation request repeated (a client that did not hear the answer) finds it and gets the same answer."""
    db.session.rollback()  # a fresh look: the final upload may be gone (refused)
    for part_id in ids:
        part = db.session.get(Upload, part_id, populate_existing=True)
        if part is not None and part.concat_into == final_id:
            uploads.purge(part)
