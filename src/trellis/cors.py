"""Cross-origin access for browser apps: one reading of ``TRELLIS_CORS_ORIGINS`` for HTTP and Socket.IO.

The setting is ``*`` (any origin, the default) or a comma-separated list of origins. HTTP routes get
their headers from flask-cors (preflight answers included); Socket.IO checks the same list itself.
"""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

# The headers a browser app sends: credentials (admin key or Bearer token) and a JSON body.
ALLOWED_HEADERS = ("Authorization", "Content-Type", "masterkey", "X-Request-ID", "Range")
EXPOSED_HEADERS = ("X-Request-ID", "Retry-After", "Content-Range", "Content-Disposition")
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
