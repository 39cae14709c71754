"""Storage operations: store an upload, find what a caller may see, delete, URLs and signatures.

Rules that hold everywhere here:
- a failed upload leaves neither a record nor a stored blob (blob first, then the record; any failure
  after the blob is written deletes it);
- blobs of deleted records are removed only after the transaction commits, so a rolled-back delete
  never loses data;
- a blob that may have no record (an upload not yet recorded, a deleted file's) has an entry in the
  journal (``PendingBlob``) until it is settled, so what a killed process leaves is found by ``sweep``;
- a private file or folder of somebody else is reported as missing (404), never as forbidden.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import mimetypes
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, BinaryIO
from urllib.parse import quote

import filetype
from flask import Flask, current_app, url_for
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import delete, insert, select
from werkzeug.utils import secure_filename

from trellis import audit, db, events, reads
from trellis.background import ThrottledWarning, start_loop
from trellis.backups.jobs import blobs_held, restore_running
from trellis.backups.parts import Blob, BlobRestore
from trellis.credentials import Identity
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found, provider_error
from trellis.module_config import get as get_config

from .backends import Backend, BackendError, LocalBackend, S3Backend, S3Clients, key_for, remove_stale_parts
from .config import type_allowed
from .models import File, Folder, PendingBlob
from .schemas import FileSchema

log = logging.getLogger(__name__)

MODULE = "storage"
SNIFF_BYTES = 8192  # filetype looks at most at the first 8 KiB
READ_CHUNK = 1024 * 1024
FALLBACK_TYPE = "application/octet-stream"
# Served inline (a browser shows them); everything else is an attachment, so an uploaded HTML or SVG
# page can never run script on this origin.
INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "application/pdf", "text/plain")
INLINE_PREFIXES = ("audio/", "video/")
_SIGNER_SALT = "trellis-storage-signed-url"
# The clock signed URLs are issued and checked against (tests move it forward instead of sleeping).
_clock = time.time


# ------------------------------------------------------------------------------------------- backends


@dataclass
class StorageState:
    """Per-app state, at ``app.extensions["trellis_storage"]``."""

    s3_clients: S3Clients
    running_hashes: Any  # uploads.RunningHashes: SHA-256 of resumable uploads in progress


def config() -> dict[str, Any]:
    return get_config(MODULE)


def active_backend() -> Backend:
    """The backend new uploads go to (the configured provider)."""
    cfg = config()
    if cfg["provider"] == "s3":
        return _s3(cfg, cfg["s3"]["bucket"])
    return _local(cfg)


def backend_of(record: File) -> Backend:
    """The backend a stored file lives in, whatever the provider is now."""
    return _backend_at(config(), record.backend, record.location)


def _backend_at(cfg: dict[str, Any], name: str, location: str | None) -> Backend:
    if name == "s3":
        return _s3(cfg, location or cfg["s3"]["bucket"])
    return _local(cfg)


def _local(cfg: dict[str, Any]) -> LocalBackend:
    return LocalBackend(cfg["local"].get("path") or current_app.config["STORAGE_PATH"])


def _s3(cfg: dict[str, Any], bucket: str) -> S3Backend:
    state: StorageState = current_app.extensions["trellis_storage"]
    return S3Backend(state.s3_clients.get(cfg["s3"]), bucket)


# -------------------------------------------------------------------------------------------- upload


def display_name(filename: str | None) -> str:
    """What the client called the file, without any directory part or control characters."""
    name = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in unicodedata.normalize("NFC", name) if unicodedata.category(ch)[0] != "C")
    name = name.strip().strip(".") or "file"
    return _truncate(name)


def safe_name(display: str) -> str:
    """ASCII name safe in a path or header (werkzeug's secure_filename on stem and extension), never empty."""
    ascii_name = unicodedata.normalize("NFKD", display).encode("ascii", "ignore").decode("ascii")
    stem, dot, ext = ascii_name.rpartition(".")
    if not dot:
        stem, ext = ascii_name, ""
    stem, ext = secure_filename(stem) or "file", secure_filename(ext)
    return _truncate(f"{stem}.{ext}" if ext else stem)


def _truncate(name: str, limit: int = 255) -> str:
    if len(name) <= limit:
        return name
    dot = name.rfind(".")
    ext = name[dot:] if 0 < dot and len(name) - dot <= 16 else ""
    return name[: limit - len(ext)] + ext


# Types filetype recognises by their bytes: a name claiming one of these is not believed when the bytes
# do not match (a text file called photo.png is not an image).
_SNIFFABLE = frozenset(kind.mime for kind in filetype.types)


def sniff(head: bytes, name: str) -> str:
    """Content type from the bytes; by extension only when the bytes say nothing; else octet-stream."""
    kind = filetype.guess(head) if head else None
    if kind is not None:
        return kind.mime
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed is None or guessed in _SNIFFABLE:
        return FALLBACK_TYPE
    return guessed


def too_large(limit: int) -> APIError:
    return APIError(413, f"The file is larger than the limit of {limit} bytes")


def store_upload(
    stream: BinaryIO, filename: str | None, *, owner: str, folder: Folder | None, is_public: bool | None
) -> File:
    """Stream ``stream`` into the active backend and record it; all or nothing."""
    cfg = config()
    limit = cfg["maxFileSize"]
    display = display_name(filename)
    head = stream.read(SNIFF_BYTES)
    content_type = sniff(head, display)
    check_type(content_type)

    file_id = db.new_id()
    key = key_for(file_id)
    backend = active_backend()
    try:
        writer = backend.writer(key, content_type)  # local: its part file exists, locked, from here on
    except BackendError as exc:
        raise provider_error(f"Storing the file failed: {exc}") from None
    pending: list[str] = []
    stored = False
    try:
        # Committed before a byte is stored, so a process killed from here on leaves an entry to sweep. The
        # request's reads end first: SQLite refuses a write in a transaction whose snapshot another wrote past.
        db.session.commit()
        pending = _journal("upload", [(backend, key)])
        db.session.commit()
        size, sha256 = _copy(head, stream, writer, limit)
        writer.commit()
        stored = True
        stored_blob = StoredBlob(file_id, backend, key, size, content_type, sha256)
        record = add_record(stored_blob, owner=owner, display=display, folder=folder, is_public=is_public)
        db.session.execute(delete(PendingBlob).where(PendingBlob.id.in_(pending)))  # settled with the record
        db.session.commit()
    except BaseException as exc:
        db.session.rollback()
        if _delete_blob(backend, key) if stored else writer.abort():
            _forget(pending)  # else the entry stays, for the sweep
        if isinstance(exc, BackendError):
            raise provider_error(f"Storing the file failed: {exc}") from None
        raise
    finally:
        writer.close()  # only now may a sweep take the blob for a dead upload's
    return record


def check_type(content_type: str) -> None:
    """415 unless ``allowedTypes`` accepts ``content_type``."""
    if not type_allowed(content_type, config()["allowedTypes"]):
        raise APIError(415, f"Files of type {content_type} are not accepted")


@dataclass(frozen=True)
class StoredBlob:
    """Bytes in a backend, checked and hashed, waiting for their record."""

    file_id: str
    backend: Backend
    key: str
    size: int
    content_type: str
    sha256: str


def add_record(blob: StoredBlob, *, owner: str, display: str, folder: Folder | None, is_public: bool | None) -> File:
    """The record of a stored blob, with its ``storage.file.create`` event (and an admin's audit entry), added
    to the session; the caller commits. Every way of uploading (``POST /storage/upload``, the admin's upload,
    a finished tus upload) ends here. Without ``is_public`` a file takes its folder's visibility."""
    record = File(
        id=blob.file_id,
        owner=owner,
        name=safe_name(display),
        display_name=display,
        folder_id=folder.id if folder else None,
        size=blob.size,
        content_type=blob.content_type,
        sha256=blob.sha256,
        is_public=bool(folder.is_public if is_public is None and folder else is_public),
        backend=blob.backend.name,
        location=blob.backend.location,
        key=blob.key,
    )
    db.session.add(record)
    db.session.flush()  # its timestamps, for the event
    record_file_events("create", [record])
    audit.record("storage", "file.create", blob.file_id, {"name": display, "owner": owner})  # an admin's upload only
    return record


def _copy(head: bytes, stream: BinaryIO, writer: Any, limit: int) -> tuple[int, str]:
    """Stream ``head`` and the rest of ``stream`` into ``writer``: (size, SHA-256); 413 past ``limit``."""
    digest = hashlib.sha256()
    size = 0
    chunk = head
    while chunk:
        size += len(chunk)
        if size > limit:  # the body may be under the request limit while the file part is not
            raise too_large(limit)
        digest.update(chunk)
        writer.write(chunk)
        chunk = stream.read(READ_CHUNK)
    return size, digest.hexdigest()


def store_form(form: dict[str, Any], owner: str) -> File:
    """An upload route's form (``file``, ``folder``, ``isPublic``) stored for ``owner``, in the owner's folder."""
    folder = target_folder(form["folder"], owner, "folder")
    upload = form["file"]
    return store_upload(upload.stream, upload.filename, owner=owner, folder=folder, is_public=form["isPublic"])


def _delete_blob(backend: Backend, key: str) -> bool:
    """Whether the blob is gone; a failure is logged, and the journal keeps the entry for the sweep."""
    try:
        backend.delete(key)
    except BackendError as exc:
        # The record is gone (or was never written); an orphan blob is garbage, not data loss.
        log.error("could not delete stored blob %s from %s: %s", key, backend.name, exc)
        return False
    return True


# -------------------------------------------------------------------------------------------- journal


# S3 cannot tell a running upload from a killed one: an upload's entry is settled once it is this old
# (no upload takes a day), and a killed upload's multipart parts wait that long.
S3_UPLOAD_GRACE = timedelta(days=1)
SWEEP_BATCH = 1000
SWEEP_EVERY_SECONDS = 600.0


def _journal(reason: str, blobs: list[tuple[Backend, str]]) -> list[str]:
    """Journal entries for ``blobs`` in the session's transaction (the caller commits); their ids."""
    return _journal_on(db.session, reason, blobs)


def _journal_on(connection: Any, reason: str, blobs: list[tuple[Backend, str]]) -> list[str]:
    """Journal entries for ``blobs`` through ``connection`` (a connection or the session); their ids."""
    rows = [
        {
            "id": db.new_id(),
            "reason": reason,
            "backend": b.name,
            "location": b.location,
            "key": k,
            "created_at": db.utcnow(),
        }
        for b, k in blobs
    ]
    for start in range(0, len(rows), SWEEP_BATCH):
        connection.execute(insert(PendingBlob), rows[start : start + SWEEP_BATCH])
    return [row["id"] for row in rows]


def _delete_entries(connection: Any, ids: list[str]) -> None:
    for start in range(0, len(ids), SWEEP_BATCH):  # bounded: SQLite limits a statement's parameters
        connection.execute(delete(PendingBlob).where(PendingBlob.id.in_(ids[start : start + SWEEP_BATCH])))


def _forget(ids: list[str]) -> None:
    """Drop settled journal entries in a short transaction of their own (the session's may have just ended)."""
    if not ids:
        return
    try:
        with reads.transaction() as connection:
            _delete_entries(connection, ids)
    except Exception as exc:  # the sweep finds the entries again; settling twice is harmless
        log.warning("could not drop %d storage journal entries: %s", len(ids), exc.__class__.__name__)


def sweep() -> int:
    """Remove what killed processes left: every local root's part files whose writer is gone, and the blobs of
    journal entries nobody holds (a dead upload's, a deleted file's whose removal did not happen). Returns
    how many entries were settled; entries a live process holds are left alone."""
    cfg = config()
    for root in {current_app.config["STORAGE_PATH"], cfg["local"].get("path")} - {None}:
        remove_stale_parts(root)
    # Plain rows, not ORM objects (the rollback would expire those), oldest first.
    entries = db.session.execute(
        select(*PendingBlob.__table__.columns).order_by(PendingBlob.created_at).limit(SWEEP_BATCH)
    ).all()
    db.session.rollback()  # each entry is judged in a transaction begun after its files are locked
    return sum(_settle(entry, cfg) for entry in entries)


def _settle(entry: Any, cfg: dict[str, Any]) -> bool:
    if entry.reason == "delete" and blobs_held():
        return False  # a running backup's snapshot may still list the deleted file
    if entry.reason == "restore" and restore_running():
        return False  # its records are not committed yet; a dead restore's entries are settled
    backend = _backend_at(cfg, entry.backend, entry.location)
    with backend.writing(entry.key) as live:
        if live is None:  # S3: a deleted file's blob is garbage at once, an upload's once it is old enough
            live = entry.reason == "upload" and entry.created_at > db.utcnow() - S3_UPLOAD_GRACE
        if live:
            return False
        # Looked at only now: the upload may have saved its record, settling this entry, meanwhile.
        open_entry = db.session.execute(select(PendingBlob.id).where(PendingBlob.id == entry.id)).first()
        file_id = entry.key.rsplit("/", 1)[-1]
        recorded = db.session.execute(select(File.id).where(File.id == file_id)).first()
        db.session.rollback()  # the delete below starts afresh (SQLite: no write on an old read snapshot)
        try:
            if open_entry and not recorded:
                backend.purge(entry.key)
        except BackendError as exc:
            log.warning("could not remove leftover blob %s from %s: %s", entry.key, entry.backend, exc)
            return False
        db.session.execute(delete(PendingBlob).where(PendingBlob.id == entry.id))
        db.session.commit()
    if open_entry and not recorded:
        log.info("removed leftover blob %s (%s) from %s", entry.key, entry.reason, entry.backend)
    return True


def start_sweeper(app: Flask) -> None:
    """``Module.background``: ``sweep`` at start and every ``SWEEP_EVERY_SECONDS`` in each serving process."""

    def step() -> None:
        with app.app_context():
            sweep()
        time.sleep(SWEEP_EVERY_SECONDS)

    # The database is away, or not migrated yet: the next pass tries again.
    start_loop("storage-sweep", "storage sweep", step, ThrottledWarning(log), retry_seconds=SWEEP_EVERY_SECONDS)


# -------------------------------------------------------------------------------------------- access


def owns(identity: Identity, owner: str) -> bool:
    return identity.is_admin or identity.id == owner


def visible_file(file_id: str, identity: Identity | None) -> File:
    """A file the caller may read: their own, any public one, anything for an admin. Else 404."""
    record = db.session.get(File, file_id)
    if record is None or not (record.is_public or (identity is not None and owns(identity, record.owner))):
        raise not_found("File not found")
    return record


def own_file(file_id: str, identity: Identity) -> File:
    """A file the caller may change: 404 if they cannot see it, 403 if they see it but do not own it."""
    record = visible_file(file_id, identity)
    if not owns(identity, record.owner):
        raise forbidden("Only the owner of a file may delete it")
    return record


def visible_folder(folder_id: str, identity: Identity) -> Folder:
    folder = db.session.get(Folder, folder_id)
    if folder is None or not (folder.is_public or owns(identity, folder.owner)):
        raise not_found("Folder not found")
    return folder


def own_folder(folder_id: str, identity: Identity) -> Folder:
    folder = visible_folder(folder_id, identity)
    if not owns(identity, folder.owner):
        raise forbidden("Only the owner of a folder may delete it")
    return folder


def target_folder(folder_id: str | None, owner: str, field: str) -> Folder | None:
    """A folder the user may put things in (their own); a wrong id is a 400 on ``field``."""
    if not folder_id:
        return None
    folder = db.session.get(Folder, folder_id)
    if folder is None or folder.owner != owner:
        raise bad_request(f"No folder {folder_id!r} of yours", {field: ["No such folder"]})
    return folder


# ------------------------------------------------------------------------------------------- folders


def create_folder(owner: str, name: str, is_public: bool, parent: Folder | None) -> Folder:
    clash = select(Folder.id).where(
        Folder.owner == owner,
        Folder.name == name,
        Folder.parent_id.is_(None) if parent is None else Folder.parent_id == parent.id,
    )
    if db.session.execute(clash).first() is not None:
        raise conflict(f"A folder named {name!r} already exists here")
    folder = Folder(owner=owner, name=name, is_public=is_public, parent_id=parent.id if parent else None)
    db.session.add(folder)
    db.session.commit()
    return folder


def folder_tree(root: Folder) -> list[str]:
    """Ids of ``root`` and every folder under it, parents before children."""
    ids, frontier = [root.id], [root.id]
    while frontier:
        frontier = list(db.session.execute(select(Folder.id).where(Folder.parent_id.in_(frontier))).scalars())
        ids.extend(frontier)
    return ids


def delete_folder(folder: Folder, recursive: bool) -> None:
    has_files = db.session.execute(select(File.id).where(File.folder_id == folder.id).limit(1)).first()
    has_folders = db.session.execute(select(Folder.id).where(Folder.parent_id == folder.id).limit(1)).first()
    if (has_files or has_folders) and not recursive:
        raise conflict("The folder is not empty; delete with ?recursive=true to remove its contents")
    tree = folder_tree(folder)
    files = list(db.session.execute(select(File).where(File.folder_id.in_(tree))).scalars())
    delete_files(files)
    for folder_id in reversed(tree):  # children first, for the parent foreign key
        db.session.delete(db.session.get(Folder, folder_id))
        db.session.flush()
    audit.record("storage", "folder.delete", folder.id, {"name": folder.name, "recursive": recursive})
    db.session.commit()


# ---------------------------------------------------------------------------------------- deletion


def delete_files(records: Iterable[File]) -> None:
    """Delete records in the current transaction; their blobs go once it commits (journalled in it, so a
    process killed before they are gone leaves entries for the sweep)."""
    records = list(records)
    record_file_events("delete", records)
    blobs = [(backend_of(r), r.key) for r in records]
    for record in records:
        db.session.delete(record)
    db.session.flush()
    if blobs:
        ids = _journal("delete", blobs)
        pending = [(b, k, i) for (b, k), i in zip(blobs, ids, strict=True)]
        db.after_commit(lambda: _delete_committed(pending))


def record_file_events(action: str, records: list[File]) -> None:
    """``storage.file.<action>`` for each record, as the file routes show it, in the current transaction."""
    if records:
        events.record_many(f"storage.file.{action}", FileSchema(many=True).dump(records))


def _delete_committed(blobs: list[tuple[Backend, str, str]]) -> None:
    """After the deleting transaction commits: the blobs, then the journal entries of those gone. While a
    backup runs they stay (its snapshot may still list the files): the journal keeps them for the sweep."""
    if blobs_held():
        return
    _forget([entry for backend, key, entry in blobs if _delete_blob(backend, key)])


def delete_user_data(user_id: str) -> None:
    """Everything a user stored: files (blobs after commit), then folders, children first."""
    files = list(db.session.execute(select(File).where(File.owner == user_id)).scalars())
    delete_files(files)
    # A folder's parent always has the same owner (see target_folder), so the user's roots reach them all.
    roots = db.session.execute(select(Folder).where(Folder.owner == user_id, Folder.parent_id.is_(None))).scalars()
    for root in list(roots):
        for folder_id in reversed(folder_tree(root)):
            db.session.delete(db.session.get(Folder, folder_id))
            db.session.flush()


# ---------------------------------------------------------------------------------------------- URLs


def _serializer() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.config["SECRET_KEY"], salt=_SIGNER_SALT)


