"""Where the bytes live. Two backends behind one small interface:

``writer(key, content_type)`` → a :class:`Writer` (``write`` chunks, then ``commit`` or ``abort``, and
``close`` once the record is saved); ``read(key, start, stop)`` → an iterator of chunks; ``delete(key)``;
``purge(key)`` (the blob and anything an unfinished upload of it left); ``writing(key)`` (whether a live
writer holds it); ``keys()`` (what is stored, for checks and tests). Keys are made by :func:`key_for` from
the file id: ``ab/cd/<id>``. Nothing here knows about records or requests.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

CHUNK_SIZE = 256 * 1024
# S3 multipart parts must be at least 5 MiB (but the last); 8 MiB is boto3's own default.
S3_PART_SIZE = 8 * 1024 * 1024
_KEY = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{32}$")
# Keys derived from a file's key: ``<key>.v<16 hex>`` a cached image variant (``variants.py``), ``<key>.tus``
# the part file of a local resumable upload, ``<key>.t<16 hex>`` an S3 resumable upload's unfinished part
# (``resumable.py``). They live beside the blob, so whatever removes a file finds them by its key.
_DERIVED = re.compile(r"^[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{32}\.(tus|[vt][0-9a-f]{16})$")
VARIANT_MARK = ".v"
TEMP_PREFIX = ".upload-"


class BackendError(Exception):
    """The storage provider failed (disk, network, S3 error); the message never carries secrets."""


class UnsafeKey(BackendError):
    """A key that is not one of ours, or that would leave the storage root."""


def key_for(file_id: str) -> str:
    """Sharded key of a file id, so no directory grows past 65 536 entries per level."""
    key = f"{file_id[:2]}/{file_id[2:4]}/{file_id}"
    check_key(key)
    return key


def check_key(key: str) -> None:
    if not (_KEY.fullmatch(key) or _DERIVED.fullmatch(key)):
        raise UnsafeKey("not a storage key")


def derived_key(key: str, suffix: str) -> str:
    """A key beside ``key`` (a file's): its variant ``v<hex>``, its tail ``t<hex>``, its part file ``tus``."""
    derived = f"{key}.{suffix}"
    if not (_KEY.fullmatch(key) and _DERIVED.fullmatch(derived)):
        raise UnsafeKey("not a derived storage key")
    return derived


class Writer(Protocol):
    def write(self, chunk: bytes) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> bool:
        """Discard what was written; whether that worked (else the failure is logged)."""

    def close(self) -> None:
        """Done with the key (the record is saved, or the blob given up): a sweep may judge it now."""


class Backend(Protocol):
    name: str

    @property
    def location(self) -> str | None:
        """The bucket for S3; None for local disk."""

    def writer(self, key: str, content_type: str) -> Writer: ...

    def read(self, key: str, start: int = 0, stop: int | None = None) -> Chunks: ...

    def delete(self, key: str) -> None: ...

    def purge(self, key: str) -> None: ...

    def writing(self, key: str) -> contextlib.AbstractContextManager[bool | None]: ...

    def keys(self) -> list[str]: ...


class Chunks:
    """The bytes ``[start, stop)`` of a stored blob as an iterator of chunks.

    The source (file handle, S3 body) is closed when the bytes run out or when ``close()`` is called
    early: a HEAD request, a client that hung up (the WSGI server closes the response iterable).
    """

    def __init__(self, read: Callable[[int], bytes], close: Callable[[], None], length: int | None) -> None:
        self._read = read
        self._close = close
        self._remaining = length
        self._closed = False

    def __iter__(self) -> Chunks:
        return self

    def __next__(self) -> bytes:
        if self._closed or self._remaining == 0:
            self.close()
            raise StopIteration
        size = CHUNK_SIZE if self._remaining is None else min(CHUNK_SIZE, self._remaining)
        chunk = self._read(size)
        if not chunk:
            self.close()
            raise StopIteration
        if self._remaining is not None:
            self._remaining -= len(chunk)
        return chunk

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()


# ---------------------------------------------------------------------------------------------- local


class LocalBackend:
    """Files under ``root``: written to a temp file in the final directory, then ``os.replace``d.

    Liveness is an exclusive ``flock`` the writing process holds on its file (the part, then the blob
    it becomes) until ``close``: the kernel drops it when the process dies, so a sweep in any process
    sharing the directory tells a running upload from a killed one by trying to take the lock.
    """

    name = "local"
    location = None

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def path(self, key: str) -> Path:
        """The file of ``key``; refuses anything that would resolve outside the root (even via symlinks)."""
        check_key(key)
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):
            raise UnsafeKey("key resolves outside the storage root")
        return path

    def writer(self, key: str, content_type: str) -> LocalWriter:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(3):
                # Same directory as the target, so the final os.replace is an atomic rename on one filesystem.
                fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMP_PREFIX}{path.name}-", suffix=".part")
                # A sweep may lock and remove a new file before we lock it: then take another one.
                if _lock(fd) and _same_file(fd, Path(temp)):
                    return LocalWriter(os.fdopen(fd, "wb"), Path(temp), path)
                os.close(fd)
        except OSError as exc:
            raise BackendError(f"cannot write to the storage directory: {exc.strerror}") from None
        raise BackendError("cannot write to the storage directory: its temp files keep being removed")

    def read(self, key: str, start: int = 0, stop: int | None = None) -> Chunks:
        try:
            handle = open(self.path(key), "rb")
        except FileNotFoundError:
            raise BackendError("the stored file is missing") from None
        except OSError as exc:
            raise BackendError(f"cannot read the stored file: {exc.strerror}") from None
        handle.seek(start)
        return Chunks(handle.read, handle.close, None if stop is None else stop - start)

    def delete(self, key: str) -> None:
        """The blob and, for a file's key, its cached image variants."""
        try:
            path = self.path(key)
            path.unlink(missing_ok=True)
            if _KEY.fullmatch(key):
                for variant in path.parent.glob(f"{path.name}{VARIANT_MARK}*"):
                    variant.unlink(missing_ok=True)
        except OSError as exc:
            raise BackendError(f"cannot delete the stored file: {exc.strerror}") from None

    def _files_of(self, key: str) -> list[Path]:
        """The part files of ``key``'s uploads, then its blob: a writer renames its part to the blob, so
        looking in this order cannot miss a live one."""
        path = self.path(key)
        return [*sorted(path.parent.glob(f"{TEMP_PREFIX}{path.name}-*.part")), path]

    @contextlib.contextmanager
    def writing(self, key: str) -> Iterator[bool]:
        """Whether a live process holds ``key`` (writing it, or its record not yet saved). When it does not,
        its files stay locked by us until the block ends."""
        with contextlib.ExitStack() as claims:
            if any(claims.enter_context(_claim(path)) is False for path in self._files_of(key)):
                yield True
            else:
                yield False

    def purge(self, key: str) -> None:
        try:
            for path in self._files_of(key):
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise BackendError(f"cannot delete the stored file: {exc.strerror}") from None

    def keys(self) -> list[str]:
        """Every file under the root, temp files included (relative POSIX paths)."""
        if not self.root.exists():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())


