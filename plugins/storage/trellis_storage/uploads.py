"""Resumable uploads (tus 1.0.0, the storage README's "Resumable uploads"): create, append, inspect, end,
finish. The routes (``tus_routes.py``) only read headers and write them back; the writer lease is
``upload_lease.py``, the running hashes ``upload_hashes.py``, the expiry ``upload_expiry.py``.

What holds everywhere here:
- an upload's row is the truth: bytes count as stored once its ``offset`` says so (``resumable.py`` keeps
  them durable before that), so any process may take the next chunk and a restart loses nothing acknowledged;
- one request at a time appends to an upload (its ``writer`` lease, and on local disk the part file's
  ``flock``); a second one gets 423 (tus clients retry it), an offset that is not the stored one 409;
- the last byte makes the blob and the file record through ``service.add_record``, as ``POST
  /storage/upload`` does (same limits, folder, visibility, owner, event); the upload's id becomes the file's;
- whatever fails leaves the upload as it was acknowledged: a chunk is recorded whole or not at all (a client
  that hangs up mid-chunk without a checksum keeps what arrived, as tus asks).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import time
from datetime import timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from werkzeug.exceptions import ClientDisconnected

from trellis import db
from trellis.errors import APIError, bad_request, conflict, not_found, provider_error

from . import placement, service
from .backends import Backend, BackendError, key_for
from .models import Upload
from .placement import READ_CHUNK
from .resumable import Busy, LocalParts, Progress, parts_of
from .upload_hashes import running_hashes
from .upload_lease import Lease, lost_race

log = logging.getLogger(__name__)

TUS_VERSION = "1.0.0"
EXTENSIONS = ("creation", "creation-with-upload", "termination", "expiration", "checksum", "concatenation")
CHECKSUM_ALGORITHMS = ("sha1",)
LIFETIME = timedelta(hours=24)


class Readable(Protocol):
    """Where a chunk's bytes come from: a request body, or a partial upload's blob (concatenation)."""

    def read(self, size: int = -1, /) -> bytes: ...


# --------------------------------------------------------------------------------------------- creation


def parse_metadata(header: str | None) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64(value)`` pairs (a key alone has an empty value)."""
    found: dict[str, str] = {}
    for item in (header or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, _, encoded = item.partition(" ")
        try:
            value = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise bad_request(
                f"Upload-Metadata: the value of {key!r} is not base64 of UTF-8 text",
                {"Upload-Metadata": [f"{key}: not base64 of UTF-8 text"]},
            ) from None
        if key in found:
            raise bad_request(f"Upload-Metadata names {key!r} twice", {"Upload-Metadata": [f"{key}: given twice"]})
        found[key] = value
    return found


def _visibility(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise bad_request(
        "Upload-Metadata: isPublic must be true or false", {"Upload-Metadata": ["isPublic: not a boolean"]}
    )


def create(
    owner: str,
    length: int,
    metadata: dict[str, str],
    metadata_header: str | None = None,
    *,
    concat: str | None = None,
    concat_parts: list[str] | None = None,
    commit: bool = True,
) -> Upload:
    """A new upload of ``length`` bytes for ``owner``; nothing is stored until its first chunk.
    ``metadata_header``: the ``Upload-Metadata`` header as sent, which HEAD repeats. ``concat``: ``partial`` or
    ``final`` (made of the partial uploads ``concat_parts``); ``commit=False`` leaves the commit to the caller."""
    limit = placement.config()["maxFileSize"]
    if length > limit:
        raise service.too_large(limit)
    folder = service.target_folder(metadata.get("folder") or None, owner, "Upload-Metadata")
    is_public = _visibility(metadata.get("isPublic"))
    file_id = db.new_id()
    backend = placement.active_backend()
    now = db.utcnow()
    upload = Upload(
        id=file_id,
        owner=owner,
        length=length,
        offset=0,
        filename=service.display_name(metadata.get("filename")),
        folder_id=folder.id if folder else None,
        is_public=is_public,
        metadata_header=metadata_header,
        concat=concat,
        concat_parts=concat_parts,
        backend=backend.name,
        location=backend.location,
        key=key_for(file_id),
        parts=[],
        tail_size=0,
        expires_at=now + LIFETIME,
        next_attempt_at=now + LIFETIME,
        attempts=0,
    )
    db.session.commit()  # end the reads first (SQLite: no write in a transaction on an older snapshot)
    db.session.add(upload)
    if commit:
        db.session.commit()
    return upload


# ----------------------------------------------------------------------------------------------- access


def find(upload_id: str, owner: str) -> Upload:
    """The caller's own upload; anybody else's, an expired or an unknown one is 404."""
    upload = db.session.get(Upload, upload_id)
    if upload is None or upload.owner != owner or (upload.file_id is None and upload.expires_at <= db.utcnow()):
        raise not_found("Upload not found")
    return upload


def upload_backend(upload: Upload) -> Backend:
    return placement.backend_at(placement.config(), upload.backend, upload.location)


def progress_of(upload: Upload) -> Progress:
    return Progress(
        key=upload.key,
        offset=upload.offset,
        s3_upload_id=upload.s3_upload_id,
        parts=tuple(upload.parts or ()),
        tail_key=upload.tail_key,
        tail_size=upload.tail_size,
    )


# ---------------------------------------------------------------------------------------------- append


def parse_checksum(header: str | None) -> tuple[str, bytes] | None:
    """``Upload-Checksum: sha1 <base64 digest>``; 400 for another algorithm or a malformed value."""
    if header is None:
        return None
    algorithm, _, encoded = header.strip().partition(" ")
    if algorithm.lower() not in CHECKSUM_ALGORITHMS:
        raise bad_request(
            f"Upload-Checksum: unsupported algorithm {algorithm!r} (supported: {', '.join(CHECKSUM_ALGORITHMS)})",
            {"Upload-Checksum": ["unsupported algorithm"]},
        )
    try:
        digest = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != hashlib.sha1().digest_size:
        raise bad_request("Upload-Checksum: not a base64 SHA-1 digest", {"Upload-Checksum": ["not a SHA-1 digest"]})
    return algorithm.lower(), digest


def append(
    upload: Upload, offset: int, stream: Readable, length: int | None, checksum: tuple[str, bytes] | None
) -> Upload:
    """Store one chunk at ``offset``; the upload as recorded afterwards (finished if that was its last byte).

    ``length`` is the chunk's ``Content-Length`` (None: chunked transfer)."""
    if upload.concat == "final":
        raise APIError(403, "A final upload is made of its partial uploads: it takes no PATCH", name="FORBIDDEN")
    return fill(upload, offset, stream, length, checksum)


def fill(
    upload: Upload, offset: int, stream: Readable, length: int | None, checksum: tuple[str, bytes] | None
) -> Upload:
    """:func:`append`, for any upload: a final upload is filled from its partial uploads' bytes this way."""
    if upload.file_id is not None:
        if offset == upload.length and not length:
            return upload  # a retried last request: nothing to add
        raise conflict(f"The upload is complete (file {upload.file_id})")
    if offset != upload.offset:
        raise conflict(f"Upload-Offset {offset} is not the upload's offset {upload.offset}")
    remaining = upload.length - offset
    if length is not None and length > remaining:
        raise APIError(413, f"The chunk of {length} bytes goes past Upload-Length ({remaining} bytes remain)")
    if remaining == 0 and not length:
        return finish(upload) if upload.file_id is None else upload

    lease = Lease(upload)
    parts = parts_of(upload_backend(upload))
    refused: APIError | None = None
    try:
        with parts.appending(progress_of(upload), lease.keep) as appender:
            if not lease.take(offset=offset, force=_exclusive(parts)):
                db.session.refresh(upload)
                if upload.offset != offset:
                    raise conflict(f"Upload-Offset {offset} is not the upload's offset {upload.offset}")
                raise lost_race()
            try:
                _receive(upload, offset, stream, length, checksum, appender, lease)
            except APIError as exc:
                appender.discard()
                if exc.status != 415:
                    raise
                refused = exc  # its type is not accepted: it can never become a file
            except BaseException:
                appender.discard()
                raise
            else:
                appender.settled()
    except Busy:
        raise lost_race() from None
    except BackendError as exc:
        raise provider_error(f"Storing the upload failed: {exc}") from None
    finally:
        lease.release()
    if refused is not None:
        raise _stop(upload, refused)
    db.session.refresh(upload)
    if upload.offset == upload.length:
        return finish(upload)
    return upload


def _exclusive(parts: Any) -> bool:
    """Local disk: holding the part file's flock proves no other request (alive) is writing to it."""
    return isinstance(parts, LocalParts)


def _receive(
    upload: Upload,
    offset: int,
    stream: Readable,
    length: int | None,
    checksum: tuple[str, bytes] | None,
    appender: Any,
    lease: Lease,
) -> None:
    """Copy the body into ``appender`` and record what arrived (all of it, or with a checksum nothing unless
    it matches)."""
    remaining = upload.length - offset
    running = running_hashes().take(upload.id, offset)
    chunk_hash = hashlib.sha1() if checksum else None
    head = b""
    sniffed = upload.content_type
    received = 0
    cut_off = False
    while length is None or received < length:
        try:
            chunk = stream.read(READ_CHUNK if length is None else min(READ_CHUNK, length - received))
        except (ClientDisconnected, OSError):
            chunk, cut_off = b"", True
        if not chunk:
            cut_off = cut_off or (length is not None and received < length)
            break
        if received + len(chunk) > remaining:
            raise APIError(413, f"The chunk goes past Upload-Length ({remaining} bytes remained)")
        if sniffed is None and offset == 0 and upload.concat != "partial":  # a part's start is not the file's
            head += chunk[: service.SNIFF_BYTES - len(head)]
            if len(head) >= min(service.SNIFF_BYTES, upload.length):
                sniffed = service.sniff(head, upload.filename)
                service.check_type(sniffed)  # 415 before the rest is stored
        appender.write(chunk)
        received += len(chunk)
        if running is not None:
            running.update(chunk)
        if chunk_hash is not None:
            chunk_hash.update(chunk)
        lease.keep()
    if checksum is not None:
        if cut_off:
            raise APIError(400, "The chunk was cut off; its checksum cannot be checked")
        assert chunk_hash is not None
        if chunk_hash.digest() != checksum[1]:
            raise APIError(460, "Upload-Checksum does not match the chunk's bytes", name="CHECKSUM_MISMATCH")
    new_offset = offset + received
    progress = appender.stored(final=new_offset == upload.length)
    if not lease.settle(
        offset=new_offset,
        content_type=sniffed,
        s3_upload_id=progress.s3_upload_id,
        parts=list(progress.parts),
        tail_key=progress.tail_key,
        tail_size=progress.tail_size,
    ):
        raise lost_race()
    db.session.commit()
    lease.committed()
    if running is not None:
        running_hashes().keep(upload.id, new_offset, running)
    if cut_off:
        log.info("upload %s: the client hung up after %d bytes of its chunk; they are kept", upload.id, received)


def _stop(upload: Upload, error: APIError) -> APIError:
    """An upload that can never become a file (its type or size is refused): removed, and ``error`` to raise."""
    remove(upload)
    return error


def discard_new(upload: Upload) -> None:
    """An upload whose creation request failed with its first bytes: its client never learnt where it is."""
    db.session.rollback()
    fresh = db.session.get(Upload, upload.id)
    if fresh is not None and fresh.file_id is None:
        remove(fresh)


def purge(upload: Upload) -> bool:
    """Every stored byte of an unfinished upload (whether they all went: else the expiry sweep tries again)."""
    try:
        parts_of(upload_backend(upload)).purge(progress_of(upload))
    except BackendError as exc:
        log.warning("could not remove the parts of upload %s: %s", upload.id, exc)
        return False
    return True


def remove(upload: Upload) -> None:
    if not purge(upload):  # the row stays: the expiry sweep tries again
        return
    running_hashes().forget(upload.id)
    db.session.execute(sa.delete(Upload).where(Upload.id == upload.id))
    db.session.commit()


# ---------------------------------------------------------------------------------------------- finish


def finish(upload: Upload) -> Upload:
    """Its last byte is in: the blob and the file record. Again harmless when it was done (or half done
    by a request that died): each step looks at what is there first. A partial upload stays as it is: its bytes
    become part of a final upload's."""
    if upload.concat == "partial":
        return upload
    lease = Lease(upload)
    if not lease.take(offset=upload.length, force=False):
        db.session.refresh(upload)
        if upload.file_id is not None:
            return upload
        raise lost_race()
    backend = upload_backend(upload)
    try:
        parts_of(backend).finish(progress_of(upload))
        content_type = upload.content_type or service.sniff(_head(backend, upload), upload.filename)
        owner_folder = service.target_folder(upload.folder_id, upload.owner, "Upload-Metadata")
        limit = placement.config()["maxFileSize"]
        if upload.length > limit:
            raise service.too_large(limit)
        service.check_type(content_type)
        sha256 = _sha256(backend, upload)
        blob = service.StoredBlob(upload.id, backend, upload.key, upload.length, content_type, sha256)
        service.add_record(
            blob, owner=upload.owner, display=upload.filename, folder=owner_folder, is_public=upload.is_public
        )
        if not lease.settle(file_id=upload.id, content_type=content_type):
            raise lost_race()
        db.session.commit()
        lease.committed()
    except APIError as exc:
        db.session.rollback()
        if exc.status in (400, 413, 415):  # never acceptable: the upload goes
            raise _stop(upload, exc) from None
        lease.release()
        raise
    except BackendError as exc:
        lease.release()
        raise provider_error(f"Storing the upload failed: {exc}") from None
    except BaseException:
        lease.release()
        raise
    running_hashes().forget(upload.id)
    db.session.refresh(upload)
    return upload


def _head(backend: Backend, upload: Upload) -> bytes:
    if upload.length == 0:
        return b""
    chunks = backend.read(upload.key, 0, min(service.SNIFF_BYTES, upload.length))
    try:
        return b"".join(chunks)
    finally:
        chunks.close()


def _sha256(backend: Backend, upload: Upload) -> str:
    """From the running hash when this process took every chunk; else read back once."""
    running = running_hashes().take(upload.id, upload.length)
    if running is not None:
        return running.hexdigest()
    digest = hashlib.sha256()
    chunks = backend.read(upload.key)
    try:
        for chunk in chunks:
            digest.update(chunk)
            time.sleep(0)  # under eventlet: let other requests run between chunks
    finally:
        chunks.close()
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------ termination


def terminate(upload: Upload) -> None:
    """DELETE: its parts and its row. A finished upload's bytes are a file now (deleted as a file)."""
    if upload.file_id is not None:
        raise conflict(f"The upload is complete; its file {upload.file_id} is deleted with DELETE /storage/file/…")
    if upload.concat_into is not None:
        raise conflict(f"The upload is a part of the final upload {upload.concat_into}")
    lease = Lease(upload)
    parts = parts_of(upload_backend(upload))
    try:
        with parts.appending(progress_of(upload), lease.keep):
            if not lease.take(offset=None, force=_exclusive(parts)):
                raise lost_race()
            db.session.refresh(upload)
            parts.purge(progress_of(upload))
            running_hashes().forget(upload.id)
            db.session.execute(sa.delete(Upload).where(Upload.id == upload.id, Upload.writer == lease.token))
            db.session.commit()
    except Busy:
        raise lost_race() from None
    except BackendError as exc:
        lease.release()
        raise provider_error(f"Removing the upload failed: {exc}") from None