def signed_url(record: File, expires_in: int | None = None, query: dict[str, Any] | None = None) -> tuple[str, int]:
    """A URL that serves ``record`` without credentials until it expires: (url, expiry epoch seconds).
    With ``query`` (an image transform) it is always Trellis's own, which transforms; else an S3 file's is a
    presigned S3 URL."""
    seconds = config()["signedUrlExpiry"] if expires_in is None else expires_in
    expires = int(_clock()) + seconds
    if record.backend == "s3" and not query:
        backend = backend_of(record)
        assert isinstance(backend, S3Backend)
        try:
            url = backend.presigned_url(record.key, seconds, record.content_type, content_disposition(record))
        except BackendError as exc:
            raise provider_error(f"Signing the URL failed: {exc}") from None
        return url, expires
    token = _serializer().dumps({"f": record.id, "e": expires})
    return url_for("storage.signed_file", token=token, _external=True, **(query or {})), expires


def file_from_token(token: str) -> File:
    """The file a local signed URL grants; 403 for a forged or expired one, 404 if the file is gone."""
    try:
        payload = _serializer().loads(token)
    except BadSignature:
        raise forbidden("The signed URL is not valid") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("e"), int) or not isinstance(payload.get("f"), str):
        raise forbidden("The signed URL is not valid")
    if payload["e"] <= _clock():
        raise forbidden("The signed URL has expired")
    record = db.session.get(File, payload["f"])
    if record is None:
        raise not_found("File not found")
    return record


