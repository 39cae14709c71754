"""Where a resumable (tus) upload's bytes wait until the last one arrives, per backend.

- **local**: one part file ``<key>.tus`` beside the blob it becomes (``os.replace`` at the end: one rename on
  one filesystem). A request appending to it holds its ``flock``: a second request, in this process or any
  other on the host, is refused at once (``Busy``), and the lock of a killed process is gone with it.
- **s3**: the chunks go straight into a multipart upload of the final key, never through a local copy. S3
  wants parts of at least 5 MiB but the last, and clients send chunks of any size: what is left over after
  a request (under 5 MiB) is kept as an object of its own, ``<key>.t<hex>`` (a new name each time, so a
  request that loses the race never overwrites the winner's), and goes in front of the next request's bytes.

Every append ends with :meth:`stored`, which makes the bytes durable and says what to record; only the
caller's database update acknowledges them. Whatever an append stored beyond what was recorded is ignored
(local: truncated by the next append; S3: parts numbered past the recorded list are overwritten or left out
when the upload is completed). Nothing here knows about requests or records.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .backends import BackendError, LocalBackend, S3Backend, derived_key, s3_errors

# S3's smallest part but the last; a request's bytes go up in parts of at least this, at most PART_FLUSH.
S3_MIN_PART = 5 * 1024 * 1024
S3_PART_FLUSH = 8 * 1024 * 1024


class Busy(Exception):
    """Another live request is appending to this upload."""


@dataclass(frozen=True)
class Progress:
    """What an upload has durably stored (its row's columns)."""

    key: str
    offset: int
    s3_upload_id: str | None = None
    parts: tuple[str, ...] = ()
    tail_key: str | None = None
    tail_size: int = 0


class Append(Protocol):
    def write(self, chunk: bytes) -> None: ...

    def stored(self, final: bool) -> Progress:
        """Make what was written durable (``final``: the upload's last byte is in): the progress to record
        (its ``offset`` is the caller's to set: it counted the bytes)."""

    def discard(self) -> None:
        """Forget what this append stored (its bytes were not recorded)."""

    def settled(self) -> None:
        """The new progress is recorded: drop what it replaced."""


class Parts(Protocol):
    def appending(
        self, progress: Progress, keep_lease: Callable[[], None]
    ) -> contextlib.AbstractContextManager[Append]:
        """An append after ``progress``; ``keep_lease`` is called before every write that cannot be undone."""

    def finish(self, progress: Progress) -> None:
        """The whole upload becomes the blob at ``progress.key`` (again harmless once done)."""

    def purge(self, progress: Progress) -> None:
        """Every byte of an unfinished upload (its parts, and the blob if it was completed)."""


def parts_of(backend: Any) -> Parts:
    return LocalParts(backend) if isinstance(backend, LocalBackend) else S3Parts(backend)


# ---------------------------------------------------------------------------------------------- local


class LocalParts:
    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend

    def part(self, key: str) -> Any:
        return self.backend.path(derived_key(key, "tus"))

    @contextlib.contextmanager
    def appending(self, progress: Progress, keep_lease: Callable[[], None]) -> Iterator[LocalAppend]:
        """The part file, locked; the first append creates it (so an upload never written to leaves nothing)."""
        path = self.part(progress.key)
        try:
            if progress.offset == 0:
                path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.fdopen(os.open(path, os.O_RDWR | (os.O_CREAT if progress.offset == 0 else 0), 0o644), "r+b")
        except FileNotFoundError:
            raise BackendError("the upload's stored part is missing") from None
        except OSError as exc:
            raise BackendError(f"cannot open the upload's part: {exc.strerror}") from None
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Busy() from None
            yield LocalAppend(handle, progress)
        finally:
            handle.close()  # and with it the lock

    def finish(self, progress: Progress) -> None:
        part, blob = self.part(progress.key), self.backend.path(progress.key)
        try:
            if progress.offset == 0 and not part.exists() and not blob.exists():  # an empty file, never appended to
                blob.parent.mkdir(parents=True, exist_ok=True)
                blob.touch()
                return
            os.replace(part, blob)
        except FileNotFoundError:
            if not blob.exists():
                raise BackendError("the upload's stored part is missing") from None
        except OSError as exc:
            raise BackendError(f"cannot store the file: {exc.strerror}") from None

    def purge(self, progress: Progress) -> None:
        try:
            self.part(progress.key).unlink(missing_ok=True)
        except OSError as exc:
            raise BackendError(f"cannot delete the upload's part: {exc.strerror}") from None
        self.backend.delete(progress.key)


class LocalAppend:
    """Appends at the recorded offset: whatever a dead request wrote past it is cut off first."""

    def __init__(self, handle: Any, progress: Progress) -> None:
        self._handle = handle
        self._progress = progress
        try:
            handle.truncate(progress.offset)
            handle.seek(progress.offset)
        except OSError as exc:
            raise BackendError(f"cannot write the upload's part: {exc.strerror}") from None

    def write(self, chunk: bytes) -> None:
        try:
            self._handle.write(chunk)
        except OSError as exc:
            raise BackendError(f"cannot write the upload's part: {exc.strerror}") from None

    def stored(self, final: bool) -> Progress:
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())  # acknowledged bytes survive a crash of the machine too
        except OSError as exc:
            raise BackendError(f"cannot write the upload's part: {exc.strerror}") from None
        return self._progress

    def discard(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._handle.truncate(self._progress.offset)

    def settled(self) -> None:
        pass


# ------------------------------------------------------------------------------------------------- S3


class S3Parts:
    def __init__(self, backend: S3Backend) -> None:
        self.backend = backend

    @property
    def _client(self) -> Any:
        return self.backend.client

    @contextlib.contextmanager
    def appending(self, progress: Progress, keep_lease: Callable[[], None]) -> Iterator[S3Append]:
        yield S3Append(self, progress, keep_lease)

    def finish(self, progress: Progress) -> None:
        bucket = self.backend.location
        with s3_errors("upload"):
            if progress.s3_upload_id is None:  # an empty file: no part was ever sent
                self._client.put_object(Bucket=bucket, Key=progress.key, Body=b"")
                return
            parts = [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(progress.parts, start=1)]
            try:
                self._client.complete_multipart_upload(
                    Bucket=bucket, Key=progress.key, UploadId=progress.s3_upload_id, MultipartUpload={"Parts": parts}
                )
            except Exception as exc:
                # Completed before (a request that finished it died before recording so): the object is there.
                if not (_s3_code(exc) == "NoSuchUpload" and self._exists(progress.key)):
                    raise

    def _exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self.backend.location, Key=key)
        except Exception as exc:
            if _s3_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def purge(self, progress: Progress) -> None:
        bucket = self.backend.location
        with s3_errors("delete"):
            if progress.s3_upload_id is not None:
                with contextlib.suppress(self._client.exceptions.NoSuchUpload):
                    self._client.abort_multipart_upload(Bucket=bucket, Key=progress.key, UploadId=progress.s3_upload_id)
            if progress.tail_key is not None:
                self._client.delete_object(Bucket=bucket, Key=progress.tail_key)
        self.backend.purge(progress.key)

    def read_tail(self, progress: Progress) -> bytes:
        if progress.tail_key is None or not progress.tail_size:
            return b""
        with s3_errors("read"):
            body = self._client.get_object(
                Bucket=self.backend.location, Key=progress.tail_key, Range=f"bytes=0-{progress.tail_size - 1}"
            )["Body"]
            return body.read()


