"""Files and folders. Owners are user ids of the Authentication module (no foreign key across modules:
a deleted user's files are removed through the ``trellis_user_deleted`` hook, which also deletes blobs)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from trellis.db import Base, UTCDateTime, new_id, utcnow


class Folder(Base):
    __tablename__ = "storage_folders"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    owner: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(255))
    is_public: Mapped[bool] = mapped_column(Boolean, default=False)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("storage_folders.id"), index=True, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class File(Base):
    __tablename__ = "storage_files"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    owner: Mapped[str] = mapped_column(String(32), index=True)
    # ``name`` is the sanitised name (secure_filename); ``display_name`` what the client called it.
    name: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(255))
    folder_id: Mapped[str | None] = mapped_column(ForeignKey("storage_folders.id"), index=True, default=None)
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64))
    is_public: Mapped[bool] = mapped_column(Boolean, default=False)
    # Where the bytes are: the backend that wrote them ("local" | "s3"), the bucket for S3, the key.
    # Changing the configured provider affects new files only; these keep being read from here.
    backend: Mapped[str] = mapped_column(String(16))
    location: Mapped[str | None] = mapped_column(String(255), default=None)
    key: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    __table_args__ = (Index("ix_storage_files_created_at_id", "created_at", "id"),)


class PendingBlob(Base):
    """A blob that may have no record: an upload's, from before its bytes are written until its record is
    saved (removed in that transaction), or a deleted file's, from the deleting transaction until the blob
    is gone, or a restore's, from before its bytes are written until the restore commits. What a killed
    process leaves here, the sweep removes (``journal.sweep``).

    It describes this installation's backends, not data: a backup leaves it out and a restore keeps it."""

    __tablename__ = "storage_pending_blobs"
    __table_args__ = {"info": {"backup": "kept"}}

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    reason: Mapped[str] = mapped_column(String(8))  # "upload" | "delete" | "restore"
    backend: Mapped[str] = mapped_column(String(16))
    location: Mapped[str | None] = mapped_column(String(255), default=None)
    key: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)


class Upload(Base):
    """A resumable (tus) upload: what its creator declared and what is durably stored so far. Its bytes are in
    the backend (a local part file, or an S3 multipart upload plus an unfinished part), so any process may take
    the next chunk. Its id becomes the file's id when the last byte arrives (``file_id`` is then set).

    ``writer``/``writer_until``: the lease of the request appending to it (one at a time). ``claim``,
    ``attempts`` and ``next_attempt_at`` (first due at ``expires_at``) make the expired uploads a
    ``trellis.work_queue.LeaseQueue``, so each is removed by one process."""

    __tablename__ = "storage_uploads"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    owner: Mapped[str] = mapped_column(String(32), index=True)
    length: Mapped[int] = mapped_column(BigInteger)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)
    filename: Mapped[str] = mapped_column(String(255))
    folder_id: Mapped[str | None] = mapped_column(String(32), default=None)  # checked again at completion
    is_public: Mapped[bool | None] = mapped_column(Boolean, default=None)
    content_type: Mapped[str | None] = mapped_column(String(255), default=None)  # sniffed from the first bytes
    # ``Upload-Metadata`` as the client sent it: HEAD repeats it unchanged (tus clients keep keys we ignore).
    metadata_header: Mapped[str | None] = mapped_column(Text, default=None)
    backend: Mapped[str] = mapped_column(String(16))
    location: Mapped[str | None] = mapped_column(String(255), default=None)
    key: Mapped[str] = mapped_column(String(255))
    # S3 only: the multipart upload, its parts' ETags in order, and the unfinished part (< 5 MiB) kept aside.
    s3_upload_id: Mapped[str | None] = mapped_column(String(1024), default=None)
    parts: Mapped[list[str]] = mapped_column(JSON, default=list)
    tail_key: Mapped[str | None] = mapped_column(String(255), default=None)
    tail_size: Mapped[int] = mapped_column(BigInteger, default=0)
    file_id: Mapped[str | None] = mapped_column(String(32), default=None)
    # tus concatenation: "partial" (never a file by itself) or "final" (made of ``concat_parts``, partial upload
    # ids in order); a partial taken by a final names it in ``concat_into``.
    concat: Mapped[str | None] = mapped_column(String(8), default=None)
    concat_parts: Mapped[list[str] | None] = mapped_column(JSON, default=None)
    concat_into: Mapped[str | None] = mapped_column(String(32), default=None)
    writer: Mapped[str | None] = mapped_column(String(32), default=None)
    writer_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    claim: Mapped[str | None] = mapped_column(String(32), default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
