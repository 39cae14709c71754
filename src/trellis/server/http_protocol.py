"""eventlet's HTTP/1.1 protocol with the request line and headers parsed in a few lines of Python.

eventlet's ``HttpProtocol`` inherits ``parse_request`` from the standard library's
``BaseHTTPRequestHandler``, which hands the header block to ``http.client.parse_headers`` and so to the
``email`` package's feed parser, the largest part of a get by id's CPU (``bench/results/core.md#header-parsing``).
:class:`FastHttpProtocol` replaces only that method. It keeps what the standard library decides from the
request line and headers: the version checks (400, 505), HTTP/0.9 ``GET`` only, ``//`` reduced to ``/``
at the start of the path, keep-alive from the version and ``Connection``, at most 100 header lines (431),
and eventlet's own limits on a header line (8 KiB) and
on the whole block (64 KiB; its ``FileObjectForHeaders`` wraps ``rfile`` while this runs), answered 431
here where eventlet sent a bare 400. Body handling (length, chunked, ``100-continue``), the WSGI
environ (``eventlet.input`` for the websocket upgrade) and the response are eventlet's, unchanged. A
header line without a colon, or with whitespace before it, is a 400 (RFC 9112 §5.1); the ``email`` parser silently dropped it and every header after it. Its refusals
are the contract's error shape with a status line (the standard library sent an HTML page, and none
at all, HTTP/0.9 style, for an unsupported version).

``httptools`` (C) was not needed: what is left of parsing is eventlet's ``get_environ`` and ``readline``
calls (same section).

Slow clients (:class:`ConnectionGuard`): a request's line and headers must arrive within
``TRELLIS_HEADER_TIMEOUT`` seconds of its first byte (408 otherwise), a new connection must send that
first byte within the same time, and a kept-alive connection may wait ``TRELLIS_IDLE_TIMEOUT`` for its
next request. Eventlet's own server has none of these (a partial request waits forever), and its pool
of connections, once full, stops accepting: ~1,000 clients that each sent half a request line made the
server unreachable. Here a new connection arriving at the cap (``TRELLIS_MAX_CONNECTIONS``) closes the
connection that has waited longest for its next request or for the rest of its headers, so only
connections inside a request (being answered, a websocket, an event stream) can fill the pool. The
common request costs one ``peek`` of bytes already read, a search for the blank line in them and a
deadline in a dict; one sweeper per process closes the connections past their deadlines.

Checked against eventlet 0.41.3 (see :mod:`trellis.server`): ``HttpProtocol.handle_one_request`` calls
``_read_request_line`` then ``parse_request`` with ``rfile`` wrapped in ``FileObjectForHeaders`` (whose
``HeaderLineTooLong`` and ``HeadersTooLarge`` are answered here), ``get_environ`` reads
``headers._headers`` and sets ``eventlet.set_idle`` (replaced here: see :mod:`trellis.server.upgraded`).
"""

from __future__ import annotations

import json
import time
from http import HTTPStatus
from typing import Any

import eventlet
import eventlet.wsgi
import greenlet
from eventlet.support import get_errno

from ..errors import body
from .upgraded import release_buffers

CHECKED = {"eventlet": "0.41.3"}  # see trellis.server
MAX_HEADERS = 100  # the standard library's limit (http.client._MAXHEADERS)
_NAMES = {408: "REQUEST_TIMEOUT", 431: "REQUEST_HEADER_FIELDS_TOO_LARGE", 505: "HTTP_VERSION_NOT_SUPPORTED"}

_GONE = eventlet.wsgi.BROKEN_SOCK | eventlet.wsgi.BAD_SOCK


class HeaderTimeout(Exception):
    """Raised into a connection's green thread when its request line and headers are overdue."""