def _lock(fd: int) -> bool:
    """Take the exclusive ``flock`` of an open file without waiting; False if another open file holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed or renamed meanwhile)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _claim(path: Path) -> Iterator[bool | None]:
    """``path`` locked against writers: True while we hold it, False if a live writer does, None if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        yield (_same_file(fd, path) or None) if _lock(fd) else False
    finally:
        os.close(fd)


def remove_stale_parts(root: str | os.PathLike[str]) -> int:
    """Delete the temp files of uploads whose process is gone (``kill -9`` mid-upload); returns how many.

    Temp files live next to their target (``ab/cd/.upload-*.part``). A writer holds its file's lock
    until it is done, so a part we can lock is dead whatever its age, and a locked one is left alone.
    """
    folder = Path(root)
    if not folder.is_dir():
        return 0
    removed = 0
    for part in folder.glob(f"*/*/{TEMP_PREFIX}*.part"):
        try:
            with _claim(part) as free:
                if free:
                    part.unlink()
                    removed += 1
        except OSError as exc:
            log.warning("could not remove a stale upload part: %s", exc.strerror)
    if removed:
        log.info("removed %d stale upload part file(s) from %s", removed, folder)
    return removed


class LocalWriter:
    """Writes the locked temp file; ``commit`` renames it into place and keeps the lock (now on the blob)
    until ``close``, so a sweep leaves the blob alone until its record is saved."""

    def __init__(self, handle: Any, temp: Path, target: Path) -> None:
        self._handle = handle
        self._temp = temp
        self._target = target

    def write(self, chunk: bytes) -> None:
        try:
            self._handle.write(chunk)
        except OSError as exc:
            raise BackendError(f"cannot write the file: {exc.strerror}") from None

    def commit(self) -> None:
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            os.replace(self._temp, self._target)
        except OSError as exc:
            self.abort()
            raise BackendError(f"cannot store the file: {exc.strerror}") from None

    def abort(self) -> bool:
        try:
            self._temp.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove an upload's temp file: %s", exc.strerror)
            return False
        finally:
            self.close()
        return True

    def close(self) -> None:
        self._handle.close()


