"""Transformed images served from a download route (``?width=…&format=webp``), cached beside the file.

- The result of one transform of one file is stored in the file's backend at ``<key>.v<hash of the
  transform>``: computed once, then read like any small blob. A file's bytes never change (a new upload is
  a new id), so a variant never goes stale; it is removed with its file (``Backend.delete``).
- Many requests asking for the same missing variant at once in a process wait for the one computing it
  (:class:`SingleFlight`); processes do not coordinate (each computes it at most once).
- The Pillow work runs in an OS thread (``trellis.offload``), so a 50-megapixel decode does not stall the other
  requests of an eventlet process (health probes included). First the header is read there
  (``imaging.inspect``): whatever it decides (too many pixels, a result over 4096 px, too much memory) is a 400
  at once, without waiting for a decode slot. Then the decode takes one of ``_DECODES``' slots (one fewer than
  the cores); a few more wait for one, and past those the answer is 503 with ``Retry-After``.
- The answer carries its own ``Content-Type`` and an ``ETag``: the SHA-256 of the source's SHA-256 and of
  the rendering (our version, Pillow's, the parameters), which decide the bytes. Hashing the output instead
  would block the hub on every large variant and read the cache for every 304 (``bench/results/modules.md#pillow``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from dataclasses import replace
from typing import Any

import PIL
from flask import Response, request
from marshmallow import Schema, fields, validate
from sqlalchemy import select

from trellis import db
from trellis.errors import APIError, bad_request, not_found, provider_error
from trellis.offload import core_slots, off_hub

from . import imaging
from .backends import Backend, BackendError, LocalBackend, derived_key
from .decode_gate import DecodeGate, Saturated
from .models import File
from .placement import backend_of
from .streaming import content_disposition

log = logging.getLogger(__name__)

# Bump when the rendering changes (another filter, encoder options): new keys, so old variants are not served.
RENDERING = "1"
SPOOL_BYTES = 16 * 1024 * 1024  # a source is read into memory up to this, past it into a temporary file
# One core is left to the hub: with every core decoding, the other requests' p99 tripled (bench figures).
_DECODES = DecodeGate(running=max(1, (os.cpu_count() or 1) - 1), waiting=4)
_INSPECTING = core_slots()  # reading a header is short: it never waits behind a decode
RETRY_AFTER_SECONDS = 2


class TransformArgs(Schema):
    """The transform parameters of the download routes; none of them: the file as stored."""

    width = fields.Integer(validate=validate.Range(min=1, max=imaging.MAX_SIDE), metadata={"description": "pixels"})
    height = fields.Integer(validate=validate.Range(min=1, max=imaging.MAX_SIDE), metadata={"description": "pixels"})
    fit = fields.String(
        validate=validate.OneOf(imaging.FITS),
        metadata={
            "description": "with width and height: cover (crop), contain (pad), inside (default), fill (stretch)"
        },
    )
    format = fields.String(
        validate=validate.OneOf(list(imaging.FORMATS)), metadata={"description": "default: the source's"}
    )
    quality = fields.Integer(validate=validate.Range(min=1, max=100), metadata={"description": "JPEG and WebP"})


def transform_of(args: dict[str, Any]) -> imaging.Transform | None:
    """The asked transform, or None when the request asks for none."""
    if not args:
        return None
    return imaging.Transform(
        width=args.get("width"),
        height=args.get("height"),
        fit=args.get("fit") or "inside",
        format=args.get("format"),
        quality=args.get("quality"),
    )


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: bytes | None = None
        self.error: BaseException | None = None


class SingleFlight:
    """One computation per key at a time in this process; callers that come meanwhile get its result (or its
    error). Green under eventlet: a waiting request costs the hub nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}

    def run(self, key: str, compute: Any) -> bytes:
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.result is not None
            return flight.result
        try:
            flight.result = compute()
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()


_flights = SingleFlight()


def _rendering_of(transform: imaging.Transform) -> str:
    """What decides a variant's bytes besides the source: our rendering, Pillow's version, the transform."""
    return hashlib.sha256(f"{RENDERING}|{PIL.__version__}|{transform.canonical()}".encode()).hexdigest()


def variant_key(record: File, transform: imaging.Transform) -> str:
    return derived_key(record.key, f"v{_rendering_of(transform)[:16]}")


def variant_etag(record: File, transform: imaging.Transform) -> str:
    """A variant's bytes are a function of the source's (its SHA-256) and the rendering: their hash together is
    a strong validator known before the variant is read or computed, so a 304 costs neither."""
    return hashlib.sha256(f"{record.sha256}|{_rendering_of(transform)}".encode()).hexdigest()