# -------------------------------------------------------------------------------------------- headers


def is_inline(content_type: str) -> bool:
    return content_type in INLINE_TYPES or content_type.startswith(INLINE_PREFIXES)


def content_disposition(record: File) -> str:
    """RFC 6266: an ASCII ``filename`` for old clients plus ``filename*`` with the real (UTF-8) name."""
    kind = "inline" if is_inline(record.content_type) else "attachment"
    quoted = quote(record.display_name, safe="!#$&+-.^_`|~")
    return f"{kind}; filename=\"{record.name}\"; filename*=UTF-8''{quoted}"


# ------------------------------------------------------------------------------------------- backups


def backup_blobs(rows: Callable[[str], Iterator[dict[str, Any]]]) -> Iterator[Blob]:
    """The blob of every file record of a backup's snapshot, read from the backend that holds it."""
    cfg = config()
    for row in rows(File.__tablename__):
        backend = _backend_at(cfg, row["backend"], row["location"])
        yield Blob(f"{MODULE}/{row['id']}", functools.partial(backend.read, row["key"]))


def restore_blobs(rows: Callable[[str], Iterator[dict[str, Any]]], blob: Callable[[str], BinaryIO]) -> BlobRestore:
    """Put back the blobs of a restore's file records (a blob's key names its file, so a file present before
    and after is the same bytes), crash-safe across processes through the journal:

    - now, before the restore's transaction, one ``restore`` entry per blob to write is committed: a restore
      killed from here on leaves entries the sweep settles (the blobs no committed record references go);
    - ``write``, in the restore's transaction: the blobs are written, their entries removed and the blobs of
      the files the restore drops journaled as ``delete`` — all of which commits or rolls back with the rows;
    - ``finish`` (committed): those dropped files' blobs removed; ``undo`` (rolled back): the blobs written
      that were not there before removed. Whatever a killed process skipped, the sweep does."""
    cfg = config()
    wanted = [
        (row["id"], (row["backend"], row["location"], row["key"]), row["content_type"])
        for row in rows(File.__tablename__)
    ]
    with reads.transaction() as connection:
        journal = _journal_on(connection, "restore", [(_backend_at(cfg, n, loc), k) for _, (n, loc, k), _ in wanted])
    table = File.__table__
    written: list[tuple[Backend, str, str]] = []
    gone: list[tuple[Backend, str, str]] = []

    def write(connection: Any) -> None:
        before = {tuple(r) for r in connection.execute(select(table.c.backend, table.c.location, table.c.key))}
        restored: set[tuple[str, str | None, str]] = set()
        for (file_id, place, content_type), entry in zip(wanted, journal, strict=True):
            backend, key = _backend_at(cfg, place[0], place[1]), place[2]
            writer = backend.writer(key, content_type)
            try:
                with blob(f"{MODULE}/{file_id}") as source:
                    while chunk := source.read(READ_CHUNK):
                        writer.write(chunk)
                writer.commit()
            except BaseException:
                writer.abort()
                raise
            writer.close()
            restored.add(place)
            if place not in before:
                written.append((backend, key, entry))
        _delete_entries(connection, journal)
        dropped = [(_backend_at(cfg, name, location), key) for name, location, key in before - restored]
        gone.extend((b, k, e) for (b, k), e in zip(dropped, _journal_on(connection, "delete", dropped), strict=True))

    def undo() -> None:
        removing = {entry for _, _, entry in written}
        _forget([entry for entry in journal if entry not in removing])
        _delete_committed(written)

    return BlobRestore(write=write, finish=lambda: _delete_committed(gone), undo=undo)


def backup_store() -> Backend | None:
    """The backups' archive store (``backups.storage: s3``): the S3 backend of the configured bucket."""
    cfg = config()
    return _s3(cfg, cfg["s3"]["bucket"]) if cfg["s3"]["bucket"] else None