# ------------------------------------------------------------------------------------------------- S3


class S3Backend:
    """Objects in one bucket, through boto3; uploads stream as multipart uploads of 8 MiB parts."""

    name = "s3"

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.location = bucket

    def writer(self, key: str, content_type: str) -> S3Writer:
        check_key(key)
        return S3Writer(self, key, content_type)

    def read(self, key: str, start: int = 0, stop: int | None = None) -> Chunks:
        check_key(key)
        kwargs: dict[str, Any] = {"Bucket": self.location, "Key": key}
        if start or stop is not None:
            kwargs["Range"] = f"bytes={start}-{'' if stop is None else stop - 1}"
        with s3_errors("read"):
            body = self.client.get_object(**kwargs)["Body"]
        return Chunks(_guarded(body.read), body.close, None if stop is None else stop - start)

    def delete(self, key: str) -> None:
        """The object and, for a file's key, its cached image variants (one listing more per delete)."""
        check_key(key)
        with s3_errors("delete"):
            self.client.delete_object(Bucket=self.location, Key=key)
            if _KEY.fullmatch(key):
                listed = self.client.list_objects_v2(Bucket=self.location, Prefix=f"{key}{VARIANT_MARK}")
                for obj in listed.get("Contents", []):
                    self.client.delete_object(Bucket=self.location, Key=obj["Key"])

    def writing(self, key: str) -> contextlib.AbstractContextManager[None]:
        """S3 cannot tell whether a writer is alive (the caller judges by age)."""
        return contextlib.nullcontext(None)

    def purge(self, key: str) -> None:
        """The object and the unfinished multipart uploads of ``key`` (a killed writer's parts)."""
        check_key(key)
        with s3_errors("delete"):
            uploads = self.client.list_multipart_uploads(Bucket=self.location, Prefix=key).get("Uploads", [])
            for upload in uploads:
                if upload["Key"] == key:
                    self.client.abort_multipart_upload(Bucket=self.location, Key=key, UploadId=upload["UploadId"])
            self.client.delete_object(Bucket=self.location, Key=key)

    def keys(self) -> list[str]:
        """Stored objects and unfinished multipart uploads (an aborted upload must leave neither)."""
        found: list[str] = []
        with s3_errors("list"):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.location):
                found.extend(obj["Key"] for obj in page.get("Contents", []))
            uploads = self.client.list_multipart_uploads(Bucket=self.location).get("Uploads", [])
        found.extend(f"{TEMP_PREFIX}{u['Key']}" for u in uploads)
        return sorted(found)

    def presigned_url(self, key: str, expires_in: int, content_type: str, disposition: str) -> str:
        check_key(key)
        params = {
            "Bucket": self.location,
            "Key": key,
            "ResponseContentType": content_type,
            "ResponseContentDisposition": disposition,
        }
        with s3_errors("sign"):
            return self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in)