def serve_image(record: File, transform: imaging.Transform, *, public: bool = False) -> Response:
    """The transformed image (computed once, then from the cache); 400 if the file cannot be transformed."""
    try:
        fmt = imaging.output_format(record.content_type, transform)
    except imaging.BadImage as exc:
        raise bad_request(str(exc)) from None
    backend = backend_of(record)
    key = variant_key(record, transform)
    etag = variant_etag(record, transform)
    headers = {
        "ETag": f'"{etag}"',
        "Content-Disposition": content_disposition(record).replace("attachment;", "inline;", 1),
        "Cache-Control": "public, max-age=86400" if public else "private, no-store",
        "Content-Security-Policy": "sandbox",
    }
    if request.if_none_match and request.if_none_match.contains(etag):
        return Response(status=304, headers=headers)
    data = _cached(backend, key)
    if data is None:
        data = _flights.run(key, lambda: _compute(backend, record, transform, key, fmt))
    response = Response(
        b"" if request.method == "HEAD" else data, headers=headers, content_type=imaging.media_type(fmt)
    )
    response.headers["Content-Length"] = str(len(data))
    return response


def _cached(backend: Backend, key: str) -> bytes | None:
    try:
        chunks = backend.read(key)
    except BackendError:
        return None  # not computed yet (or unreadable: computed and stored again)
    try:
        return b"".join(chunks)
    except BackendError:
        return None
    finally:
        chunks.close()


def _compute(backend: Backend, record: File, transform: imaging.Transform, key: str, fmt: str) -> bytes:
    """Render (and keep) the variant. On local disk the whole job (read, render, write with its fsync) runs in
    the OS thread: a blocking disk write on the hub would stall every request of the process. S3's network
    calls stay on the hub, where they are cooperative."""
    transform = replace(transform, format=fmt)
    local = isinstance(backend, LocalBackend)
    source = None if local else tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    try:
        try:
            if not local:
                _spool(backend, record, source)
            off_hub(_INSPECTING, _inspect_job, backend if local else None, record.key, source, transform)
            with _DECODES.admitted() as slots:
                data = off_hub(slots, _render_job, backend if local else None, record.key, key, source, transform)
        except BackendError as exc:
            log.error("file %s cannot be read from %s: %s", record.id, record.backend, exc)
            raise not_found("The file's content is not available") from None
        except imaging.BadImage as exc:
            raise bad_request(str(exc)) from None
        except Saturated:
            raise APIError(
                503,
                "Too many images are being transformed right now; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            ) from None
    finally:
        if source is not None:
            source.close()
    if not local:
        _store(backend, record.id, key, data, fmt)
    _drop_if_deleted(backend, record.id, key)
    return data


def _spool(backend: Backend, record: File, source: Any) -> None:
    for chunk in backend.read(record.key):
        source.write(chunk)
    source.seek(0)


def _opened(local: LocalBackend, file_key: str) -> Any:
    try:
        return open(local.path(file_key), "rb")
    except OSError as exc:
        raise BackendError(f"cannot read the stored file: {exc.strerror}") from None


def _inspect_job(local: LocalBackend | None, file_key: str, source: Any, transform: imaging.Transform) -> None:
    """In an OS thread: what the header refuses (:class:`imaging.BadImage`), before any decode slot is taken."""
    if local is None:
        imaging.inspect(source, transform)
        source.seek(0)
        return
    with _opened(local, file_key) as stored:
        imaging.inspect(stored, transform)


def _render_job(
    local: LocalBackend | None, file_key: str, key: str, source: Any, transform: imaging.Transform
) -> bytes:
    """What runs in the OS thread: with a local backend, reading the file and keeping the result too."""
    try:
        if local is None:
            return imaging.render(source, transform)
        with _opened(local, file_key) as stored:
            data = imaging.render(stored, transform)
    finally:
        imaging.release_memory()
    assert transform.format is not None
    _store(local, file_key, key, data, transform.format)
    return data


def _store(backend: Backend, file_id: str, key: str, data: bytes, fmt: str) -> None:
    """Keep the result; a failure only costs computing it again next time."""
    try:
        writer = backend.writer(key, imaging.media_type(fmt))
        try:
            writer.write(data)
            writer.commit()
        finally:
            writer.close()
    except BackendError as exc:
        log.warning("could not cache an image variant of %s: %s", file_id, exc)


def _drop_if_deleted(backend: Backend, file_id: str, key: str) -> None:
    """A file deleted while its variant was computed loses it again (its delete may have run before the write)."""
    db.session.rollback()  # a fresh look (the request's snapshot may predate the delete)
    if db.session.execute(select(File.id).where(File.id == file_id)).first() is None:
        try:
            backend.delete(key)
        except BackendError as exc:
            raise provider_error(f"Removing a variant of a deleted file failed: {exc}") from None
