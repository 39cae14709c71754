"""Signed URLs: a link that serves a file without credentials until it expires (Trellis's own, or an S3
file's presigned one)."""

from __future__ import annotations

import time
from typing import Any

from flask import current_app, url_for
from itsdangerous import BadSignature, URLSafeSerializer

from trellis import db
from trellis.errors import forbidden, not_found, provider_error

from .backends import BackendError, S3Backend
from .models import File
from .placement import backend_of, config
from .streaming import content_disposition

_SIGNER_SALT = "trellis-storage-signed-url"
# The clock signed URLs are issued and checked against (tests move it forward instead of sleeping).
_clock = time.time


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