@dataclass
class S3Append:
    """The previous tail, then this request's bytes; full parts go up as they fill, the rest becomes the new
    tail (or, ``final``, the last part)."""

    store: S3Parts
    progress: Progress
    keep_lease: Callable[[], None]
    _buffer: bytearray = field(default_factory=bytearray)
    _upload_id: str | None = None
    _parts: list[str] = field(default_factory=list)
    _started_here: bool = False
    _new_tail: str | None = None

    def __post_init__(self) -> None:
        self._buffer += self.store.read_tail(self.progress)
        self._upload_id = self.progress.s3_upload_id
        self._parts = list(self.progress.parts)

    @property
    def _client(self) -> Any:
        return self.store.backend.client

    def write(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) >= S3_PART_FLUSH:
            self._send_part()

    def _send_part(self) -> None:
        self.keep_lease()  # no part is sent by a request that lost the upload to another one
        bucket, key = self.store.backend.location, self.progress.key
        with s3_errors("upload"):
            if self._upload_id is None:
                self._upload_id = self._client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
                self._started_here = True
            sent = self._client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=self._upload_id,
                PartNumber=len(self._parts) + 1,
                Body=bytes(self._buffer),
            )
        self._parts.append(sent["ETag"])
        self._buffer = bytearray()

    def stored(self, final: bool) -> Progress:
        if self._buffer and (final or len(self._buffer) >= S3_MIN_PART):
            self._send_part()
        tail_key, tail_size = None, 0
        if self._buffer:
            self.keep_lease()
            tail_key = derived_key(self.progress.key, f"t{secrets.token_hex(8)}")
            with s3_errors("upload"):
                self._client.put_object(Bucket=self.store.backend.location, Key=tail_key, Body=bytes(self._buffer))
            self._new_tail, tail_size = tail_key, len(self._buffer)
        return replace(
            self.progress,
            s3_upload_id=self._upload_id,
            parts=tuple(self._parts),
            tail_key=tail_key,
            tail_size=tail_size,
        )

    def discard(self) -> None:
        bucket = self.store.backend.location
        with contextlib.suppress(Exception):  # best effort: what is not recorded is never read
            if self._new_tail is not None:
                self._client.delete_object(Bucket=bucket, Key=self._new_tail)
            if self._started_here and self._upload_id is not None:
                self._client.abort_multipart_upload(Bucket=bucket, Key=self.progress.key, UploadId=self._upload_id)

    def settled(self) -> None:
        old = self.progress.tail_key
        if old is not None and old != self._new_tail:
            with contextlib.suppress(Exception):  # a leftover tail is removed with its upload
                self._client.delete_object(Bucket=self.store.backend.location, Key=old)


def _s3_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))
