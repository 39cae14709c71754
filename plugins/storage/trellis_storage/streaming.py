"""Download responses: streamed from the backend in chunks, with ``Range`` (206/416), ``ETag`` (304),
the stored content type and an RFC 6266 ``Content-Disposition``. Both backends go through the same code,
so local and S3 files answer byte-for-byte the same headers; only the requested bytes are read."""

from __future__ import annotations

import logging
from urllib.parse import quote

from flask import Response, request
from werkzeug.datastructures import ContentRange, ETags

from trellis.errors import APIError, not_found

from .backends import BackendError
from .models import File
from .placement import backend_of

log = logging.getLogger(__name__)

# Served inline (a browser shows them); everything else is an attachment, so an uploaded HTML or SVG
# page can never run script on this origin.
INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "application/pdf", "text/plain")
INLINE_PREFIXES = ("audio/", "video/")


def serve(record: File, *, public: bool = False) -> Response:
    etag = record.sha256
    headers = {
        "Accept-Ranges": "bytes",
        "ETag": f'"{etag}"',
        "Content-Disposition": content_disposition(record),
        # Public URLs are stable and immutable (a new upload gets a new id); anything else stays private.
        "Cache-Control": "public, max-age=86400" if public else "private, no-store",
    }
    if record.content_type != "application/pdf":
        # Uploads are served from the API's origin: whatever a browser makes of one (an inline image or text,
        # an attachment opened anyway), it runs as a sandboxed document with no script and a unique origin.
        # PDF is the one exception: the browser's own viewer renders it outside this origin and refuses
        # to start inside a sandbox.
        headers["Content-Security-Policy"] = "sandbox"
    if request.if_none_match and request.if_none_match.contains(etag):
        return Response(status=304, headers=headers)

    start, stop, status = 0, record.size, 200
    wanted = request.range
    # Several ranges (multipart/byteranges) are optional in RFC 9110; we answer those with the whole file.
    if wanted is not None and wanted.units == "bytes" and len(wanted.ranges) == 1 and _if_range_holds(etag):
        span = wanted.range_for_length(record.size)
        if span is None:
            raise APIError(
                416,
                f"The requested range is not satisfiable (the file has {record.size} bytes)",
                headers={"Content-Range": f"bytes */{record.size}"},
            )
        start, stop = span
        status = 206
        headers["Content-Range"] = ContentRange("bytes", start, stop, record.size).to_header()

    try:
        chunks = backend_of(record).read(record.key, start, stop if status == 206 else None)
    except BackendError as exc:
        log.error("file %s cannot be read from %s: %s", record.id, record.backend, exc)
        raise not_found("The file's content is not available") from None
    headers["Content-Length"] = str(stop - start)
    response = Response(chunks, status=status, headers=headers, mimetype=None, content_type=record.content_type)
    response.direct_passthrough = True  # chunks go to the server as they come; nothing is buffered
    if request.method == "HEAD":
        chunks.close()
        response.response = []
    return response


def _if_range_holds(etag: str) -> bool:
    """``If-Range`` with a different validator means: send the whole (changed) file instead."""
    header = request.headers.get("If-Range")
    if not header:
        return True
    return ETags([etag]).contains_raw(header) if header.startswith(('"', "W/")) else False


def is_inline(content_type: str) -> bool:
    return content_type in INLINE_TYPES or content_type.startswith(INLINE_PREFIXES)


def content_disposition(record: File) -> str:
    """RFC 6266: an ASCII ``filename`` for old clients plus ``filename*`` with the real (UTF-8) name."""
    kind = "inline" if is_inline(record.content_type) else "attachment"
    quoted = quote(record.display_name, safe="!#$&+-.^_`|~")
    return f"{kind}; filename=\"{record.name}\"; filename*=UTF-8''{quoted}"
