"""Cross-origin access for browser apps: one reading of ``TRELLIS_CORS_ORIGINS`` for HTTP and Socket.IO.

The setting is ``*`` (any origin, the default) or a comma-separated list of origins. HTTP routes get
their headers from flask-cors (preflight answers included); Socket.IO checks the same list itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from flask import Flask, Response
from flask_cors import CORS

from . import current

# The headers a browser app sends: credentials (admin key or Bearer token) and a JSON body.
# The tus headers: resumable uploads (the Storage module's /storage/uploads) from tus-js-client or Uppy in a page.
TUS_REQUEST_HEADERS = (
    "Tus-Resumable",
    "Upload-Length",
    "Upload-Offset",
    "Upload-Metadata",
    "Upload-Checksum",
    "Upload-Defer-Length",
    "Upload-Concat",
)
TUS_RESPONSE_HEADERS = (
    "Location",
    "Upload-Offset",
    "Upload-Length",
    "Upload-Expires",
    "Upload-Metadata",
    "Tus-Resumable",
    "Tus-Version",
    "Tus-Extension",
    "Tus-Max-Size",
    "Tus-Checksum-Algorithm",
    "Trellis-File-Id",
)
ALLOWED_HEADERS = (
    "Authorization",
    "Content-Type",
    "masterkey",
    "X-Request-ID",
    "Range",
    "Last-Event-ID",
    *TUS_REQUEST_HEADERS,
)
EXPOSED_HEADERS = ("X-Request-ID", "Retry-After", "Content-Range", "Content-Disposition", "ETag", *TUS_RESPONSE_HEADERS)
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Browsers cap this (Chromium: 2 h, Firefox: 24 h); 10 minutes spares most preflights.
PREFLIGHT_MAX_AGE = 600


def allowed_origins(app: Flask) -> str | list[str]:
    """``"*"`` or the list of origins from the setting (blanks dropped, whitespace trimmed)."""
    raw = app.config.get("CORS_ORIGINS") or "*"
    items = raw if isinstance(raw, list) else str(raw).split(",")
    origins = [str(item).strip() for item in items if str(item).strip()]
    return "*" if not origins or "*" in origins else origins


def init_cors(app: Flask) -> None:
    """CORS headers on every HTTP route (REST, GraphQL, files, OpenAPI); an origin not listed gets none."""
    origins = allowed_origins(app)
    CORS(
        app,
        origins=origins,
        send_wildcard=origins == "*",  # "*" rather than the echoed origin: one cacheable answer for all
        methods=list(METHODS),
        allow_headers=list(ALLOWED_HEADERS),
        expose_headers=list(EXPOSED_HEADERS),
        max_age=PREFLIGHT_MAX_AGE,
        supports_credentials=False,  # credentials travel in headers, never in cookies
        vary_header=True,
    )
    _answer_requests_without_origin_from_a_constant(app)


def _answer_requests_without_origin_from_a_constant(app: Flask) -> None:
    """flask-cors works out the headers of every response: it decodes the path, matches it against its
    resource patterns and assembles a MultiDict (``bench/results/core.md#cors-headers``). Without an
    ``Origin`` header (servers, scripts, same-origin pages), outside a preflight, the answer cannot
    differ between requests: one resource pattern (the default, every path) and no request header to
    read. So flask-cors's own function is run once here on such a request and its headers are copied
    onto every such response; requests with an ``Origin`` still go through flask-cors."""
    functions = app.after_request_funcs.setdefault(None, [])
    position = next(i for i, f in enumerate(functions) if f.__name__ == "cors_after_request")
    full = cast("Callable[[Response], Response]", functions[position])  # flask-cors's, not a coroutine
    with app.test_request_context("/", method="GET"):
        # Only what flask-cors adds: the empty response's own Content-Type and Content-Length must not be
        # copied, or every response carries two Content-Types (browsers use the last: text/html).
        before = set(app.response_class().headers.items())
        constant = [item for item in full(app.response_class()).headers.items() if item not in before]

    def cors_after_request(response: Response) -> Response:
        environ: dict[str, Any] = current.request().environ
        if (
            "HTTP_ORIGIN" in environ
            or environ.get("REQUEST_METHOD") == "OPTIONS"
            or "HTTP_ACCESS_CONTROL_REQUEST_PRIVATE_NETWORK" in environ
            or "Access-Control-Allow-Origin" in response.headers
        ):
            return full(response)
        for name, value in constant:
            response.headers.add(name, value)
        return response

    functions[position] = cors_after_request