def _guarded(read: Callable[[int], bytes]) -> Callable[[int], bytes]:
    def guarded(size: int) -> bytes:
        with s3_errors("read"):
            return read(size)

    return guarded


class S3Writer:
    """Buffers one part at a time: small files go up with one PutObject, large ones as multipart."""

    def __init__(self, backend: S3Backend, key: str, content_type: str) -> None:
        self._backend = backend
        self._key = key
        self._content_type = content_type
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    @property
    def _client(self) -> Any:
        return self._backend.client

    def write(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) >= S3_PART_SIZE:
            self._send_part()

    def _send_part(self) -> None:
        bucket = self._backend.location
        with s3_errors("upload"):
            if self._upload_id is None:
                started = self._client.create_multipart_upload(
                    Bucket=bucket, Key=self._key, ContentType=self._content_type
                )
                self._upload_id = started["UploadId"]
            number = len(self._parts) + 1
            sent = self._client.upload_part(
                Bucket=bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number, Body=bytes(self._buffer)
            )
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"]})
        self._buffer = bytearray()

    def commit(self) -> None:
        bucket = self._backend.location
        try:
            if self._upload_id is None:
                with s3_errors("upload"):
                    self._client.put_object(
                        Bucket=bucket, Key=self._key, Body=bytes(self._buffer), ContentType=self._content_type
                    )
                return
            if self._buffer:
                self._send_part()
            with s3_errors("upload"):
                self._client.complete_multipart_upload(
                    Bucket=bucket, Key=self._key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}
                )
        except BaseException:
            self.abort()
            raise

    def abort(self) -> bool:
        self._buffer = bytearray()
        if self._upload_id is None:
            return True
        try:
            self._client.abort_multipart_upload(Bucket=self._backend.location, Key=self._key, UploadId=self._upload_id)
        except Exception as exc:  # the upload already failed; the sweep aborts what is left (service.sweep)
            log.warning("could not abort S3 multipart upload of %s: %s", self._key, exc.__class__.__name__)
            return False
        self._upload_id = None
        return True

    def close(self) -> None:
        pass


class s3_errors:
    """Turns botocore failures into :class:`BackendError` with the S3 error code, never credentials."""

    def __init__(self, action: str) -> None:
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
        if exc is None:
            return
        from botocore.exceptions import BotoCoreError, ClientError

        if isinstance(exc, ClientError):
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            raise BackendError(f"S3 {self.action} failed: {code}") from None
        if isinstance(exc, BotoCoreError):
            raise BackendError(f"S3 {self.action} failed: {exc.__class__.__name__}") from None


class S3Clients:
    """boto3 clients are costly to build and thread-safe: one per distinct S3 configuration."""

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        self._session: Any = None  # one boto3 session: it caches the service models clients load

    def get(self, settings: dict[str, Any]) -> Any:
        ident = tuple(settings.get(k) for k in ("region", "endpointUrl", "accessKeyId", "secretAccessKey"))
        client = self._clients.get(ident)
        if client is None:
            with self._lock:
                client = self._clients.get(ident)
                if client is None:
                    if self._session is None:
                        import boto3

                        self._session = boto3.session.Session()
                    client = self._clients[ident] = _make_client(self._session, settings)
        return client


def _make_client(session: Any, settings: dict[str, Any]) -> Any:
    from botocore.config import Config

    endpoint = settings.get("endpointUrl") or None
    config = Config(
        signature_version="s3v4",
        # Custom endpoints (MinIO, moto, on-premise) rarely have wildcard DNS for virtual-host buckets.
        s3={"addressing_style": "path" if endpoint else "auto"},
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
    )
    return session.client(
        "s3",
        region_name=settings.get("region") or None,
        endpoint_url=endpoint,
        aws_access_key_id=settings.get("accessKeyId") or None,
        aws_secret_access_key=settings.get("secretAccessKey") or None,
        config=config,
    )
