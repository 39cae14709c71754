"""The outermost WSGI layer: nothing leaves the process as a traceback, and over-long URLs get a 414.

Flask's error handlers cover a request's own code; this covers what runs outside them (a failure while
the request's database connection is returned at teardown, the Socket.IO middleware, a bug in another
middleware). Any exception escaping the app becomes the contract's error shape (500) and is logged;
eventlet's default would send the traceback as the body.

Checked against eventlet 0.41.3 (see :mod:`trellis.server`): ``eventlet.wsgi.RESPONSE_414``, a module global
``HttpProtocol.handle_one_request`` reads at each over-long request line, and the server's
``url_length_limit``, ``debug``, ``minimum_chunk_size`` and ``environ`` arguments.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

CHECKED = {"eventlet": "0.41.3"}  # see trellis.server
log = logging.getLogger(__name__)

MAX_URL_BYTES = 8 * 1024
# eventlet refuses request lines at its own limit with an empty 414; ours (8 KB of URL) is checked in
# the app with a JSON body, so eventlet's is set further out and its answer gets the error shape too.
EVENTLET_URL_LENGTH_LIMIT = 64 * 1024

StartResponse = Callable[..., Any]


def error_response(status: int, name: str, message: str) -> tuple[str, list[tuple[str, str]], bytes]:
    payload = json.dumps({"name": name, "status": status, "message": message}).encode()
    reason = {414: "URI Too Long", 500: "Internal Server Error"}.get(status, "Error")
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(payload))),
        ("X-Content-Type-Options", "nosniff"),  # as on every answer of the app
    ]
    return f"{status} {reason}", headers, payload


class SafetyNet:
    """WSGI middleware around everything (Socket.IO's middleware included)."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        url_length = len(environ.get("RAW_PATH_INFO") or environ.get("PATH_INFO", "")) + len(
            environ.get("QUERY_STRING", "")
        )
        if url_length > MAX_URL_BYTES:
            status, headers, payload = error_response(
                414, "URI_TOO_LONG", f"The URL is longer than {MAX_URL_BYTES} bytes; send large inputs in a body"
            )
            start_response(status, headers)
            return [payload]
        try:
            return self.app(environ, start_response)
        except Exception:
            log.exception(
                "error outside the request handlers (%s %s)", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
            )
            status, headers, payload = error_response(
                500, "INTERNAL_SERVER_ERROR", "Internal server error; quote the time when reporting it"
            )
            # exc_info lets a server replace headers it has not sent yet (PEP 3333).
            start_response(status, headers, sys.exc_info())
            return [payload]


def eventlet_server_options() -> dict[str, Any]:
    """Keyword arguments for eventlet's server: no traceback bodies, a JSON 414, no write buffering, chunked
    request bodies readable."""
    import eventlet.wsgi

    status, headers, payload = error_response(
        414, "URI_TOO_LONG", f"The request line is longer than {EVENTLET_URL_LENGTH_LIMIT} bytes"
    )
    head = "".join(f"{key}: {value}\r\n" for key, value in headers)
    eventlet.wsgi.RESPONSE_414 = f"HTTP/1.0 {status}\r\nConnection: close\r\n{head}\r\n".encode() + payload
    # minimum_chunk_size 0: a streamed body's pieces leave as they come (eventlet gathers 4 KiB by default,
    # which holds back every Server-Sent Event; Flask-SocketIO copies the environ, so the per-request
    # ``eventlet.minimum_write_chunk_size`` cannot be set from a view). Downloads stream 256 KiB pieces.
    # wsgi.input_terminated: eventlet's input ends where the body does (Content-Length, the last chunk, or
    # empty without either); werkzeug reads a chunked body only when told so, else it sees an empty one.
    # capitalize_response_headers off: header names leave as the app wrote them (werkzeug's and ours are
    # already in their usual case: X-Request-ID, ETag), not re-cased by eventlet word by word
    # (bench/results/core.md#header-names).
    return {
        "url_length_limit": EVENTLET_URL_LENGTH_LIMIT,
        "debug": False,
        "minimum_chunk_size": 0,
        "environ": {"wsgi.input_terminated": True},
        "capitalize_response_headers": False,
    }
