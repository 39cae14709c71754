"""Files and folders: store an upload as a file record, find what a caller may see, create and delete.
Where blobs live is ``placement.py``, the journal and its sweep ``journal.py``, signed URLs
``signed_urls.py``, a backup's blobs ``blob_backups.py``.

Rules that hold everywhere here:
- a failed upload leaves neither a record nor a stored blob (blob first, then the record; any failure
  after the blob is written deletes it);
- blobs of deleted records are removed only after the transaction commits, so a rolled-back delete
  never loses data;
- a blob that may have no record (an upload not yet recorded, a deleted file's) has an entry in the
  journal (``PendingBlob``) until it is settled, so what a killed process leaves is found by the sweep;
- a private file or folder of somebody else is reported as missing (404), never as forbidden.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

import filetype
from sqlalchemy import delete, select
from werkzeug.utils import secure_filename

from trellis import audit, db, events
from trellis.credentials import Identity
from trellis.errors import APIError, bad_request, conflict, forbidden, not_found, provider_error

from .backends import Backend, BackendError, key_for
from .config import type_allowed
from .journal import delete_blob, delete_committed, forget, journal
from .models import File, Folder, PendingBlob
from .placement import READ_CHUNK, active_backend, backend_of, config
from .schemas import FileSchema

log = logging.getLogger(__name__)

SNIFF_BYTES = 8192  # filetype looks at most at the first 8 KiB
FALLBACK_TYPE = "application/octet-stream"


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
        pending = journal("upload", [(backend, key)])
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
        if delete_blob(backend, key) if stored else writer.abort():
            forget(pending)  # else the entry stays, for the sweep
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
        ids = journal("delete", blobs)
        pending = [(b, k, i) for (b, k), i in zip(blobs, ids, strict=True)]
        db.after_commit(lambda: delete_committed(pending))


def record_file_events(action: str, records: list[File]) -> None:
    """``storage.file.<action>`` for each record, as the file routes show it, in the current transaction."""
    if records:
        events.record_many(f"storage.file.{action}", FileSchema(many=True).dump(records))


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