class ConnectionGuard:
    """One server's limits on slow and idle clients, and its pool of connections (one green thread each).

    ``waiting`` maps the green thread of each connection that waits for a request, or for the rest of
    its head, to its deadline and what ends it then; oldest first, so :meth:`make_room` closes the one
    that waited longest. One sweeper enforces every deadline (:meth:`sweep`): a socket timeout or an
    ``eventlet.Timeout`` per wait would put a timer in the hub for every request."""

    def __init__(self, header_timeout: float, idle_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.pool = eventlet.GreenPool(max_connections)
        self.waiting: dict[greenlet.greenlet, tuple[float, type[BaseException]]] = {}
        # A deadline is met at most this late.
        self.sweep_interval = min(1.0, header_timeout / 4, idle_timeout / 4)

    def make_room(self) -> None:
        """At the cap, close the connection that has waited longest (a connection in a request is never
        closed: with none waiting, the new one waits for a free place as in eventlet)."""
        if self.pool.free() != 0:
            return
        if not self.waiting:
            eventlet.sleep(0)  # connections accepted in a burst register once they have run to their first read
        if self.waiting:
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            eventlet.greenthread.kill(oldest)  # GreenletExit ends its protocol; eventlet closes the socket

    def sweep(self) -> None:
        """End every connection past its deadline, every ``sweep_interval`` seconds, forever."""
        while True:
            eventlet.sleep(self.sweep_interval)
            now = time.monotonic()
            overdue = [(thread, end) for thread, (deadline, end) in self.waiting.items() if deadline <= now]
            for thread, end in overdue:
                if self.waiting.pop(thread, None) is not None:  # not gone meanwhile
                    eventlet.greenthread.kill(thread, end)

    def start(self) -> None:
        eventlet.spawn(self.sweep)

    def protocol(self) -> type[FastHttpProtocol]:
        """The protocol class the server runs for this guard's connections."""
        return type("GuardedHttpProtocol", (FastHttpProtocol,), {"guard": self})


class Headers:
    """The parsed header block, with the few methods eventlet and the standard library call on it:
    ``get`` (first value, any case), ``_headers`` (every ``(name, value)`` in order, read by eventlet's
    ``get_environ``) and ``get_content_type`` (eventlet's default ``text/plain``)."""

    __slots__ = ("_headers", "_first")

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._headers = pairs
        first: dict[str, str] = {}
        for name, value in pairs:
            first.setdefault(name.lower(), value)
        self._first = first

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def __getitem__(self, name: str) -> str | None:
        return self._first.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def items(self) -> list[tuple[str, str]]:
        return list(self._headers)

    def get_content_type(self) -> str:
        value = self.get("content-type")
        return value.split(";", 1)[0].strip().lower() if value else "text/plain"


class FastHttpProtocol(eventlet.wsgi.HttpProtocol):
    """``eventlet.wsgi.HttpProtocol`` whose ``parse_request`` does not go through the ``email`` package,
    with the timeouts of its :class:`ConnectionGuard` (``ConnectionGuard.protocol()`` sets it)."""

    guard: ConnectionGuard
    _answered = False  # a request of this connection got as far as its headers: the next one is "idle"

    def handle(self) -> None:
        self._greenlet = greenlet.getcurrent()
        try:
            super().handle()
        except HeaderTimeout:
            self.send_error(
                HTTPStatus.REQUEST_TIMEOUT, f"The request headers took longer than {self.guard.header_timeout} s"
            )
        finally:
            self.guard.waiting.pop(self._greenlet, None)

    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["eventlet.set_idle"] = self.upgraded  # eventlet's websocket calls it after its handshake
        return environ

    def upgraded(self) -> None:
        """The connection is a websocket now: idle for eventlet (its own ``set_idle``), without the buffers
        of its HTTP requests (:mod:`trellis.server.upgraded`)."""
        self.conn_state[2] = eventlet.wsgi.STATE_IDLE
        release_buffers(self)

    def _read_request_line(self) -> bytes:
        """eventlet's, with deadlines: the first byte within the idle timeout (a new connection: the header
        timeout; past it the connection is closed without an answer), the rest of the head within the
        header timeout from there (408)."""
        rfile, guard, waiting = self.rfile, self.guard, self.guard.waiting
        if rfile.closed:
            self.close_connection = True
            return b""
        waiting[self._greenlet] = (
            time.monotonic() + (guard.idle_timeout if self._answered else guard.header_timeout),
            greenlet.GreenletExit,
        )
        try:
            ahead = rfile.peek(1)  # what the first read brought (b"": the client closed)
            if ahead and b"\n\r\n" not in ahead and b"\n\n" not in ahead:  # the head is still coming
                waiting[self._greenlet] = (time.monotonic() + guard.header_timeout, HeaderTimeout)
            return rfile.readline(self.server.url_length_limit)
        except OSError as exc:  # as eventlet: a reset connection ends quietly
            if get_errno(exc) in _GONE:
                return b""
            raise

    def parse_request(self) -> bool:
        try:
            return self._parse_request()
        except eventlet.wsgi.HeaderLineTooLong:  # eventlet's limits, raised by its reader of the head
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"A header line is longer than {eventlet.wsgi.MAX_HEADER_LINE} bytes",
            )
            return False
        except eventlet.wsgi.HeadersTooLarge:
            self.send_error(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"The headers are larger than {eventlet.wsgi.MAX_TOTAL_HEADER_SIZE} bytes",
            )
            return False
        finally:  # the head is read (or never will be): no deadline, and no longer to be evicted
            self._answered = True
            self.guard.waiting.pop(self._greenlet, None)

    def _parse_request(self) -> bool:
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            number = _version_number(version)
            if number is None:
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            if number >= (1, 1) and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            if number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
                return False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({requestline!r})")
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({command!r})")
                return False
        if path.startswith("//"):  # an open-redirect guard of the standard library (gh-87389)
            path = "/" + path.lstrip("/")
        self.command, self.path = command, path
        pairs = self._read_headers()
        if pairs is None:
            return False
        self.headers = headers = Headers(pairs)
        connection = headers.get("connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A refusal before the app ran: the error shape, then the connection is closed."""
        status = HTTPStatus(code)
        payload = json.dumps(body(code, message or status.phrase, name=_NAMES.get(code))).encode()
        self.close_connection = True
        self.wfile.write(
            f"HTTP/1.1 {code} {status.phrase}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"X-Content-Type-Options: nosniff\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    def _read_headers(self) -> list[tuple[str, str]] | None:
        """``(name, value)`` pairs up to the blank line; None once an error answer has been sent."""
        pairs: list[tuple[str, str]] = []
        readline = self.rfile.readline  # eventlet's FileObjectForHeaders: its size limits raise
        while True:
            line = readline()
            if line in (b"\r\n", b"\n", b""):
                return pairs
            if len(pairs) >= MAX_HEADERS:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
                return None
            text = str(line, "iso-8859-1")
            if text[0] in " \t":  # obsolete line folding: a continuation of the previous value
                if not pairs:
                    self.send_error(HTTPStatus.BAD_REQUEST, "Bad header continuation")
                    return None
                name, value = pairs[-1]
                pairs[-1] = (name, f"{value} {text.strip()}")
                continue
            name, colon, value = text.partition(":")
            if not colon or not name or name[-1] in " \t":
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad header line")
                return None
            pairs.append((name, value.strip(" \t\r\n")))


def _version_number(version: str) -> tuple[int, int] | None:
    """``HTTP/1.1`` → (1, 1); None for anything the standard library would refuse."""
    if not version.startswith("HTTP/"):
        return None
    parts = version[5:].split(".")
    if len(parts) != 2 or not all(p.isdigit() and len(p) <= 10 for p in parts):
        return None
    return int(parts[0]), int(parts[1])
