"""Transformed images served from a download route (``?width=…&format=webp``), cached beside the file.

- The result of one transform of one file is stored in the file's backend at ``<key>.v<hash of the
  transform>``: computed once, then read like any small blob. A file's bytes never change (a new upload is
  a new id), so a variant never goes stale; it is removed with its file (``Backend.delete``).
- Many requests asking for the same missing variant at once in a process wait for the one computing it
  (:class:`SingleFlight`); processes do not coordinate (each computes it at most once).
- The Pillow work runs in an OS thread (``trellis.offload``), at most one per core, so a 50-megapixel
  decode does not stall the other requests of an eventlet process.
- The answer carries its own ``Content-Type`` and an ``ETag`` that is the SHA-256 of its bytes.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from dataclasses import replace
from typing import Any

from flask import Response, request
from marshmallow import Schema, fields, validate
from sqlalchemy import select

from trellis import db
from trellis.errors import bad_request, not_found, provider_error
from trellis.offload import core_slots, off_hub

from . import imaging
from .backends import Backend, BackendError, derived_key
from .models import File
from .service import backend_of, content_disposition

log = logging.getLogger(__name__)

# Bump when the rendering changes (another filter, encoder options): new keys, so old variants are not served.
RENDERING = "1"
SPOOL_BYTES = 16 * 1024 * 1024  # a source is read into memory up to this, past it into a temporary file
_SLOTS = core_slots()


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


def variant_key(record: File, transform: imaging.Transform) -> str:
    digest = hashlib.sha256(f"{RENDERING}|{transform.canonical()}".encode()).hexdigest()[:16]
    return derived_key(record.key, f"v{digest}")


def serve_image(record: File, transform: imaging.Transform, *, public: bool = False) -> Response:
    """The transformed image (computed once, then from the cache); 400 if the file cannot be transformed."""
    try:
        fmt = imaging.output_format(record.content_type, transform)
    except imaging.BadImage as exc:
        raise bad_request(str(exc)) from None
    backend = backend_of(record)
    key = variant_key(record, transform)
    data = _cached(backend, key)
    if data is None:
        data = _flights.run(key, lambda: _compute(backend, record, transform, key, fmt))
    etag = hashlib.sha256(data).hexdigest()
    headers = {
        "ETag": f'"{etag}"',
        "Content-Disposition": content_disposition(record).replace("attachment;", "inline;", 1),
        "Cache-Control": "public, max-age=86400" if public else "private, no-store",
        "Content-Security-Policy": "sandbox",
    }
    if request.if_none_match and request.if_none_match.contains(etag):
        return Response(status=304, headers=headers)
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
    source = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    try:
        try:
            for chunk in backend.read(record.key):
                source.write(chunk)
        except BackendError as exc:
            log.error("file %s cannot be read from %s: %s", record.id, record.backend, exc)
            raise not_found("The file's content is not available") from None
        source.seek(0)
        try:
            data = off_hub(_SLOTS, imaging.render, source, replace(transform, format=fmt))
        except imaging.BadImage as exc:
            raise bad_request(str(exc)) from None
    finally:
        source.close()
    _store(backend, record, key, data, fmt)
    return data


def _store(backend: Backend, record: File, key: str, data: bytes, fmt: str) -> None:
    """Keep the result; a file deleted meanwhile loses it again (its delete may have run before this write)."""
    try:
        writer = backend.writer(key, imaging.media_type(fmt))
        try:
            writer.write(data)
            writer.commit()
        finally:
            writer.close()
    except BackendError as exc:  # served all the same; computed again next time
        log.warning("could not cache an image variant of file %s: %s", record.id, exc)
        return
    db.session.rollback()  # a fresh look (the request's snapshot may predate the delete)
    if db.session.execute(select(File.id).where(File.id == record.id)).first() is None:
        try:
            backend.delete(key)
        except BackendError as exc:
            raise provider_error(f"Removing a variant of a deleted file failed: {exc}") from None
